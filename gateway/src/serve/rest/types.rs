//! The body types more than one REST handler shares: the error body every refusal
//! answers, and [`Member`], how a request body's member is read when the handler, not
//! serde, must name what is wrong with it.
//!
//! They are the types the handlers read and write, and `/openapi.json` describes the
//! bodies from them (`openapi.rs`), so the document cannot drift from the code.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::{DeserializeOwned, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolgate_adapters::{JsonObject, ToolError};

/// An error: `{"error": {"code", "message"}}`; `code` is stable, `message` says what to
/// do.
#[derive(Serialize, JsonSchema)]
pub(super) struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Serialize, JsonSchema)]
pub(super) struct ErrorDetail {
    /// Stable machine-readable kind: `invalid_args`, `not_found`, `not_selected`,
    /// `rate_limited`, `unavailable`, `timeout`, `failed`, `invalid_body`, …
    pub code: String,
    pub message: String,
    /// With `authorization_required`: where the user connects their account (a
    /// browser opens it; single use, short-lived).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect_url: Option<String>,
}

impl ErrorDetail {
    pub(super) fn new(code: &str, message: impl Into<String>) -> ErrorDetail {
        ErrorDetail {
            code: code.to_owned(),
            message: message.into(),
            connect_url: None,
        }
    }

    /// The code and message of a tool error.
    pub(super) fn of(error: &ToolError) -> ErrorDetail {
        ErrorDetail {
            connect_url: error.connect_url().map(str::to_owned),
            ..ErrorDetail::new(error.code(), error.to_string())
        }
    }
}

impl From<ErrorDetail> for ErrorBody {
    fn from(error: ErrorDetail) -> ErrorBody {
        ErrorBody { error }
    }
}

/// A member of a request body, read as the document types it (`T`) or kept as wrong.
///
/// Reading never fails: the handler checks the members in a fixed order and answers
/// the first problem with its own message (which says what the member must be), as it
/// did when it read the body by hand; serde's messages and order (the body's) would
/// differ. `null` is a value like any other: `T` decides whether it takes it (an
/// `Option` does). Every `Member` field has `#[serde(default)]`, so a member missing
/// from the body is [`Member::Absent`]; one the document requires also has
/// `#[schemars(!default)]`, which keeps it required there.
#[derive(Default)]
pub(super) enum Member<T> {
    #[default]
    Absent,
    Given(T),
    Wrong,
}

impl<T> Member<T> {
    /// The value, if the body gave one of the right type.
    pub(super) fn given(self) -> Option<T> {
        match self {
            Member::Given(value) => Some(value),
            Member::Absent | Member::Wrong => None,
        }
    }

    pub(super) fn is_wrong(&self) -> bool {
        matches!(self, Member::Wrong)
    }
}

impl<T> Member<Option<T>> {
    /// An optional member: absent or `null` is `None`; `Err` when it has another type.
    pub(super) fn optional(self) -> Result<Option<T>, ()> {
        match self {
            Member::Absent => Ok(None),
            Member::Given(value) => Ok(value),
            Member::Wrong => Err(()),
        }
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Member<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // As any JSON first (not through `Option`, which would read `null` as absent).
        let value = Value::deserialize(deserializer)?;
        Ok(T::deserialize(value).map_or(Member::Wrong, Member::Given))
    }
}

/// A wrapper described in the document exactly as the `T` it reads.
macro_rules! described_as_inner {
    ($wrapper:ident) => {
        impl<T: JsonSchema> JsonSchema for $wrapper<T> {
            fn inline_schema() -> bool {
                T::inline_schema()
            }

            fn schema_name() -> Cow<'static, str> {
                T::schema_name()
            }

            fn schema_id() -> Cow<'static, str> {
                T::schema_id()
            }

            fn json_schema(generator: &mut SchemaGenerator) -> Schema {
                T::json_schema(generator)
            }
        }
    };
}

// Described as `T`: that is what the document asks for.
described_as_inner!(Member);

/// A JSON object read as `T`. A derived struct also takes an array (its fields in
/// order), which no object member of a body may be.
pub(super) struct Object<T>(pub T);

impl<'de, T: DeserializeOwned> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let object = JsonObject::deserialize(deserializer)?;
        T::deserialize(Value::Object(object))
            .map(Object)
            .map_err(serde::de::Error::custom)
    }
}

// Described as `T`.
described_as_inner!(Object);

/// The fields of a body item: an object's members; anything else reads as an object
/// without members, so its first missing member names the problem (as the handlers
/// said before they read items into types).
pub(super) fn fields_of<T: DeserializeOwned>(item: Value) -> Result<T, serde_json::Error> {
    let object = match item {
        Value::Object(object) => object,
        _ => JsonObject::new(),
    };
    serde_json::from_value(Value::Object(object))
}

/// The `background` flag of a call: absent, `null` or `false` is a plain call.
pub(super) fn background(flag: Member<Option<bool>>) -> Result<bool, &'static str> {
    flag.optional()
        .map(|flag| flag.unwrap_or(false))
        .map_err(|()| "`background` must be true or false")
}
