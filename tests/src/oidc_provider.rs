//! The real OpenID provider of the tests (npm `oidc-provider`, run by
//! `tests/node/oidc_provider.mjs`) as a process on 127.0.0.1, and what it records.

use std::time::Duration;

use serde_json::Value;

use crate::{NodeDeps, Proc, START_TIMEOUT, http, missing, wait_for, workspace_root};

/// A running provider; killed on drop.
pub struct OidcProvider {
    pub proc: Proc,
    pub issuer: String,
    /// The client allowed the token-exchange grant: `(client_id, client_secret)`.
    pub exchange_client: (String, String),
}

impl OidcProvider {
    /// The npm test dependencies with `oidc-provider` in them; `None` after a notice
    /// (a failure under `CI=true`) otherwise.
    pub fn deps() -> Option<NodeDeps> {
        let deps = NodeDeps {
            node_modules: std::env::var_os("TOOLGATE_NODE_MODULES")
                .map(Into::into)
                .unwrap_or_else(|| workspace_root().join("node_modules")),
        };
        let entry = deps.node_modules.join("oidc-provider/package.json");
        if entry.is_file() {
            Some(deps)
        } else {
            missing(&entry.display().to_string(), "npm package not installed");
            None
        }
    }

    /// Starts it with access tokens living `access_token_ttl`, and waits for the line
    /// it prints once it listens.
    pub async fn start(deps: &NodeDeps, access_token_ttl: Duration) -> OidcProvider {
        let mut cmd = std::process::Command::new(deps.node());
        cmd.arg(workspace_root().join("tests/node/oidc_provider.mjs"))
            .env("NODE_MODULES", &deps.node_modules)
            .env("ACCESS_TOKEN_TTL", access_token_ttl.as_secs().to_string())
            .current_dir(workspace_root());
        let mut proc = Proc::spawn("oidc-provider", &mut cmd);
        let ready: Value = wait_for("the OpenID provider's ready line", START_TIMEOUT, || {
            let exited = proc.exited();
            let logs = proc.logs();
            async move {
                assert!(exited.is_none(), "oidc-provider exited early:\n{logs}");
                logs.lines()
                    .find_map(|l| serde_json::from_str::<Value>(l).ok())
                    .filter(|v| v["issuer"].is_string())
            }
        })
        .await;
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        OidcProvider {
            issuer: text(&ready["issuer"]),
            exchange_client: (
                text(&ready["exchange_client"]["client_id"]),
                text(&ready["exchange_client"]["client_secret"]),
            ),
            proc,
        }
    }

    /// What it recorded: `registrations`, `tokens` (`{grant_type, sub, ok, error}`),
    /// `revocations` (`{hint, status}`), `grantsRevoked`.
    pub async fn events(&self) -> Value {
        self.get("/test/events").await
    }

    /// Successful token requests of `grant_type` for `sub`.
    pub async fn granted(&self, grant_type: &str, sub: &str) -> usize {
        let events = self.events().await;
        events["tokens"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| t["ok"] == true && t["grant_type"] == grant_type && t["sub"] == sub)
            .count()
    }

    /// A JWT access token of `sub` for audience `aud` with the claim `tenant`, as the
    /// provider makes its own (what a user signed in at an application holds).
    pub async fn mint(&self, sub: &str, aud: &str, tenant: &str) -> String {
        let answer = self
            .get(&format!(
                "/test/mint?sub={sub}&aud={}&tenant={tenant}",
                url::form_urlencoded::byte_serialize(aud.as_bytes()).collect::<String>()
            ))
            .await;
        answer["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("no access_token in {answer}"))
            .to_owned()
    }

    /// What the token endpoint says now to the last refresh token issued to `sub`,
    /// presented by the client it was issued to: `{tried, status, error}`.
    pub async fn refresh_check(&self, sub: &str) -> Value {
        self.get(&format!("/test/refresh-check?sub={sub}")).await
    }

    async fn get(&self, path: &str) -> Value {
        http()
            .get(format!("{}{path}", self.issuer))
            .timeout(Duration::from_secs(15))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
            .json()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: not JSON: {e}"))
    }
}
