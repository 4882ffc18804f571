//! IBM ContextForge (`mcp-contextforge-gateway`) as its pip quickstart runs it: the
//! `mcpgateway` command (one uvicorn process), SQLite in a temp dir, JWT bearer auth
//! with a token made by its own `create_jwt_token` helper. The upstream is registered
//! through the admin API as a gateway (transport `STREAMABLEHTTP`); its tool is then
//! put in a virtual server, whose `/servers/<id>/mcp` endpoint is what MCP clients
//! call. ContextForge names the tool `<gateway slug>-<tool>` (`fast-echo`).
//!
//! Settings that differ from its defaults, and why:
//! * `RATE_LIMITING_ENABLED=false`: MCP requests are limited to 100 a minute per
//!   caller by default, which would measure the limiter only.
//! * `SSRF_ALLOW_LOCALHOST=true`: the upstream is on 127.0.0.1, refused by default.
//! * `CACHE_TYPE=memory`: one process, no Redis (the default keeps its cache in the
//!   database).
//! * `USE_STATEFUL_SESSIONS=true`: MCP sessions with an `Mcp-Session-Id`, so a
//!   session's calls reuse one upstream session. Stateless (the default), every call
//!   opened a new upstream session first (`server/discover`, `initialize`,
//!   `notifications/initialized`, `tools/list`, then `tools/call`).
//! * admin API on (registration), UI, catalog, observability and plugins off; strong
//!   random secrets and passwords (it refuses weak ones at startup).

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};

use super::{Peer, PeerKind, base_command, random_hex, wait_ready};
use crate::proc::{ProcGroup, TempDir, free_port};

/// The gateway name the upstream is registered under (the tool's prefix).
const GATEWAY: &str = "fast";
const ADMIN: &str = "admin@example.com";
/// Startup runs its database migrations first: tens of seconds on 2 busy cores.
const READY_TIMEOUT: Duration = Duration::from_secs(180);
/// Registration connects to the upstream and lists its tools.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(60);

pub(super) async fn start(
    kind: PeerKind,
    version: String,
    upstream_mcp: &str,
    tool: &str,
) -> Result<Peer> {
    let venv = kind.venv();
    let dir = TempDir::new("contextforge")?;
    let port = free_port()?;
    let base = format!("http://127.0.0.1:{port}");
    let jwt_secret = random_hex()?;
    let password = format!("Tg-{}-Aa9!", &random_hex()?[..24]);
    let env = settings(dir.path(), &jwt_secret, &random_hex()?, &password);

    let mut cmd = base_command(&venv.join("bin/mcpgateway"), dir.path())?;
    cmd.args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .envs(env.iter().map(|(k, v)| (k, v)));
    let mut group = ProcGroup::spawn("contextforge", &mut cmd)?;
    wait_ready(
        &mut group,
        &format!("{base}/health"),
        dir.path(),
        READY_TIMEOUT,
    )
    .await?;

    let token = jwt(&venv.join("bin/python"), dir.path(), &env, &jwt_secret).await?;
    let admin = Admin::new(&base, &token)?;
    admin
        .post(
            "/gateways",
            json!({"name": GATEWAY, "url": upstream_mcp, "transport": "STREAMABLEHTTP"}),
        )
        .await
        .context("register the upstream (POST /gateways)")?;
    let tools = admin.get("/tools").await.context("GET /tools")?;
    let listed = tools
        .as_array()
        .or_else(|| tools.get("tools").and_then(Value::as_array))
        .cloned()
        .unwrap_or_default();
    let found = listed
        .iter()
        .find(|t| {
            t.get("originalName").and_then(Value::as_str) == Some(tool)
                && t.get("gatewaySlug").and_then(Value::as_str) == Some(GATEWAY)
        })
        .ok_or_else(|| anyhow!("the upstream's tool '{tool}' is not in GET /tools: {tools}"))?;
    let tool_id = field(found, "id")?;
    let tool_name = field(found, "name")?;
    let server = admin
        .post(
            "/servers",
            json!({"server": {"name": "bench", "associated_tools": [tool_id]}}),
        )
        .await
        .context("create the virtual server (POST /servers)")?;
    let server_id = field(&server, "id")?;
    Ok(Peer {
        kind,
        version,
        mcp_url: format!("{base}/servers/{server_id}/mcp"),
        bearer: token,
        tool: tool_name,
        group,
        dir,
    })
}

fn settings(
    dir: &Path,
    jwt_secret: &str,
    encryption: &str,
    password: &str,
) -> Vec<(String, String)> {
    let pairs = [
        (
            "DATABASE_URL",
            format!("sqlite:///{}/mcp.db", dir.display()),
        ),
        ("JWT_SECRET_KEY", jwt_secret.to_owned()),
        ("AUTH_ENCRYPTION_SECRET", encryption.to_owned()),
        ("PLATFORM_ADMIN_EMAIL", ADMIN.to_owned()),
        ("PLATFORM_ADMIN_PASSWORD", password.to_owned()),
        ("DEFAULT_USER_PASSWORD", password.to_owned()),
        ("BASIC_AUTH_PASSWORD", password.to_owned()),
        ("MCPGATEWAY_ADMIN_API_ENABLED", "true".into()),
        ("MCPGATEWAY_UI_ENABLED", "false".into()),
        ("MCPGATEWAY_CATALOG_ENABLED", "false".into()),
        ("SSRF_ALLOW_LOCALHOST", "true".into()),
        ("RATE_LIMITING_ENABLED", "false".into()),
        ("CACHE_TYPE", "memory".into()),
        ("USE_STATEFUL_SESSIONS", "true".into()),
        ("LOG_LEVEL", "ERROR".into()),
        ("OBSERVABILITY_ENABLED", "false".into()),
        ("OTEL_ENABLE_OBSERVABILITY", "false".into()),
        ("PLUGINS_ENABLED", "false".into()),
    ];
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// A bearer token for the platform admin, made the way ContextForge's docs make one:
/// `python -m mcpgateway.utils.create_jwt_token` (expiry in minutes), with the
/// server's settings (it loads and checks them too).
async fn jwt(python: &Path, dir: &Path, env: &[(String, String)], secret: &str) -> Result<String> {
    let mut cmd = tokio::process::Command::from(base_command(python, dir)?);
    cmd.args([
        "-m",
        "mcpgateway.utils.create_jwt_token",
        "--username",
        ADMIN,
    ])
    .args(["--exp", "1440", "--secret", secret])
    .envs(env.iter().map(|(k, v)| (k, v)))
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .map_err(|_| anyhow!("create_jwt_token did not finish within 60 s"))??;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let token = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with("ey"))
        .map(str::trim);
    match token {
        Some(token) if output.status.success() => Ok(token.to_owned()),
        _ => bail!(
            "create_jwt_token ({}) printed no token: {stdout} {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ),
    }
}

fn field(value: &Value, name: &str) -> Result<String> {
    value
        .get(name)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| anyhow!("no '{name}' in {value}"))
}

/// The admin API with the bearer token, every request bounded.
struct Admin {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Admin {
    fn new(base: &str, token: &str) -> Result<Admin> {
        Ok(Admin {
            http: reqwest::Client::builder()
                .no_proxy()
                .timeout(ADMIN_TIMEOUT)
                .build()?,
            base: base.to_owned(),
            token: token.to_owned(),
        })
    }

    async fn get(&self, path: &str) -> Result<Value> {
        let request = self.http.get(format!("{}{path}", self.base));
        self.send(request).await
    }

    async fn post(&self, path: &str, body: Value) -> Result<Value> {
        let request = self.http.post(format!("{}{path}", self.base)).json(&body);
        self.send(request).await
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Result<Value> {
        let response = request.bearer_auth(&self.token).send().await?;
        let status = response.status();
        let text = response.text().await?;
        if !status.is_success() {
            bail!("HTTP {status}: {text:.400}");
        }
        serde_json::from_str(&text).with_context(|| format!("not JSON: {text:.200}"))
    }
}
