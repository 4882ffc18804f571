//! Tenant patterns (`allow`, `deny`, `initial`): their syntax, checked here so that a
//! config check reports every bad pattern at once; the policy compiles them with the
//! same [`glob`].

use globset::Glob;

use super::Config;

/// One pattern compiled, or why it does not compile.
pub(crate) fn glob(pattern: &str) -> Result<Glob, String> {
    Glob::new(pattern).map_err(|e| format!("pattern '{pattern}' is invalid: {e}"))
}

/// Every tenant pattern that does not compile, as `(path, message)`, so a config
/// check reports them all (the policy itself stops at the first). An `allow` entry
/// may start with `!` (a deny); a `deny` entry's `!` is optional.
pub(crate) fn pattern_problems(config: &Config) -> Vec<(String, String)> {
    let mut problems = Vec::new();
    for (name, tenant) in &config.tenants {
        let lists = [
            ("allow", tenant.allow.as_slice()),
            ("deny", tenant.deny.as_slice()),
            ("initial", tenant.initial.as_deref().unwrap_or_default()),
        ];
        for (field, patterns) in lists {
            for (index, pattern) in patterns.iter().enumerate() {
                // As `compile` reads each list.
                let body = match field {
                    "allow" => pattern.strip_prefix('!').unwrap_or(pattern),
                    "deny" => pattern.trim_start_matches('!'),
                    _ => pattern.as_str(),
                };
                if let Err(message) = glob(body) {
                    problems.push((format!("tenants.{name}.{field}[{index}]"), message));
                }
            }
        }
    }
    problems
}
