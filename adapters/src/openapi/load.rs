//! Loading a spec: fetching it (size cap, timeout, redirect limit, SSRF guard) or reading
//! it from a file, parsing JSON or YAML off the async runtime within the import's limits
//! (`max_schema_nodes`, `max_enum_values`), and loading the other documents its `$ref`s
//! point to (files under the root spec's own directory, remote documents only when
//! allowed). There is no count of documents: a spec split over thousands of files is
//! bounded by what it costs (`max_total_bytes`, `max_schema_nodes`, `import_timeout`,
//! the last applied by the caller). Each document is fetched or read once, keyed by
//! its URL with dot segments resolved, whichever document refers to it.
//!
//! YAML goes through `serde_norway` with a value builder of our own: integers that do
//! not fit 64 bits (the OpenAI spec has some) become floats instead of failing the load,
//! and non-string mapping keys (`200:` response codes) become strings.

use crate::error::error_chain;
use std::collections::HashMap;
use std::fmt;

use futures::StreamExt;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use url::Url;

use super::config::OpenApiConfig;
use super::guard;

/// Why an upstream could not be loaded. Each message says what is wrong and where.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LoadError {
    /// The configuration itself is unusable.
    #[error("invalid OpenAPI upstream config: {0}")]
    Config(String),
    /// The spec (or a document it references) could not be fetched or read.
    #[error("cannot load '{location}': {detail}")]
    Fetch { location: String, detail: String },
    /// The document is not JSON or YAML.
    #[error("cannot parse '{location}': {detail}")]
    Parse { location: String, detail: String },
    /// The document parsed but is not a valid OpenAPI description.
    #[error("invalid spec at {pointer}: {detail}")]
    Invalid { pointer: String, detail: String },
    /// The import went past one of its bounds (`bound` names the setting).
    #[error("the import is over {bound}: {detail}; raise {bound} if this spec is trusted")]
    Bound { bound: &'static str, detail: String },
}

impl LoadError {
    pub(crate) fn invalid(pointer: &str, detail: impl Into<String>) -> Self {
        let pointer = if pointer.is_empty() { "/" } else { pointer };
        LoadError::Invalid {
            pointer: format!("#{pointer}"),
            detail: detail.into(),
        }
    }
}

/// One parsed document and the base its relative references resolve against.
#[derive(Debug)]
pub(super) struct Document {
    pub base: Option<Url>,
    pub root: Value,
}

/// The root document (index 0) and every document reachable through `$ref`s.
#[derive(Debug, Default)]
pub(super) struct Documents {
    pub docs: Vec<Document>,
    by_url: HashMap<String, usize>,
}

impl Documents {
    /// The document a reference string points into, seen from document `from`.
    pub(super) fn doc_for(&self, from: usize, reference: &str) -> Result<usize, String> {
        let doc_part = reference.split('#').next().unwrap_or("");
        if doc_part.is_empty() {
            return Ok(from);
        }
        let url = join(self.docs[from].base.as_ref(), doc_part)?;
        self.by_url
            .get(url.as_str())
            .copied()
            .ok_or_else(|| format!("document '{url}' was not loaded"))
    }

    /// One root document read from `base` (tests build specs in memory).
    #[cfg(test)]
    pub(super) fn single(base: Option<Url>, root: Value) -> Documents {
        let mut docs = Documents::default();
        docs.add(base, root);
        docs
    }

    fn add(&mut self, base: Option<Url>, root: Value) -> usize {
        if let Some(b) = &base {
            self.by_url.insert(strip_fragment(b), self.docs.len());
        }
        self.docs.push(Document { base, root });
        self.docs.len() - 1
    }
}

fn strip_fragment(u: &Url) -> String {
    let mut u = u.clone();
    u.set_fragment(None);
    u.to_string()
}

fn join(base: Option<&Url>, rel: &str) -> Result<Url, String> {
    match base {
        Some(b) => b
            .join(rel)
            .map_err(|e| format!("cannot resolve '{rel}' against '{b}': {e}")),
        None => Url::parse(rel).map_err(|_| {
            format!("relative reference '{rel}' cannot be resolved: the spec has no location")
        }),
    }
}

/// Loads the spec named by `config` and every document it references.
pub(super) async fn load_documents(
    config: &OpenApiConfig,
    guard: &guard::Guard,
) -> Result<Documents, LoadError> {
    let base = match (&config.spec_url, &config.spec_path) {
        (Some(u), None) => {
            let url = Url::parse(u)
                .map_err(|e| LoadError::Config(format!("spec_url '{u}' is not a URL: {e}")))?;
            if !matches!(url.scheme(), "http" | "https") {
                return Err(LoadError::Config(format!(
                    "spec_url '{u}': scheme '{}' is not allowed (http or https; use spec_path for files)",
                    url.scheme()
                )));
            }
            url
        }
        (None, Some(p)) => {
            let abs = std::path::absolute(p)
                .map_err(|e| LoadError::Config(format!("spec_path '{p}': {e}")))?;
            Url::from_file_path(&abs)
                .map_err(|_| LoadError::Config(format!("spec_path '{p}' is not a usable path")))?
        }
        _ => {
            return Err(LoadError::Config(
                "set exactly one of spec_url and spec_path".into(),
            ));
        }
    };
    let mut docs = Documents::default();
    let mut total = Total::default();
    let text = total.add(fetch(&base, config, guard).await?, &base, config)?;
    // Local references stay inside the root spec's own directory (links resolved).
    let local_root = match base.to_file_path() {
        Ok(path) if base.scheme() == "file" => tokio::fs::canonicalize(&path)
            .await
            .ok()
            .and_then(|p| p.parent().map(std::path::Path::to_path_buf)),
        _ => None,
    };
    let mut nodes = 0;
    let root = parse_bounded(text, base.as_str(), config, &mut nodes).await?;
    docs.add(Some(base), root);
    // Breadth-first over external references, bounded in bytes and nodes.
    let mut next = 0;
    while next < docs.docs.len() {
        let mut wanted = Vec::new();
        collect_external_refs(&docs.docs[next].root, &mut Vec::new(), &mut wanted);
        let base = docs.docs[next].base.clone();
        for r in wanted {
            let url = join(base.as_ref(), &r).map_err(|d| LoadError::Fetch {
                location: r.clone(),
                detail: d,
            })?;
            let key = strip_fragment(&url);
            if docs.by_url.contains_key(&key) {
                continue;
            }
            let from_file = base.as_ref().is_some_and(|b| b.scheme() == "file");
            let allowed = match url.scheme() {
                "file" => from_file,
                "http" | "https" => config.allow_remote_refs,
                _ => false,
            };
            if !allowed {
                return Err(LoadError::Fetch {
                    location: key,
                    detail: if url.scheme() == "file" {
                        "a remote spec may not reference local files".into()
                    } else {
                        "remote $refs are off; set allow_remote_refs: true to follow them".into()
                    },
                });
            }
            let mut doc_url = url.clone();
            doc_url.set_fragment(None);
            if doc_url.scheme() == "file" {
                confine_local(&doc_url, local_root.as_deref()).await?;
            }
            let text = total.add(fetch(&doc_url, config, guard).await?, &doc_url, config)?;
            let root = parse_bounded(text, doc_url.as_str(), config, &mut nodes).await?;
            docs.add(Some(doc_url), root);
        }
        next += 1;
    }
    Ok(docs)
}

/// The error of an import that took longer than `import_timeout`.
pub(super) fn over_time(config: &OpenApiConfig) -> LoadError {
    LoadError::Bound {
        bound: "import_timeout",
        detail: format!(
            "reading and converting the spec took longer than import_timeout ({:?})",
            config.import_timeout
        ),
    }
}

/// The bytes and documents read so far, held to `max_total_bytes`.
#[derive(Default)]
struct Total {
    bytes: u64,
    documents: usize,
}

impl Total {
    fn add(
        &mut self,
        text: Vec<u8>,
        url: &Url,
        config: &OpenApiConfig,
    ) -> Result<Vec<u8>, LoadError> {
        self.bytes += text.len() as u64;
        self.documents += 1;
        if self.bytes > config.max_total_bytes {
            return Err(LoadError::Bound {
                bound: "max_total_bytes",
                detail: format!(
                    "the documents read so far ({}, the last '{url}') hold {} bytes, \
                     more than max_total_bytes ({})",
                    self.documents, self.bytes, config.max_total_bytes
                ),
            });
        }
        Ok(text)
    }
}

/// Parses a document off the async runtime (a large spec takes a while) and holds it to
/// the import's limits; `nodes` counts the JSON nodes of every document so far.
async fn parse_bounded(
    text: Vec<u8>,
    location: &str,
    config: &OpenApiConfig,
    nodes: &mut usize,
) -> Result<Value, LoadError> {
    let limits = Limits {
        max_nodes: config.max_schema_nodes.saturating_sub(*nodes),
        max_enum: config.max_enum_values,
    };
    let loc = location.to_owned();
    let parsed = tokio::task::spawn_blocking(move || {
        let root = parse(&text, &loc)?;
        drop(text);
        let counted = limits.check(&root, &loc)?;
        Ok::<_, LoadError>((root, counted))
    })
    .await
    .map_err(|e| LoadError::Parse {
        location: location.to_owned(),
        detail: format!("parsing stopped: {e}"),
    })?;
    let (root, counted) = parsed?;
    *nodes += counted;
    Ok(root)
}

/// What one import may hold, so a hostile spec cannot take the gateway's memory.
struct Limits {
    /// JSON nodes this document may still have.
    max_nodes: usize,
    max_enum: usize,
}

impl Limits {
    /// Counts the nodes of `root` (without recursion: depth is the attacker's choice),
    /// refusing it past either limit with an error naming the setting.
    fn check(&self, root: &Value, location: &str) -> Result<usize, LoadError> {
        let mut count = 0usize;
        let mut stack: Vec<(&Value, bool)> = vec![(root, false)];
        while let Some((v, is_enum)) = stack.pop() {
            count += 1;
            if count > self.max_nodes {
                return Err(LoadError::Parse {
                    location: location.to_owned(),
                    detail: format!(
                        "the spec has more JSON nodes than max_schema_nodes allows ({} in all \
                         its documents); raise max_schema_nodes if this spec is trusted",
                        self.max_nodes
                    ),
                });
            }
            match v {
                Value::Array(a) => {
                    if is_enum && a.len() > self.max_enum {
                        return Err(LoadError::Parse {
                            location: location.to_owned(),
                            detail: format!(
                                "an enum lists {} values, more than max_enum_values ({}); \
                                 raise max_enum_values if this spec is trusted",
                                a.len(),
                                self.max_enum
                            ),
                        });
                    }
                    stack.extend(a.iter().map(|x| (x, false)));
                }
                Value::Object(m) => {
                    stack.extend(m.iter().map(|(k, x)| (x, k == "enum")));
                }
                _ => {}
            }
        }
        Ok(count)
    }
}

/// Refuses a local reference outside `root` (the root spec's directory), with one
/// answer whether the file exists or not.
async fn confine_local(url: &Url, root: Option<&std::path::Path>) -> Result<(), LoadError> {
    let refused = || LoadError::Fetch {
        location: url.to_string(),
        detail: match root {
            Some(root) => format!(
                "a local $ref must name a readable file under the spec's own directory ({})",
                root.display()
            ),
            None => "a local $ref must name a readable file under the spec's own directory".into(),
        },
    };
    let root = root.ok_or_else(refused)?;
    let path = url.to_file_path().map_err(|_| refused())?;
    let real = tokio::fs::canonicalize(&path)
        .await
        .map_err(|_| refused())?;
    if !real.starts_with(root) {
        return Err(refused());
    }
    Ok(())
}

fn collect_external_refs(v: &Value, path: &mut Vec<String>, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("$ref")
                && !r.starts_with('#')
                && !out.contains(r)
                && path.last().is_none_or(|p| p != "properties")
            {
                out.push(r.clone());
            }
            for (k, x) in m {
                if (x.is_object() || x.is_array()) && !is_data(path, k, x) {
                    path.push(k.clone());
                    collect_external_refs(x, path, out);
                    path.pop();
                }
            }
        }
        Value::Array(a) => {
            for x in a {
                path.push(String::new());
                collect_external_refs(x, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

/// Reads a file or fetches a URL, refusing bodies over the configured cap.
async fn fetch(
    url: &Url,
    config: &OpenApiConfig,
    guard: &guard::Guard,
) -> Result<Vec<u8>, LoadError> {
    let cap = config.max_spec_bytes;
    let fail = |detail: String| LoadError::Fetch {
        location: url.to_string(),
        detail,
    };
    if url.scheme() == "file" {
        let path = url
            .to_file_path()
            .map_err(|_| fail("not a local path".into()))?;
        let meta = tokio::fs::metadata(&path)
            .await
            .map_err(|e| fail(e.to_string()))?;
        if meta.len() > cap {
            return Err(fail(format!(
                "the file has {} bytes, more than max_spec_bytes ({cap})",
                meta.len()
            )));
        }
        return tokio::fs::read(&path)
            .await
            .map_err(|e| fail(e.to_string()));
    }
    let request = guard.document(url.clone()).map_err(fail)?;
    let work = async {
        let resp = request
            .header(
                "accept",
                "application/json, application/yaml;q=0.9, */*;q=0.5",
            )
            .send()
            .await
            .map_err(|e| fail(error_chain(&e)))?;
        if !resp.status().is_success() {
            return Err(fail(format!("HTTP status {}", resp.status())));
        }
        if let Some(len) = resp.content_length()
            && len > cap
        {
            return Err(fail(format!(
                "the response announces {len} bytes, more than max_spec_bytes ({cap})"
            )));
        }
        let mut body = Vec::new();
        let mut stream = resp.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| fail(error_chain(&e)))?;
            if (body.len() + chunk.len()) as u64 > cap {
                return Err(fail(format!(
                    "the response is larger than max_spec_bytes ({cap} bytes)"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    };
    tokio::time::timeout(config.timeout, work)
        .await
        .map_err(|_| fail(format!("no complete answer within {:?}", config.timeout)))?
}

/// Parses JSON (when the text starts like JSON) or YAML.
pub(super) fn parse(bytes: &[u8], location: &str) -> Result<Value, LoadError> {
    let text = std::str::from_utf8(bytes).map_err(|e| LoadError::Parse {
        location: location.into(),
        detail: format!("not UTF-8 text: {e}"),
    })?;
    let text = text.trim_start_matches('\u{feff}');
    let first = text.trim_start().chars().next();
    let value = if matches!(first, Some('{') | Some('[')) {
        serde_json::from_str(text).map_err(|e| LoadError::Parse {
            location: location.into(),
            detail: format!("invalid JSON: {e}"),
        })?
    } else {
        // The YAML parser slows down badly on absurdly deep flow nesting (a hostile
        // document): refuse it before parsing. No real spec comes near the bound.
        if let Some(line) = flow_depth_exceeds(text, 256) {
            return Err(LoadError::Parse {
                location: location.into(),
                detail: format!("invalid YAML: nesting deeper than 256 levels at line {line}"),
            });
        }
        let de = serde_norway::Deserializer::from_str(text);
        JsonSeed.deserialize(de).map_err(|e| LoadError::Parse {
            location: location.into(),
            detail: format!("invalid YAML: {e}"),
        })?
    };
    if !value.is_object() {
        return Err(LoadError::Parse {
            location: location.into(),
            detail: "the document is not a JSON/YAML object".into(),
        });
    }
    Ok(value)
}

/// The line where `[`/`{` flow nesting first exceeds `max` (quoted text skipped; a
/// line starting at column 0 with a key resets the count, so stray brackets in plain
/// scalars cannot add up).
fn flow_depth_exceeds(text: &str, max: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut line = 1;
    let mut quote: Option<u8> = None;
    let mut at_line_start = true;
    let mut prev = 0u8;
    for &b in text.as_bytes() {
        if let Some(q) = quote {
            if b == q && !(q == b'"' && prev == b'\\') {
                quote = None;
            }
            if b == b'\n' {
                line += 1;
            }
            prev = if prev == b'\\' && b == b'\\' { 0 } else { b };
            continue;
        }
        if at_line_start && b.is_ascii_alphanumeric() {
            depth = 0;
        }
        at_line_start = b == b'\n';
        match b {
            b'\n' => line += 1,
            b'"' | b'\'' if matches!(prev, b' ' | b'[' | b'{' | b',' | b':' | b'\n' | 0) => {
                quote = Some(b)
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return Some(line);
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        prev = b;
    }
    None
}

/// Builds a `serde_json::Value` from any deserializer, tolerating huge integers and
/// non-string keys.
struct JsonSeed;

impl<'de> DeserializeSeed<'de> for JsonSeed {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_i128<E>(self, v: i128) -> Result<Value, E> {
        Ok(i64::try_from(v)
            .map(Value::from)
            .unwrap_or_else(|_| float(v as f64)))
    }
    fn visit_u128<E>(self, v: u128) -> Result<Value, E> {
        Ok(u64::try_from(v)
            .map(Value::from)
            .unwrap_or_else(|_| float(v as f64)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(v) = seq.next_element_seed(JsonSeed)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(k) = map.next_key_seed(JsonSeed)? {
            let key = match k {
                Value::String(s) => s,
                Value::Null => "null".into(),
                other => other.to_string(),
            };
            let v = map.next_value_seed(JsonSeed)?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<Value, A::Error> {
        // A YAML tag (`!foo value`): keep the value, drop the tag.
        use de::VariantAccess;
        let (_tag, variant): (de::IgnoredAny, _) = data.variant()?;
        variant.newtype_variant_seed(JsonSeed)
    }
}

fn float(v: f64) -> Value {
    Number::from_f64(v)
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

/// Whether key `k` (under `path`) holds example or literal data, where a `$ref` is
/// just a value (GitHub's SCIM examples carry `"$ref": "https://..."` members).
pub(super) fn is_data(path: &[String], k: &str, x: &Value) -> bool {
    let parent = path.last().map(String::as_str);
    if matches!(parent, Some("properties" | "patternProperties")) {
        return false;
    }
    match k {
        "example" | "default" | "enum" | "const" => true,
        "examples" => x.is_array(),
        "value" => path.len() >= 2 && path[path.len() - 2] == "examples",
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_huge_integers_and_int_keys() {
        let y = "a: 123456789012345678901234567890\nb: -99999999999999999999999\n200:\n  x: 1\nc: [1, 2.5, true, null, ~]\n";
        let v = parse(y.as_bytes(), "t.yaml").unwrap();
        assert!(v["a"].as_f64().unwrap() > 1e29);
        assert!(v["b"].as_f64().unwrap() < -1e22);
        assert_eq!(v["200"]["x"], 1);
        assert_eq!(v["c"][1], 2.5);
    }

    #[test]
    fn limits_name_the_setting() {
        let limits = Limits {
            max_nodes: 100,
            max_enum: 3,
        };
        let ok = serde_json::json!({"a": {"enum": [1, 2, 3]}, "b": [1, 2]});
        assert_eq!(limits.check(&ok, "x").unwrap(), 9);
        let long = serde_json::json!({"a": {"enum": [1, 2, 3, 4]}});
        let e = limits.check(&long, "x").unwrap_err().to_string();
        assert!(e.contains("max_enum_values (3)"), "{e}");
        // an `enum` property name is not an enum
        let prop = serde_json::json!({"properties": {"enum": {"type": "string"}}});
        assert!(limits.check(&prop, "x").is_ok());
        let big = serde_json::json!({"a": vec![0; 200]});
        let e = limits.check(&big, "x").unwrap_err().to_string();
        assert!(e.contains("max_schema_nodes"), "{e}");
    }

    #[test]
    fn parse_errors_name_the_place() {
        let e = parse(b"{\"openapi\": ", "x.json").unwrap_err().to_string();
        assert!(e.contains("line 1"), "{e}");
        let e = parse(b"a: [1, 2\nb: }", "x.yaml").unwrap_err().to_string();
        assert!(e.contains("invalid YAML"), "{e}");
    }
}
