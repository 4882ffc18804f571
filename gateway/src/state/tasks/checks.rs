//! The rules both task stores apply to what they are given, so the memory and Redis
//! stores refuse the same things with the same errors: progress they can keep, updates
//! that are not endings, input keys safe inside a store's field names, bounded results
//! and answers, and list positions that stay valid while tasks come and go.

use std::collections::BTreeMap;

use super::{MAX_INPUT_KEYS, MAX_PAGE, Progress, TaskError, TaskId, TaskUpdate};

/// A progress both stores can keep and give back: finite numbers only (JSON has no
/// NaN; a stored one would make the record unreadable).
pub(crate) fn checked_progress(progress: &Progress) -> Result<(), TaskError> {
    let finite = progress.progress.is_finite() && progress.total.is_none_or(f64::is_finite);
    if finite {
        Ok(())
    } else {
        Err(TaskError::InvalidProgress)
    }
}

/// What an update may carry, in both stores: no ending (that is `finish` or
/// `cancel`), and a progress they can keep.
pub(crate) fn checked_update(update: &TaskUpdate) -> Result<(), TaskError> {
    if let Some(state) = update.state.filter(|s| s.is_terminal()) {
        return Err(TaskError::NotAnUpdate(state));
    }
    match &update.progress {
        Some(progress) => checked_progress(progress),
        None => Ok(()),
    }
}

/// An input key both stores accept: 1 to 64 characters of `[A-Za-z0-9_.-]`, so it
/// is safe inside a store's field name and a JSON key.
pub(crate) fn checked_input_key(key: &str) -> Result<(), TaskError> {
    let valid = (1..=64).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if valid {
        Ok(())
    } else {
        Err(TaskError::InvalidInput(format!(
            "input key '{key}' must be 1 to 64 characters of A-Z, a-z, 0-9, '-', '_', '.'"
        )))
    }
}

/// The answers a store keeps, as JSON text by key: at most [`MAX_INPUT_KEYS`], each
/// within `limit` bytes (`tasks.max_result_bytes`). Keys of another form cannot name
/// a request and are dropped (ignored, as unknown keys are).
pub(crate) fn checked_answers(
    answers: BTreeMap<String, serde_json::Value>,
    limit: usize,
) -> Result<Vec<(String, String)>, TaskError> {
    if answers.len() > MAX_INPUT_KEYS {
        return Err(TaskError::InvalidInput(format!(
            "{} answers at once; at most {MAX_INPUT_KEYS}",
            answers.len()
        )));
    }
    answers
        .into_iter()
        .filter(|(key, _)| checked_input_key(key).is_ok())
        .map(|(key, answer)| Ok((key, bounded_result(&answer, limit)?)))
        .collect()
}

/// Size of a result as stored, checked against `limit`.
pub(crate) fn bounded_result(
    result: &serde_json::Value,
    limit: usize,
) -> Result<String, TaskError> {
    let text = result.to_string();
    if text.len() > limit {
        return Err(TaskError::ResultTooLarge {
            bytes: text.len(),
            limit,
        });
    }
    Ok(text)
}

/// The list position of a task: its creation time and id, so that order is stable
/// and a cursor stays valid while tasks come and go. Zero-padded, so text order is
/// time order.
pub(crate) fn list_position(created_ms: u64, id: &TaskId) -> String {
    format!("{created_ms:015}:{id}")
}

/// A cursor back into a position, if it is one.
pub(crate) fn parse_cursor(cursor: &str) -> Result<String, TaskError> {
    let (time, id) = cursor.split_once(':').ok_or(TaskError::BadCursor)?;
    if time.len() != 15 || !time.bytes().all(|b| b.is_ascii_digit()) || TaskId::parse(id).is_none()
    {
        return Err(TaskError::BadCursor);
    }
    Ok(cursor.to_owned())
}

/// A page size within 1 to [`MAX_PAGE`].
pub(crate) fn page_size(limit: usize) -> usize {
    limit.clamp(1, MAX_PAGE)
}

/// The message a cancelled task carries.
pub(crate) const CANCELLED: &str = "cancelled by its owner";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_are_positions() {
        let id = TaskId::new();
        let position = list_position(1_700_000_000_000, &id);
        assert_eq!(parse_cursor(&position).unwrap(), position);
        assert!(list_position(999, &id) < list_position(1000, &id));
        for bad in ["", "x", "12:abc", "000000000000001:bad id with spaces"] {
            assert_eq!(parse_cursor(bad), Err(TaskError::BadCursor), "{bad}");
        }
        assert_eq!(page_size(0), 1);
        assert_eq!(page_size(10_000), MAX_PAGE);
    }

    #[test]
    fn progress_must_be_finite() {
        let progress = |progress, total| Progress {
            progress,
            total,
            message: None,
        };
        assert!(checked_progress(&progress(1.0, Some(2.0))).is_ok());
        assert!(checked_progress(&progress(1.0, None)).is_ok());
        assert_eq!(
            checked_progress(&progress(f64::NAN, None)),
            Err(TaskError::InvalidProgress)
        );
        assert_eq!(
            checked_progress(&progress(1.0, Some(f64::INFINITY))),
            Err(TaskError::InvalidProgress)
        );
    }

    #[test]
    fn results_are_bounded() {
        let value = serde_json::json!({"content": [{"type": "text", "text": "x".repeat(100)}]});
        assert!(bounded_result(&value, 1000).is_ok());
        assert!(matches!(
            bounded_result(&value, 50),
            Err(TaskError::ResultTooLarge { limit: 50, .. })
        ));
    }
}
