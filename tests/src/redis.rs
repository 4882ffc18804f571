//! Redis for the scale-out tests: the shared server (`REDIS_URL`, default
//! `redis://127.0.0.1:6379`) and private servers a test may stop and start again
//! (never the shared one).
//!
//! A missing Redis or `redis-server` is a notice and a skip, except under `CI=true`,
//! where it fails the test (`.ci/run` makes sure one is running).

use std::path::PathBuf;
use std::time::Duration;

use crate::{Proc, free_port, missing, wait_for};

/// `REDIS_URL`, or the local default.
pub fn redis_url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// True when Redis at `url` answers PING within 2 s.
pub async fn ping(url: &str) -> bool {
    let Ok(client) = redis::Client::open(url) else {
        return false;
    };
    let answer = tokio::time::timeout(Duration::from_secs(2), async {
        let mut conn = client.get_multiplexed_async_connection().await?;
        redis::cmd("PING").query_async::<String>(&mut conn).await
    })
    .await;
    matches!(answer, Ok(Ok(pong)) if pong == "PONG")
}

/// The shared Redis URL when it answers; otherwise a notice (`None`) or, under
/// `CI=true`, a failure.
pub async fn shared_redis() -> Option<String> {
    let url = redis_url();
    if ping(&url).await {
        return Some(url);
    }
    missing(
        "a Redis server at REDIS_URL (default redis://127.0.0.1:6379)",
        "start one: redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save '' --appendonly no",
    );
    None
}

/// A key prefix no other test run uses.
pub fn unique_prefix(label: &str) -> String {
    format!("{}:", crate::unique_marker(label))
}

/// Deletes every key under `prefix` (bounded: a few thousand keys at most here).
pub async fn delete_prefix(url: &str, prefix: &str) {
    let Ok(client) = redis::Client::open(url) else {
        return;
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        let mut conn = client.get_multiplexed_async_connection().await?;
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}*"))
            .query_async(&mut conn)
            .await?;
        if !keys.is_empty() {
            redis::cmd("DEL")
                .arg(&keys)
                .query_async::<i64>(&mut conn)
                .await?;
        }
        redis::RedisResult::Ok(())
    })
    .await;
}

fn redis_server_bin() -> Option<PathBuf> {
    let candidates = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    candidates
        .into_iter()
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join("redis-server"))
        .find(|p| p.is_file())
}

/// A private `redis-server` on a free loopback port, without persistence; killed on
/// drop. [`RedisServer::stop`] and [`RedisServer::restart`] simulate an outage.
pub struct RedisServer {
    bin: PathBuf,
    pub port: u16,
    proc: Option<Proc>,
}

impl RedisServer {
    /// Starts one (or `None` with a notice when `redis-server` is not installed).
    pub async fn start() -> Option<RedisServer> {
        let Some(bin) = redis_server_bin() else {
            missing(
                "redis-server",
                "install Debian's redis-server package (apt-get install redis-server)",
            );
            return None;
        };
        let mut server = RedisServer {
            bin,
            port: free_port(),
            proc: None,
        };
        server.restart().await;
        Some(server)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the server (SIGKILL: no goodbye to its clients).
    pub fn stop(&mut self) {
        self.proc = None;
    }

    /// Starts the server (again) on the same port and waits until it answers.
    pub async fn restart(&mut self) {
        self.proc = None;
        let mut cmd = std::process::Command::new(&self.bin);
        cmd.args([
            "--port",
            &self.port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ]);
        self.proc = Some(Proc::spawn("redis-server", &mut cmd));
        let url = self.url();
        wait_for(
            "private redis-server answering PING",
            Duration::from_secs(15),
            || {
                let url = url.clone();
                async move { ping(&url).await.then_some(()) }
            },
        )
        .await;
    }
}
