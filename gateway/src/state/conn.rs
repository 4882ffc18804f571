//! The Redis connection shared by the stores: reconnecting on its own, every command
//! bounded by `state.command_timeout`, errors turned into [`Unavailable`] messages that
//! name Redis by host and port only (the URL can carry a password).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use redis::RedisResult;
use redis::aio::{ConnectionManager, ConnectionManagerConfig, PubSub};

use crate::config::StateConfig;

/// How long a readiness answer is reused (probes come often; Redis need not).
const READY_CACHE: Duration = Duration::from_secs(1);

/// The shared store could not be reached or did not answer in time.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(pub String);

pub struct RedisConn {
    client: redis::Client,
    manager: ConnectionManager,
    prefix: String,
    address: String,
    connect_timeout: Duration,
    command_timeout: Duration,
    /// Whether the last command got an answer: state changes are logged once, not
    /// on every failing request.
    up: AtomicBool,
    ready: std::sync::Mutex<Option<(Instant, Result<(), Unavailable>)>>,
}

impl RedisConn {
    /// Prepares the connection without waiting for it (it is made on first use).
    pub fn new(config: &StateConfig) -> Result<Arc<RedisConn>, String> {
        let url = config
            .url
            .as_ref()
            .map(toolgate_adapters::Secret::expose)
            .ok_or("`state.url` is required for `backend: redis`")?;
        let client = client(url, config.tls_ca_file.as_deref())?;
        let address = match client.get_connection_info().addr() {
            redis::ConnectionAddr::TcpTls { host, port, .. } => format!("{host}:{port} (TLS)"),
            other => other.to_string(),
        };
        let manager_config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(config.connect_timeout))
            .set_response_timeout(Some(config.command_timeout))
            // Few, short retries: a request waits at most about `command_timeout`, and
            // the next command starts a new attempt anyway.
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(500));
        let manager = ConnectionManager::new_lazy_with_config(client.clone(), manager_config)
            .map_err(|e| format!("cannot prepare the Redis connection to {address}: {e}"))?;
        Ok(Arc::new(RedisConn {
            client,
            manager,
            prefix: config.key_prefix.clone(),
            address,
            connect_timeout: config.connect_timeout,
            command_timeout: config.command_timeout,
            up: AtomicBool::new(true),
            ready: std::sync::Mutex::new(None),
        }))
    }

    /// `host:port` of the server (never the URL); `rediss://` servers are named so.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// A key or channel name under the configured prefix.
    pub fn key(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// Runs one command (or script, or pipeline) within `command_timeout`.
    pub async fn run<T, F, Fut>(&self, what: &str, command: F) -> Result<T, Unavailable>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        // A little over the connection's own response timeout, so its error (which
        // also starts a reconnect) normally arrives first.
        let bound = self.command_timeout + Duration::from_millis(100);
        let outcome = match tokio::time::timeout(bound, command(self.manager.clone())).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(error.to_string()),
            Err(_) => Err(format!("no answer within {:?}", self.command_timeout)),
        };
        match outcome {
            Ok(value) => {
                if !self.up.swap(true, Ordering::AcqRel) {
                    tracing::info!(redis = %self.address, "Redis answers again");
                }
                Ok(value)
            }
            Err(detail) => {
                if self.up.swap(false, Ordering::AcqRel) {
                    tracing::warn!(redis = %self.address, %detail, operation = what, "Redis unavailable");
                } else {
                    tracing::debug!(redis = %self.address, %detail, operation = what, "Redis still unavailable");
                }
                Err(self.unavailable(&detail))
            }
        }
    }

    /// The error a caller sees while Redis cannot be used.
    pub fn unavailable(&self, detail: &str) -> Unavailable {
        // An untrusted certificate does not heal by retrying: say what to configure.
        let hint = if detail.contains("certificate") {
            " — the Redis server's TLS certificate is not trusted: set `state.tls_ca_file` to \
             the CA that signed it"
        } else {
            ""
        };
        Unavailable(format!(
            "the gateway's shared state store (Redis at {}) is unavailable ({detail}){hint}; \
             retry in a few seconds",
            self.address
        ))
    }

    /// `Ok` when Redis answers a PING; the answer is reused for about a second.
    pub async fn ready(&self) -> Result<(), Unavailable> {
        if let Some((at, answer)) = self
            .ready
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            && at.elapsed() < READY_CACHE
        {
            return answer.clone();
        }
        let answer = self
            .run("ping", |mut c| async move {
                redis::cmd("PING").query_async::<String>(&mut c).await
            })
            .await
            .map(drop);
        *self.ready.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((Instant::now(), answer.clone()));
        answer
    }

    /// A dedicated pub/sub connection, made within `connect_timeout`.
    pub async fn pubsub(&self) -> Result<PubSub, Unavailable> {
        match tokio::time::timeout(self.connect_timeout, self.client.get_async_pubsub()).await {
            Ok(Ok(pubsub)) => Ok(pubsub),
            Ok(Err(error)) => Err(self.unavailable(&error.to_string())),
            Err(_) => {
                Err(self.unavailable(&format!("no connection within {:?}", self.connect_timeout)))
            }
        }
    }

    /// Bound for one command on a connection that is not the manager's (pub/sub).
    pub fn command_timeout(&self) -> Duration {
        self.command_timeout
    }
}

/// The client for `url`; for `rediss://` with `ca_file`, trusting that file's
/// certificates instead of the system's roots.
fn client(url: &str, ca_file: Option<&std::path::Path>) -> Result<redis::Client, String> {
    // The parser's message may echo the URL: do not pass it on.
    let invalid = |_| "`state.url` is not a valid Redis URL".to_owned();
    let Some(ca_file) = ca_file else {
        return redis::Client::open(url).map_err(invalid);
    };
    let pem = std::fs::read(ca_file).map_err(|e| {
        format!(
            "cannot read `state.tls_ca_file` ({}): {e}",
            ca_file.display()
        )
    })?;
    if !pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") {
        return Err(format!(
            "`state.tls_ca_file` ({}) holds no PEM certificate (`-----BEGIN CERTIFICATE-----`)",
            ca_file.display()
        ));
    }
    redis::Client::build_with_tls(
        url,
        redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(pem),
        },
    )
    .map_err(|e| match e.kind() {
        redis::ErrorKind::InvalidClientConfig => invalid(e),
        _ => format!(
            "`state.tls_ca_file` ({}) could not be used: {}",
            ca_file.display(),
            e.detail().unwrap_or("not a valid PEM certificate bundle")
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::client;

    #[test]
    fn a_ca_file_that_cannot_be_used_is_named() {
        let missing = std::path::Path::new("/nonexistent/toolgate-ca.pem");
        let err = client("rediss://:pw-secret@127.0.0.1:6380", Some(missing)).unwrap_err();
        assert!(
            err.contains("tls_ca_file") && err.contains("toolgate-ca.pem"),
            "{err}"
        );
        let not_pem = std::env::temp_dir().join(format!("toolgate-not-pem-{}", std::process::id()));
        std::fs::write(&not_pem, "hello").unwrap();
        let err = client("rediss://:pw-secret@127.0.0.1:6380", Some(&not_pem)).unwrap_err();
        let _ = std::fs::remove_file(&not_pem);
        assert!(err.contains("no PEM certificate"), "{err}");
        assert!(!err.contains("pw-secret"), "{err}");
        assert!(client("rediss://127.0.0.1:6380", None).is_ok());
    }
}
