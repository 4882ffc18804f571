//! The fast path of the rewrite: a `tools/list` answer is not parsed into a tree.
//! Its parts are read as raw JSON slices (validated, not allocated), each tool's name
//! is picked out, and the answer is written again with each catalog tool's
//! definition spliced in from its pre-serialized form (`Entry::definition_json`).
//! Everything else — the envelope, the other result fields, tools not in the catalog
//! — is copied byte for byte.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::catalog::Catalog;

/// A JSON object's fields as raw slices, in their order.
struct RawFields<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for RawFields<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FieldsVisitor<'a>(PhantomData<&'a ()>);

        impl<'de: 'a, 'a> Visitor<'de> for FieldsVisitor<'a> {
            type Value = RawFields<'a>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut fields = Vec::new();
                while let Some(field) = map.next_entry::<Cow<'a, str>, &'a RawValue>()? {
                    fields.push(field);
                }
                Ok(RawFields(fields))
            }
        }

        deserializer.deserialize_map(FieldsVisitor(PhantomData))
    }
}

impl<'a> RawFields<'a> {
    fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// Writes the object again, `replace`d fields swapped for the given JSON text.
    fn write(&self, out: &mut String, replace: (&str, &str)) {
        out.push('{');
        for (index, (key, value)) in self.0.iter().enumerate() {
            if index > 0 {
                out.push(',');
            }
            // A key re-encodes exactly (it was valid JSON text).
            out.push_str(&serde_json::to_string(key.as_ref()).unwrap_or_default());
            out.push(':');
            if key == replace.0 {
                out.push_str(replace.1);
            } else {
                out.push_str(value.get());
            }
        }
        out.push('}');
    }
}

/// Only a tool's name; every other field is skipped without being built.
#[derive(serde::Deserialize)]
struct Named<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
}

/// The message with catalog tools restored, or `None` when there is nothing to change
/// (not a `result.tools` list, no catalog tool in it, or not valid JSON).
pub fn rewrite(catalog: &Catalog, bytes: &[u8]) -> Option<String> {
    let message: RawFields = serde_json::from_slice(bytes).ok()?;
    let result: RawFields = serde_json::from_str(message.get("result")?.get()).ok()?;
    let tools: Vec<&RawValue> = serde_json::from_str(result.get("tools")?.get()).ok()?;

    let mut restored = String::with_capacity(bytes.len() * 2);
    restored.push('[');
    let mut changed = false;
    for (index, tool) in tools.iter().enumerate() {
        if index > 0 {
            restored.push(',');
        }
        let entry = serde_json::from_str::<Named>(tool.get())
            .ok()
            .and_then(|named| catalog.get(&named.name));
        match entry {
            Some(entry) => {
                restored.push_str(&entry.definition_json);
                changed = true;
            }
            None => restored.push_str(tool.get()),
        }
    }
    restored.push(']');
    if !changed {
        return None;
    }
    let mut result_text = String::with_capacity(restored.len() + 256);
    result.write(&mut result_text, ("tools", &restored));
    let mut out = String::with_capacity(result_text.len() + 128);
    message.write(&mut out, ("result", &result_text));
    Some(out)
}
