//! What `toolgate check` verifies beyond the config and the upstreams: the state the
//! config needs is there — the shared Redis answers, the data directory can be
//! written. A gateway that starts without them serves, then fails the first
//! registration or the first shared session; `check` says so before.

use std::path::Path;

use crate::config::{Config, StateBackend};
use crate::gateway::Gateway;

/// One state the config needs that is not there: what, and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// `state.url`, `data_dir`.
    pub what: String,
    pub message: String,
}

/// Every state `gateway`'s config needs that does not answer or cannot be written.
pub async fn missing_state(gateway: &Gateway) -> Vec<Missing> {
    let config = gateway.config();
    let mut missing = Vec::new();
    if config.state.backend == StateBackend::Redis
        && let Err(unavailable) = gateway.shared_state_ready().await
    {
        missing.push(Missing {
            what: "state.url".into(),
            message: format!(
                "Redis does not answer PING: {unavailable} (start it, or fix `state.url` / \
                 REDIS_URL)"
            ),
        });
    }
    if let Some(why) = data_dir_use(&config)
        && let Err(error) = writable(&config.data_dir)
    {
        missing.push(Missing {
            what: "data_dir".into(),
            message: format!(
                "{} cannot be written ({error}); {why} are kept there: make it writable by \
                 this user or point `data_dir` at a directory that is (a volume in a \
                 container)",
                config.data_dir.display()
            ),
        });
    }
    missing
}

/// What the gateway keeps in `data_dir` with this config, if anything: with the
/// Redis backend everything shared is in Redis.
fn data_dir_use(config: &Config) -> Option<&'static str> {
    if config.state.backend == StateBackend::Redis {
        return None;
    }
    if config.admin.is_some() {
        return Some("runtime registrations (POST /admin/upstreams)");
    }
    if !config.oauth.token_keys.is_empty() {
        return Some("users' upstream tokens");
    }
    None
}

/// Whether the gateway could write in `dir`: a probe file written and removed in it,
/// or — when it does not exist yet (the stores create it on first write) — in its
/// nearest existing ancestor, which must be a directory. `check` leaves nothing
/// behind, not even the directory.
fn writable(dir: &Path) -> Result<(), std::io::Error> {
    let existing = dir
        .ancestors()
        .find(|p| p.as_os_str().is_empty() || p.exists())
        .map(|p| {
            if p.as_os_str().is_empty() {
                Path::new(".")
            } else {
                p
            }
        })
        .unwrap_or(Path::new("."));
    if !existing.is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotADirectory,
            format!("{} is not a directory", existing.display()),
        ));
    }
    let probe = existing.join(format!(".toolgate-check-{}", std::process::id()));
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(&probe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_that_cannot_be_created_is_not_writable() {
        let file = std::env::temp_dir().join(format!("toolgate-preflight-{}", std::process::id()));
        std::fs::write(&file, b"a file, not a directory").unwrap();
        assert!(writable(&file.join("data")).is_err());
        let dir = file.with_extension("d");
        std::fs::create_dir(&dir).unwrap();
        assert!(writable(&dir).is_ok());
        assert!(
            writable(&dir.join("not/yet")).is_ok(),
            "created on first write"
        );
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            0,
            "nothing left behind"
        );
        let _ = std::fs::remove_file(&file);
        let _ = std::fs::remove_dir(&dir);
    }
}
