//! Random input schemas (deterministic seed, bounded depth) mixing every construct the
//! formats disagree on, so the rules are checked beyond the shapes written by hand.

use serde_json::{Map, Value, json};
use toolgate_adapters::JsonObject;

/// A small deterministic generator (xorshift64*).
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

const FORMATS: &[&str] = &["uuid", "uri", "date-time", "int64", "email", "float"];
const TYPES: &[&str] = &[
    "string", "number", "integer", "boolean", "array", "object", "null",
];

fn scalar(rng: &mut Rng) -> Value {
    let t = TYPES[rng.below(4) as usize];
    let mut m = Map::new();
    m.insert("type".into(), json!(t));
    let extras: &[(&str, Value)] = &[
        ("format", json!(FORMATS[rng.below(6) as usize])),
        ("pattern", json!("^[a-z]+$")),
        ("minLength", json!(1)),
        ("maximum", json!(10)),
        ("default", json!("x")),
        ("examples", json!(["a", 1])),
        ("description", json!("A value")),
        ("nullable", json!(true)),
        ("enum", json!(["a", "b", 3, null])),
        ("const", json!("only")),
        ("title", json!("T")),
        ("deprecated", json!(true)),
    ];
    for (k, v) in extras {
        if rng.chance(15) {
            m.insert((*k).into(), v.clone());
        }
    }
    if rng.chance(10) {
        m.insert("type".into(), json!([t, "null"]));
    }
    if rng.chance(5) {
        m.insert("type".into(), json!(["string", "integer"]));
    }
    if rng.chance(5) {
        m.remove("type");
    }
    Value::Object(m)
}

fn schema(rng: &mut Rng, depth: usize) -> Value {
    if depth >= 4 {
        return scalar(rng);
    }
    match rng.below(14) {
        0..=3 => scalar(rng),
        4..=6 => object(rng, depth),
        7 => json!({"type": "array", "items": schema(rng, depth + 1)}),
        8 => match rng.below(3) {
            0 => json!({"type": "array"}),
            1 => json!({"type": "array", "items": [scalar(rng), scalar(rng)]}),
            _ => json!({"type": "array", "prefixItems": [scalar(rng)], "items": false}),
        },
        9 => {
            let k = ["anyOf", "oneOf", "allOf"][rng.below(3) as usize];
            let n = 1 + rng.below(3);
            let branches: Vec<Value> = (0..n).map(|_| schema(rng, depth + 1)).collect();
            let mut m = Map::new();
            m.insert(k.into(), Value::Array(branches));
            if rng.chance(30) {
                m.insert("description".into(), json!("Alternatives"));
            }
            if rng.chance(20) {
                m.insert("type".into(), json!("object"));
            }
            Value::Object(m)
        }
        10 => {
            let targets = ["#/$defs/node", "#/$defs/leaf", "#", "#/$defs/missing"];
            let target = targets[rng.below(4) as usize];
            json!({ "$ref": target })
        }
        11 => json!({"oneOf": [{"type": "null"}, {"const": 1, "title": "ONE"}, {"const": 2}]}),
        12 => [json!({}), json!(true), json!({"description": "anything"})][rng.below(3) as usize]
            .clone(),
        _ => {
            json!({"type": "object", "not": {"required": ["a"]}, "if": {"properties": {"a": {"const": 1}}},
            "then": {"required": ["b"]}, "patternProperties": {"^x": {"type": "string"}}})
        }
    }
}

fn object(rng: &mut Rng, depth: usize) -> Value {
    let n = rng.below(5);
    let mut props = Map::new();
    let mut required = Vec::new();
    for i in 0..n {
        let name = format!("p{i}");
        if rng.chance(40) {
            required.push(json!(name));
        }
        props.insert(name, schema(rng, depth + 1));
    }
    let mut m = Map::new();
    if rng.chance(85) {
        m.insert("type".into(), json!("object"));
    }
    m.insert("properties".into(), Value::Object(props));
    if !required.is_empty() {
        m.insert("required".into(), Value::Array(required));
    }
    match rng.below(4) {
        0 => {
            m.insert("additionalProperties".into(), json!(false));
        }
        1 => {
            m.insert("additionalProperties".into(), scalar(rng));
        }
        _ => {}
    }
    Value::Object(m)
}

/// `count` definitions with random input schemas (roots mostly objects, sometimes
/// alternatives, `allOf` or a `$ref`).
pub(crate) fn definitions(count: usize, seed: u64) -> Vec<JsonObject> {
    let mut rng = Rng::new(seed);
    (0..count)
        .map(|i| {
            let defs = json!({
                "node": {"type": "object", "properties": {"v": scalar(&mut rng),
                    "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}},
                "leaf": scalar(&mut rng),
            });
            let mut root = match rng.below(10) {
                0 => json!({"anyOf": [object(&mut rng, 1), object(&mut rng, 1)]}),
                1 => json!({"allOf": [object(&mut rng, 1), {"$ref": "#/$defs/node"}]}),
                2 => json!({"$ref": "#/$defs/node"}),
                _ => object(&mut rng, 0),
            };
            root.as_object_mut().unwrap().insert("$defs".into(), defs);
            let mut d = Map::new();
            d.insert("name".into(), json!(format!("random__tool_{i}")));
            if rng.chance(80) {
                d.insert("description".into(), json!(format!("Random tool {i}")));
            }
            d.insert("inputSchema".into(), root);
            d
        })
        .collect()
}
