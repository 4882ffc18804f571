//! The `tasks:` section of the config file: limits of the task store (see
//! [`crate::state::tasks`]), the durable records of calls that run in the background.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The task store: records of background calls, kept where `state.backend` says (in
/// this process, or in Redis for every replica). The MCP and REST task surfaces that
/// create tasks are not wired yet; these settings bound the store they will use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TasksConfig {
    /// How long a finished (completed, failed or cancelled) task and its result are
    /// kept for its owner to fetch.
    #[serde(default = "default_ttl", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub ttl: Duration,
    /// Most tasks one tenant may have running (`working` or `input_required`) at once;
    /// one more is refused until one finishes.
    #[serde(default = "default_max_running_per_tenant")]
    pub max_running_per_tenant: u32,
    /// Largest result a task keeps, in bytes of JSON.
    #[serde(default = "default_max_result_bytes")]
    pub max_result_bytes: usize,
    /// Time a task's call may take (far longer than a plain call's `call_timeout`).
    #[serde(default = "default_call_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub call_timeout: Duration,
    /// A running task belongs to the replica running it for this long, renewed while
    /// it runs; a task whose lease runs out (its replica stopped) becomes `failed`.
    #[serde(default = "default_lease", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub lease: Duration,
    /// Most tasks kept at once by the in-process store (`state.backend: memory`),
    /// finished ones included; a full store refuses new tasks rather than forget
    /// results not yet fetched.
    #[serde(default = "default_max_stored")]
    pub max_stored: usize,
    /// Most tasks one tenant may have kept at once, running and finished ones alike,
    /// in either store; one more is refused (429) until one of its finished tasks
    /// passes `ttl`. It keeps one tenant from filling the store for every other:
    /// absent, a tenth of `max_stored` (at least 1). At most `max_stored`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_stored_per_tenant: Option<usize>,
}

fn default_ttl() -> Duration {
    Duration::from_secs(60 * 60)
}

fn default_max_running_per_tenant() -> u32 {
    16
}

fn default_max_result_bytes() -> usize {
    4 * 1024 * 1024
}

fn default_call_timeout() -> Duration {
    Duration::from_secs(60 * 60)
}

fn default_lease() -> Duration {
    Duration::from_secs(30)
}

fn default_max_stored() -> usize {
    10_000
}

impl Default for TasksConfig {
    fn default() -> Self {
        Self {
            ttl: default_ttl(),
            max_running_per_tenant: default_max_running_per_tenant(),
            max_result_bytes: default_max_result_bytes(),
            call_timeout: default_call_timeout(),
            lease: default_lease(),
            max_stored: default_max_stored(),
            max_stored_per_tenant: None,
        }
    }
}

impl TasksConfig {
    /// The most tasks one tenant may have kept at once: `max_stored_per_tenant`, or a
    /// tenth of `max_stored` — room for ten tenants at their limit before the shared
    /// bound is reached, so one tenant alone can never fill it.
    pub fn stored_per_tenant(&self) -> usize {
        self.max_stored_per_tenant
            .unwrap_or(self.max_stored / 10)
            .max(1)
    }

    /// Checks the fields; messages name the field (relative to `tasks`).
    pub(crate) fn validate(&self) -> Vec<(&'static str, &'static str)> {
        let mut problems = Vec::new();
        for (field, zero) in [
            ("ttl", self.ttl.is_zero()),
            ("call_timeout", self.call_timeout.is_zero()),
            ("lease", self.lease.is_zero()),
        ] {
            if zero {
                problems.push((field, "must be greater than zero"));
            }
        }
        for (field, zero) in [
            ("max_running_per_tenant", self.max_running_per_tenant == 0),
            ("max_result_bytes", self.max_result_bytes == 0),
            ("max_stored", self.max_stored == 0),
        ] {
            if zero {
                problems.push((field, "must be at least 1"));
            }
        }
        match self.max_stored_per_tenant {
            Some(0) => problems.push(("max_stored_per_tenant", "must be at least 1")),
            Some(n) if n > self.max_stored => problems.push((
                "max_stored_per_tenant",
                "must be at most `tasks.max_stored` (one tenant cannot keep more than the whole store)",
            )),
            _ => {}
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::config::Config;

    /// The background-call examples of docs/tasks.md parse: the `background` settings
    /// as they say, and the `tasks:` block to exactly the defaults.
    #[test]
    fn the_readme_examples_parse_as_they_say() {
        let readme =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/tasks.md"))
                .expect("docs/tasks.md is readable");
        let section = readme
            .split("# Background calls (tasks)")
            .nth(1)
            .and_then(|rest| rest.split("\n## ").next())
            .expect("docs/tasks.md has a background calls section");
        let blocks: Vec<&str> = section
            .split("```yaml\n")
            .skip(1)
            .filter_map(|rest| rest.split("```").next())
            .collect();
        assert_eq!(blocks.len(), 2, "{section}");
        let modes = Config::parse(blocks[0], &|_| None).unwrap();
        let reports = &modes.upstreams["reports"].settings;
        assert_eq!(
            reports.background,
            Some(crate::config::TaskSupport::Optional)
        );
        assert_eq!(
            reports.tools["build_annual_report"].background,
            Some(crate::config::TaskSupport::Required)
        );
        let example = Config::parse(blocks[1], &|_| None).unwrap();
        assert_eq!(example.tasks, super::TasksConfig::default());
    }

    #[test]
    fn tasks_defaults_and_checks() {
        let config = Config::parse("{}", &|_| None).unwrap();
        assert_eq!(config.tasks.ttl, Duration::from_secs(3600));
        assert_eq!(config.tasks.max_running_per_tenant, 16);
        assert_eq!(config.tasks.max_result_bytes, 4 * 1024 * 1024);
        assert_eq!(config.tasks.call_timeout, Duration::from_secs(3600));
        assert_eq!(config.tasks.lease, Duration::from_secs(30));
        assert_eq!(
            config.tasks.stored_per_tenant(),
            1000,
            "a tenth of max_stored"
        );
        let tiny = Config::parse("tasks: {max_stored: 5}\n", &|_| None).unwrap();
        assert_eq!(tiny.tasks.stored_per_tenant(), 1, "never zero");
        let set = Config::parse(
            "tasks: {max_stored: 50, max_stored_per_tenant: 50}\n",
            &|_| None,
        )
        .unwrap();
        assert_eq!(set.tasks.stored_per_tenant(), 50);
        for bad in [
            "tasks: {max_stored_per_tenant: 0}\n",
            "tasks: {max_stored: 50, max_stored_per_tenant: 51}\n",
        ] {
            let err = Config::parse(bad, &|_| None).unwrap_err().to_string();
            assert!(err.contains("tasks.max_stored_per_tenant"), "{bad}: {err}");
        }
        let set = Config::parse("tasks: {ttl: 5m, lease: 10s}\n", &|_| None).unwrap();
        assert_eq!(set.tasks.ttl, Duration::from_secs(300));
        assert_eq!(set.tasks.lease, Duration::from_secs(10));
        let err = Config::parse("tasks: {lease: 0s, max_running_per_tenant: 0}\n", &|_| None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("tasks.lease"), "{err}");
        assert!(err.contains("tasks.max_running_per_tenant"), "{err}");
        let err = Config::parse("tasks: {tll: 5m}\n", &|_| None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("tasks"), "{err}");
    }
}
