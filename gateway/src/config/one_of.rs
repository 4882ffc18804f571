//! The one pattern of a setting written in the file as "exactly one of" several keys
//! (an upstream's kind, a rate limit's window, the JWT key source): a private struct in
//! the file's shape, converted with serde's `try_from`/`into` into a typed value that
//! cannot hold two, and described by the JSON Schema of the file's shape.

/// The one value set among `candidates` (the file's keys for them, in order, in
/// `keys`), or the message that says to set exactly one.
pub(crate) fn exactly_one<T>(
    candidates: impl IntoIterator<Item = Option<T>>,
    keys: &[&str],
) -> Result<T, String> {
    let mut set: Vec<T> = candidates.into_iter().flatten().collect();
    let found = set.len();
    match (set.pop(), found) {
        (Some(value), 1) => Ok(value),
        _ => {
            let keys: Vec<String> = keys.iter().map(|key| format!("`{key}`")).collect();
            Err(format!(
                "set exactly one of {} (found {found})",
                keys.join(", ")
            ))
        }
    }
}

/// Implements `JsonSchema` for a typed setting as the schema of its file shape, under
/// the file shape's name (the name the schema always had).
macro_rules! schema_of_file_shape {
    ($typed:ty, $file:ty) => {
        impl schemars::JsonSchema for $typed {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                <$file as schemars::JsonSchema>::schema_name()
            }

            fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
                <$file as schemars::JsonSchema>::json_schema(generator)
            }
        }
    };
}
pub(crate) use schema_of_file_shape;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_one_names_every_key_and_the_count() {
        assert_eq!(exactly_one([None, Some(2), None], &["a", "b", "c"]), Ok(2));
        assert_eq!(
            exactly_one([Some(1), Some(2), None], &["a", "b", "c"]),
            Err("set exactly one of `a`, `b`, `c` (found 2)".to_owned())
        );
        assert_eq!(
            exactly_one::<u8>([None, None], &["a", "b"]),
            Err("set exactly one of `a`, `b` (found 0)".to_owned())
        );
    }
}
