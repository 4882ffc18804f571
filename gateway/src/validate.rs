//! Arguments checked against the tool's advertised `inputSchema`, for every kind of
//! tool, before any upstream sees the call.
//!
//! The compiled validator lives on the catalog entry ([`ArgsValidator`]): it is built on
//! the tool's first call and reused until the catalog is rebuilt (a new generation
//! compiles afresh, so a changed schema is never checked against a stale validator).
//! A schema that does not compile is the upstream's problem, not the caller's: it is
//! logged once per generation and the call passes through unchecked.

use std::sync::OnceLock;

use serde_json::Value;
use toolgate_adapters::ToolError;

/// The most violations listed in one error (the rest are counted).
const MAX_LISTED: usize = 20;

/// The lazily compiled validator of one catalog entry's `inputSchema`.
#[derive(Default)]
pub struct ArgsValidator {
    /// `None` once compiled: the tool has no schema, or it did not compile.
    cell: OnceLock<Option<jsonschema::Validator>>,
}

impl std::fmt::Debug for ArgsValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgsValidator")
            .field("compiled", &self.cell.get().is_some())
            .finish()
    }
}

/// A copy starts uncompiled: it compiles on its own first use.
impl Clone for ArgsValidator {
    fn clone(&self) -> Self {
        Self::default()
    }
}

/// A cache, not part of what an entry is.
impl PartialEq for ArgsValidator {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl ArgsValidator {
    /// Checks `arguments` against the tool's `inputSchema`, `schema` (the same one on
    /// every call: it is compiled on the first). `name` is the tool's name as the
    /// caller called it. The error lists each failing field by JSON pointer.
    pub fn check(
        &self,
        name: &str,
        schema: Option<&Value>,
        arguments: &Value,
    ) -> Result<(), ToolError> {
        let validator = self.cell.get_or_init(|| {
            let schema = schema?;
            match jsonschema::validator_for(schema) {
                Ok(validator) => Some(validator),
                Err(error) => {
                    tracing::warn!(
                        tool = name,
                        %error,
                        "the tool's inputSchema does not compile; its arguments pass unchecked"
                    );
                    None
                }
            }
        });
        let Some(validator) = validator else {
            return Ok(());
        };
        let mut problems = Vec::new();
        let mut more = 0usize;
        for error in validator.iter_errors(arguments) {
            if problems.len() == MAX_LISTED {
                more += 1;
                continue;
            }
            let at = error.instance_path().to_string();
            let at = if at.is_empty() { "/".to_owned() } else { at };
            problems.push(format!("- {at}: {error}"));
        }
        if problems.is_empty() {
            return Ok(());
        }
        if more > 0 {
            problems.push(format!("- … and {more} more"));
        }
        Err(ToolError::InvalidArgs(format!(
            "arguments for '{name}' do not match its input schema (each line: the JSON \
             pointer of the argument, then what is wrong):\n{}\nfix these and call again",
            problems.join("\n")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn definition(schema: Value) -> serde_json::Map<String, Value> {
        json!({"name": "t", "inputSchema": schema})
            .as_object()
            .cloned()
            .unwrap_or_default()
    }

    #[test]
    fn names_each_failing_field_by_pointer() {
        let def = definition(json!({
            "type": "object",
            "properties": {"count": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
            "required": ["count"],
        }));
        let validator = ArgsValidator::default();
        assert!(
            validator
                .check("a__t", def.get("inputSchema"), &json!({"count": 3}))
                .is_ok()
        );
        let error = validator
            .check(
                "a__t",
                def.get("inputSchema"),
                &json!({"count": "three", "tags": [1]}),
            )
            .unwrap_err();
        let ToolError::InvalidArgs(message) = &error else {
            panic!("{error:?}")
        };
        assert!(message.contains("'a__t'"), "{message}");
        assert!(message.contains("- /count: "), "{message}");
        assert!(message.contains("- /tags/0: "), "{message}");
        let missing = validator
            .check("a__t", def.get("inputSchema"), &json!({}))
            .unwrap_err();
        assert!(missing.to_string().contains("- /: "), "{missing}");
    }

    #[test]
    fn no_schema_or_an_uncompilable_one_passes() {
        let validator = ArgsValidator::default();
        assert!(validator.check("t", None, &json!({"x": 1})).is_ok());
        let broken = definition(json!({"type": "no-such-type"}));
        let validator = ArgsValidator::default();
        assert!(
            validator
                .check("t", broken.get("inputSchema"), &json!({"x": 1}))
                .is_ok()
        );
        assert!(
            validator
                .check("t", broken.get("inputSchema"), &json!({"x": 2}))
                .is_ok()
        );
    }
}
