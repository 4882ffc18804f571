//! `${VAR}` / `${VAR:-default}` substitution in config text, before it is parsed.

use super::ConfigError;

/// Replaces `${VAR}` and `${VAR:-default}`; `$$` escapes a dollar sign. A variable that
/// is unset and has no default is an error naming it and its line.
pub(super) fn substitute_env(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ConfigError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(stripped) = after.strip_prefix('$') {
            out.push('$');
            rest = stripped;
        } else if let Some(body) = after.strip_prefix('{') {
            let Some(end) = body.find('}') else {
                return Err(ConfigError::Env(format!(
                    "config line {}: '${{' without a closing '}}'",
                    line_of(text, rest, pos)
                )));
            };
            let expr = &body[..end];
            let (name, default) = match expr.split_once(":-") {
                Some((name, default)) => (name, Some(default)),
                None => (expr, None),
            };
            if !is_variable_name(name) {
                // Not a substitution (e.g. prose in a comment): keep it as written.
                out.push_str("${");
                rest = body;
                continue;
            }
            match (env(name), default) {
                (Some(value), _) => out.push_str(&value),
                (None, Some(default)) => out.push_str(default),
                (None, None) => {
                    return Err(ConfigError::Env(format!(
                        "config line {}: environment variable '{name}' is not set (set it, \
                         or write ${{{name}:-default}})",
                        line_of(text, rest, pos)
                    )));
                }
            }
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn line_of(text: &str, rest: &str, pos: usize) -> usize {
    let offset = text.len() - rest.len() + pos;
    text[..offset].matches('\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_substitution_with_defaults_and_escapes() {
        let env = |name: &str| (name == "TOKEN").then(|| "s3cret".to_owned());
        let text = "a: ${TOKEN}\nb: ${MISSING:-x}\nc: $$HOME\nd: $5\n# ${...}";
        assert_eq!(
            substitute_env(text, &env).unwrap(),
            "a: s3cret\nb: x\nc: $HOME\nd: $5\n# ${...}"
        );
        let err = substitute_env("x: 1\ny: ${NOPE}", &env)
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 2") && err.contains("NOPE"), "{err}");
    }
}
