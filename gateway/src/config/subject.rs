//! The one rule for a subject — the person a credential names within its tenant (a
//! JWT's `sub`, a personal API key's `subject`). A subject becomes part of keys in the
//! shared state (sessions, tasks, per-user upstream credentials) and appears in audit
//! lines, so it is bounded and printable wherever it comes from.

/// Longest subject accepted, in bytes (OpenID Connect's `sub` is at most 255 ASCII
/// characters).
pub const MAX_SUBJECT_BYTES: usize = 255;

/// Whether `subject` is usable: non-empty, at most [`MAX_SUBJECT_BYTES`], no control
/// characters. The error says which rule it breaks (without repeating the value).
pub fn check(subject: &str) -> Result<(), String> {
    if subject.trim().is_empty() {
        return Err("a subject must be a non-empty string".into());
    }
    if subject.len() > MAX_SUBJECT_BYTES {
        return Err(format!(
            "a subject must be at most {MAX_SUBJECT_BYTES} bytes long"
        ));
    }
    if subject.chars().any(char::is_control) {
        return Err("a subject must not contain control characters".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_are_bounded_and_printable() {
        assert!(check("alice@example.com").is_ok());
        assert!(check("248289761001").is_ok());
        assert!(check("").is_err());
        assert!(check("  ").is_err());
        assert!(check("a\nb").is_err());
        assert!(check(&"x".repeat(MAX_SUBJECT_BYTES)).is_ok());
        assert!(check(&"x".repeat(MAX_SUBJECT_BYTES + 1)).is_err());
    }
}
