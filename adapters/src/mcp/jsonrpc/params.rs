//! A request's `params` as they go on the wire, with the progress token the request
//! gets put in `params._meta` while writing rather than by changing a map first.
//!
//! A tool call's params are written straight from their parts ([`Params::ToolCall`]):
//! building them as a map took a hash and an allocation per key (`name`, `arguments`,
//! `_meta`, its trace fields, the progress token) on every call, only to serialize
//! the map right after.

use serde_json::{Map, Value};

use crate::TraceContext;

/// The `params` of one request.
pub(crate) enum Params<'a> {
    /// Any params object (the protocol's own requests, task requests).
    Map(Map<String, Value>),
    /// `tools/call`'s: `{"name", "arguments", "_meta": {<trace>, "progressToken"}}`,
    /// the same keys in the same order as the map the upstream adapter used to build.
    ToolCall {
        name: &'a str,
        arguments: &'a Map<String, Value>,
        trace: Option<&'a TraceContext>,
    },
}

impl From<Value> for Params<'_> {
    fn from(params: Value) -> Self {
        match params {
            Value::Object(map) => Params::Map(map),
            // Params are always objects in MCP; anything else is a bug of ours.
            _ => Params::Map(Map::new()),
        }
    }
}

impl Params<'_> {
    /// Writes the params object. With `token` (a JSON string, quotes included),
    /// `_meta.progressToken` is that token: added to an existing `_meta` object, or a
    /// `_meta` of its own at the end.
    pub(super) fn write(&self, json: &mut Vec<u8>, token: Option<&str>) {
        // Strings and maps of `Value`s always serialize.
        match self {
            Params::Map(map) => match token {
                None => {
                    let _ = serde_json::to_writer(&mut *json, map);
                }
                Some(token) => write_map_with_token(json, map, token),
            },
            Params::ToolCall {
                name,
                arguments,
                trace,
            } => {
                json.extend_from_slice(b"{\"name\":");
                let _ = serde_json::to_writer(&mut *json, name);
                json.extend_from_slice(b",\"arguments\":");
                let _ = serde_json::to_writer(&mut *json, arguments);
                if trace.is_some() || token.is_some() {
                    json.extend_from_slice(b",\"_meta\":{");
                    let mut first = true;
                    for (key, value) in trace.iter().flat_map(|trace| trace.fields()) {
                        comma(json, &mut first);
                        let _ = serde_json::to_writer(&mut *json, key);
                        json.push(b':');
                        let _ = serde_json::to_writer(&mut *json, value);
                    }
                    if let Some(token) = token {
                        comma(json, &mut first);
                        json.extend_from_slice(b"\"progressToken\":");
                        json.extend_from_slice(token.as_bytes());
                    }
                    json.push(b'}');
                }
                json.push(b'}');
            }
        }
    }

    /// `(traceparent, tracestate)` of `_meta`, which the HTTP transports copy into
    /// headers.
    pub(super) fn trace(&self) -> (Option<String>, Option<String>) {
        match self {
            Params::Map(map) => meta_trace(Some(map)),
            Params::ToolCall { trace, .. } => (
                trace.map(|trace| trace.traceparent.clone()),
                trace.and_then(|trace| trace.tracestate.clone()),
            ),
        }
    }
}

/// `(traceparent, tracestate)` of a params object's `_meta`, where a message built as
/// a tree carries them.
pub(super) fn meta_trace(params: Option<&Map<String, Value>>) -> (Option<String>, Option<String>) {
    let meta = params
        .and_then(|params| params.get("_meta"))
        .and_then(Value::as_object);
    let field = |name: &str| Some(meta?.get(name)?.as_str()?.to_owned());
    (field("traceparent"), field("tracestate"))
}

/// The map whose text [`Params::ToolCall`] writes, for a tool call that has to be
/// changed as a tree (relayed as the upstream's task, which adds `task`).
pub(crate) fn tool_call_map(
    name: &str,
    arguments: Map<String, Value>,
    trace: Option<&TraceContext>,
) -> Map<String, Value> {
    let mut params = Map::new();
    params.insert("name".into(), Value::String(name.to_owned()));
    params.insert("arguments".into(), Value::Object(arguments));
    if let Some(trace) = trace {
        let meta = trace
            .fields()
            .map(|(key, value)| (key.to_owned(), Value::String(value.to_owned())))
            .collect();
        params.insert("_meta".into(), Value::Object(meta));
    }
    params
}

/// `map` with `_meta.progressToken` set to `token`, as inserting it would leave the
/// map: an existing `_meta` object keeps its place and an existing token its place in
/// it; otherwise each goes last. A `_meta` that is not an object is left as it is.
fn write_map_with_token(json: &mut Vec<u8>, map: &Map<String, Value>, token: &str) {
    let put_token =
        |json: &mut Vec<u8>, _: Option<&Value>| json.extend_from_slice(token.as_bytes());
    write_with_field(json, map, "_meta", |json, meta| match meta {
        Some(Value::Object(meta)) => write_with_field(json, meta, "progressToken", put_token),
        Some(other) => {
            let _ = serde_json::to_writer(&mut *json, other);
        }
        None => write_with_field(json, &Map::new(), "progressToken", put_token),
    });
}

/// Writes `map` as an object whose field `name` `put` writes: in its place when the
/// map has it (given its value), last otherwise (given `None`).
fn write_with_field(
    json: &mut Vec<u8>,
    map: &Map<String, Value>,
    name: &str,
    put: impl Fn(&mut Vec<u8>, Option<&Value>),
) {
    json.push(b'{');
    let mut first = true;
    let mut seen = false;
    for (key, value) in map {
        comma(json, &mut first);
        let _ = serde_json::to_writer(&mut *json, key);
        json.push(b':');
        if key == name {
            seen = true;
            put(json, Some(value));
        } else {
            let _ = serde_json::to_writer(&mut *json, value);
        }
    }
    if !seen {
        comma(json, &mut first);
        let _ = serde_json::to_writer(&mut *json, name);
        json.push(b':');
        put(json, None);
    }
    json.push(b'}');
}

fn comma(json: &mut Vec<u8>, first: &mut bool) {
    if !std::mem::take(first) {
        json.push(b',');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn written(params: &Params<'_>, token: Option<&str>) -> Value {
        let mut json = Vec::new();
        params.write(&mut json, token);
        serde_json::from_slice(&json).expect("params are JSON")
    }

    /// What the writer must match: the token inserted into the map (the order of
    /// keys is kept by `serde_json`'s `preserve_order`, so `==` on the trees is not
    /// enough: their texts are compared).
    fn inserted(mut map: Map<String, Value>, token: &str) -> String {
        let meta = map
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(meta) = meta {
            meta.insert("progressToken".into(), serde_json::from_str(token).unwrap());
        }
        serde_json::to_string(&map).unwrap()
    }

    #[test]
    fn a_map_gets_the_token_where_inserting_it_would_put_it() {
        let token = "\"tg-7\"";
        for params in [
            json!({}),
            json!({"uri": "file:///a"}),
            json!({"_meta": {"a": 1}, "uri": "x"}),
            json!({"uri": "x", "_meta": {"progressToken": 3, "b": [1, 2]}}),
            json!({"_meta": "not an object", "z": null}),
            json!({"name": "t\"x", "arguments": {"b": 1, "a": [true, null]}}),
        ] {
            let Value::Object(map) = params else {
                unreachable!()
            };
            let mut json = Vec::new();
            Params::Map(map.clone()).write(&mut json, Some(token));
            assert_eq!(String::from_utf8(json).unwrap(), inserted(map, token));
        }
    }

    #[test]
    fn a_map_without_a_token_is_written_as_it_is() {
        let params = json!({"b": {"c": "d"}, "a": 1});
        let Value::Object(map) = params.clone() else {
            unreachable!()
        };
        assert_eq!(written(&Params::Map(map), None), params);
    }

    #[test]
    fn a_tool_call_is_written_as_its_map_would_be() {
        let arguments = json!({"q": "é\"\n", "n": [1, {"x": null}]});
        let Value::Object(arguments) = arguments else {
            unreachable!()
        };
        let trace = TraceContext {
            traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into(),
            tracestate: Some("vendor=a".into()),
        };
        for (trace, token) in [
            (None, None),
            (None, Some("\"tg-1\"")),
            (Some(&trace), None),
            (Some(&trace), Some("\"tg-2\"")),
        ] {
            let call = Params::ToolCall {
                name: "srv__t\"x",
                arguments: &arguments,
                trace,
            };
            let map = tool_call_map("srv__t\"x", arguments.clone(), trace);
            let mut json = Vec::new();
            call.write(&mut json, token);
            let expected = match token {
                Some(token) => inserted(map.clone(), token),
                None => serde_json::to_string(&map).unwrap(),
            };
            assert_eq!(String::from_utf8(json).unwrap(), expected);
            assert_eq!(call.trace(), Params::Map(map).trace());
        }
    }
}
