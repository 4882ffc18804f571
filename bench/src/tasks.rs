//! Background calls: what making a call a task costs next to the plain call, how fast
//! a task is read back, and what a stored task weighs — with the in-process store and
//! with Redis (a private `redis-server` on 127.0.0.1 when one is installed; the Redis
//! rows say "not measured" otherwise).
//!
//! All at c=1 through the REST surface (`POST /v1/tools/{name}/call`, plain and with
//! `"background": true`; `GET /v1/tasks/{id}`), the plain and background calls
//! alternating call by call so drift hits both alike.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::Settings;
use crate::client::http_client;
use crate::load::median_duration;
use crate::overhead::gateway_config;
use crate::proc::{Gateway, Proc, TempDir, Upstreams, free_port, toolgate_bin};
use crate::report::{Report, micros};
use crate::upstreams::{API_OPERATION, openapi_spec};

/// A private Redis for the Redis rows.
struct Redis {
    proc: Proc,
    port: u16,
}

impl Redis {
    async fn start() -> Option<Redis> {
        let port = free_port().ok()?;
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let proc = Proc::spawn("redis-server", &mut cmd).ok()?;
        let redis = Redis { proc, port };
        for _ in 0..100 {
            if redis.used_memory().is_some() {
                return Some(redis);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// `used_memory` from `INFO memory`, through `redis-cli`.
    fn used_memory(&self) -> Option<u64> {
        let _alive = self.proc.pid();
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string(), "info", "memory"])
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .and_then(|v| v.trim().parse().ok())
    }
}

/// One REST client of the gateway's API tool.
struct Client {
    http: reqwest::Client,
    base: String,
    tool: String,
}

impl Client {
    async fn post(&self, background: bool) -> Result<Value> {
        let mut body = json!({"arguments": {"id": "42"}});
        if background {
            body["background"] = json!(true);
        }
        let response = self
            .http
            .post(format!("{}/v1/tools/{}/call", self.base, self.tool))
            .json(&body)
            .send()
            .await?;
        let status = response.status().as_u16();
        let answer: Value = response.json().await.unwrap_or(Value::Null);
        let expected = if background { 202 } else { 200 };
        if status != expected {
            bail!("POST (background: {background}): HTTP {status}: {answer}");
        }
        Ok(answer)
    }

    async fn task(&self, id: &str) -> Result<Value> {
        let response = self
            .http
            .get(format!("{}/v1/tasks/{id}", self.base))
            .send()
            .await?;
        let status = response.status().as_u16();
        let answer: Value = response.json().await.unwrap_or(Value::Null);
        if status != 200 {
            bail!("GET /v1/tasks/{id}: HTTP {status}: {answer}");
        }
        Ok(answer)
    }

    /// Waits (bounded) for every task to end.
    async fn settle(&self, ids: &[String]) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        for id in ids {
            loop {
                let task = self.task(id).await?;
                if !matches!(task["status"].as_str(), Some("working" | "input_required")) {
                    break;
                }
                if Instant::now() > deadline {
                    bail!("task {id} still running after 60 s: {task}");
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        Ok(())
    }
}

pub(crate) async fn run(settings: &Settings, report: &mut Report) -> Result<()> {
    if !settings.wants("tasks") {
        return Ok(());
    }
    let bin = toolgate_bin(settings.toolgate.as_deref())?;
    let upstreams = Upstreams::start(1)?;
    let dir = TempDir::new("tasks")?;
    let spec_path = dir.path().join("bench-api.json");
    std::fs::write(
        &spec_path,
        openapi_spec(&upstreams.url("/api"), 0).to_string(),
    )?;
    let redis = Redis::start().await;
    let backends: [(&str, Option<&Redis>); 2] = [("memory", None), ("Redis", redis.as_ref())];
    for (backend, store) in backends {
        if backend == "Redis" && store.is_none() {
            report.row(
                "background calls, Redis",
                "not measured (no redis-server on PATH)",
            );
            continue;
        }
        let mut config = gateway_config(&upstreams, &spec_path.display().to_string())?;
        config["tasks"] = json!({"max_running_per_tenant": 10_000, "max_stored": 1_000_000});
        if let Some(redis) = store {
            config["state"] =
                json!({"backend": "redis", "url": redis.url(), "key_prefix": "bench:"});
        }
        let gateway = Gateway::start(&bin, "tasks", &config)
            .await
            .context("start the gateway")?;
        measure(settings, report, backend, &gateway, store).await?;
    }
    Ok(())
}

async fn measure(
    settings: &Settings,
    report: &mut Report,
    backend: &str,
    gateway: &Gateway,
    redis: Option<&Redis>,
) -> Result<()> {
    let client = Client {
        http: http_client()?,
        base: gateway.base.clone(),
        tool: format!("api__{API_OPERATION}"),
    };
    let calls = if settings.smoke { 5 } else { 2_000 };
    // Warm up both paths (connections, the validator, the store).
    for _ in 0..calls.min(50) {
        client.post(false).await?;
        let created = client.post(true).await?;
        let id = created["task_id"].as_str().unwrap_or_default().to_owned();
        client.settle(&[id]).await?;
    }

    let mut plain = Vec::with_capacity(calls);
    let mut create = Vec::with_capacity(calls);
    let mut ids = Vec::with_capacity(calls);
    for i in 0..calls {
        // Alternating which goes first: drift and caching hit both alike.
        for background in [i % 2 == 0, i % 2 != 0] {
            let started = Instant::now();
            let answer = client.post(background).await?;
            let took = started.elapsed();
            if background {
                create.push(took);
                let id = answer["task_id"]
                    .as_str()
                    .with_context(|| format!("no task_id in {answer}"))?;
                ids.push(id.to_owned());
            } else {
                plain.push(took);
            }
        }
    }
    client.settle(&ids).await?;
    let mut get = Vec::with_capacity(ids.len());
    for id in &ids {
        let started = Instant::now();
        client.task(id).await?;
        get.push(started.elapsed());
    }
    let (plain, create, get) = (
        median_duration(&mut plain),
        median_duration(&mut create),
        median_duration(&mut get),
    );
    report.row(
        format!("background call created vs plain call, REST, {backend} (c=1, median of {calls})"),
        format!(
            "{:.0} µs vs {:.0} µs ({:+.0} µs; the task's call runs after the answer)",
            micros(create),
            micros(plain),
            micros(create) - micros(plain)
        ),
    );
    report.row(
        format!("GET /v1/tasks/{{id}} of a finished task, {backend} (c=1, median of {calls})"),
        format!("{:.0} µs", micros(get)),
    );

    // What one stored (finished, small-result) task weighs.
    let stored = if settings.smoke { 20 } else { 5_000 };
    let rss_before = gateway.rss_kb();
    let redis_before = redis.and_then(Redis::used_memory);
    let mut more = Vec::with_capacity(stored);
    for _ in 0..stored {
        let created = client.post(true).await?;
        more.push(created["task_id"].as_str().unwrap_or_default().to_owned());
    }
    client.settle(&more).await?;
    let per_task = match (redis, redis_before.zip(redis.and_then(Redis::used_memory))) {
        (Some(_), Some((before, after))) => {
            Some(after.saturating_sub(before) as f64 / stored as f64)
        }
        (Some(_), None) => None,
        (None, _) => rss_before
            .zip(gateway.rss_kb())
            .map(|(before, after)| after.saturating_sub(before) as f64 * 1024.0 / stored as f64),
    };
    let measured = match redis {
        Some(_) => "Redis used_memory",
        None => "gateway RSS",
    };
    report.row(
        format!("memory per stored task, {backend} ({stored} finished tasks, {measured})"),
        per_task.map_or_else(
            || "not measured".to_owned(),
            |bytes| format!("{:.1} KB", bytes / 1024.0),
        ),
    );
    Ok(())
}
