//! The namespaced catalog: every upstream's tools under one set of names.
//!
//! Names are `<upstream>__<tool>` (or the bare tool name for `namespace: none`),
//! matching `^[A-Za-z0-9_-]{1,64}$` — the strictest rule among the consumers (OpenAI,
//! Anthropic). A name is a pure function of the set of (upstream, tool) pairs, never of
//! the order upstreams answered in, so it is stable across restarts:
//! - characters outside `[A-Za-z0-9_-]` become `_`;
//! - a name over 64 characters is cut to 55 and given `_` plus 8 hex digits of a SHA-256
//!   of the original `(upstream, tool)` pair;
//! - names that still collide are ordered by (was the name altered, upstream, tool): the
//!   first keeps it, the others get the hash suffix. Collisions are logged, never fatal,
//!   except for `namespace: none` upstreams at startup (see [`Catalog::build`]).
//!
//! Each entry keeps the upstream's raw definition with only `name` replaced and
//! `_meta["toolgate/upstream"]`, `_meta["toolgate/tool"]` added, so nothing the
//! upstream said is lost. The raw definition is shared with the upstream's own list,
//! never copied: the entry holds only the fields it changes (a large OpenAPI import's
//! schemas are held once, and a rebuild copies no schema).

use std::collections::BTreeMap;
use std::sync::Arc;

use foldhash::HashMap;
use serde_json::Value;
use sha2::{Digest, Sha256};
use toolgate_adapters::{JsonObject, ToolDef};

use crate::truncate::Encoding;

use crate::config::{Namespace, TaskSupport};

mod brief;
pub mod offerings;
pub mod protocol_tools;
mod search;
mod shaping;

pub use brief::{abbreviate_schema, schema_at};
pub use shaping::{DefinitionBudgets, PerUserList, Shaping, TaskModes};

/// Longest name on any surface.
pub const MAX_NAME_LEN: usize = 64;
pub use crate::config::upstream::SEPARATOR;
const HASH_HEX_LEN: usize = 8;

/// One tool in the catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The name clients see.
    pub name: String,
    /// The upstream that serves it.
    pub upstream: String,
    /// The upstream's own name for it (used when calling).
    pub original: String,
    /// The upstream's raw definition (shared with the upstream's tool list).
    source: Arc<JsonObject>,
    /// The fields clients see differently from `source` (`name`, `_meta`, `execution`):
    /// each replaces the source's field of that name, in its place, or comes last.
    changed: JsonObject,
    /// For a definition over its token budget, the fields listed instead of the full
    /// ones (`description`, `inputSchema`, `outputSchema`; see [`brief`]); empty when
    /// the definition is listed whole.
    brief: JsonObject,
    /// Tokens of the definition as listed (its `_meta["toolgate/definitionTokens"]`);
    /// 0 when not counted (items that are not tools).
    pub definition_tokens: usize,
    /// Tokens of the whole definition: [`Entry::definition_tokens`] unless abbreviated.
    pub full_tokens: usize,
    /// The budget and vocabulary it was fitted with (`None`: not fitted nor counted).
    budget: Option<(usize, Encoding)>,
    /// [`Entry::definition`] serialized once at build time: `tools/list` splices it in
    /// as is instead of re-serializing thousands of definitions per request.
    pub definition_json: Arc<str>,
    /// The compiled `inputSchema`, built on first call and kept for this snapshot.
    pub validator: crate::validate::ArgsValidator,
}

/// `_meta` key: tokens of the definition as listed.
pub const DEFINITION_TOKENS: &str = "toolgate/definitionTokens";
/// `_meta` key of an abbreviated definition: tokens of the whole one.
pub const FULL_DEFINITION_TOKENS: &str = "toolgate/fullDefinitionTokens";
/// Tokens kept free under a budget for the two cost marks themselves.
const MARKS_RESERVE: usize = 32;

impl Entry {
    fn new(
        name: String,
        upstream: &str,
        tool: &ToolDef,
        changed: JsonObject,
        budget: Option<(usize, Encoding)>,
    ) -> Entry {
        let mut entry = Entry {
            name,
            upstream: upstream.to_owned(),
            original: tool.name.clone(),
            source: Arc::clone(&tool.raw),
            changed,
            brief: JsonObject::new(),
            definition_tokens: 0,
            full_tokens: 0,
            budget,
            definition_json: Arc::from(""),
            validator: Default::default(),
        };
        let listed = budget.and_then(|(limit, encoding)| entry.fit(limit, encoding));
        entry.definition_json = listed
            .unwrap_or_else(|| brief::to_text(entry.exposed()))
            .into();
        entry
    }

    /// Abbreviates the listed definition when the whole one is over `limit` tokens, and
    /// marks both costs in its `_meta`. Answers the listed text when the text counted
    /// last is it (the count settled), so that it is not written twice.
    fn fit(&mut self, limit: usize, encoding: Encoding) -> Option<String> {
        let room = limit.saturating_sub(MARKS_RESERVE);
        let whole = brief::to_text(Layers(&self.source, &EMPTY, &self.changed));
        let full = crate::truncate::count(&whole, encoding);
        drop(whole);
        // Every export format is held to the same budget: what it adds (notes, strict
        // mode's nullable types) can push a definition that fits as MCP over it.
        let exports_fit = |brief: &JsonObject| {
            let definition: JsonObject = layered(&self.source, brief, &self.changed)
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect();
            brief::exports_fit(&definition, limit, encoding)
        };
        if full > room || !exports_fit(&EMPTY) {
            let parts = brief::Parts {
                name: &self.name,
                description: self
                    .full("description")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
                input: match self.full("inputSchema") {
                    Some(Value::Object(input)) => Some(input),
                    _ => None,
                },
                has_output: self.full("outputSchema").is_some_and(Value::is_object),
            };
            let fits = |brief: &JsonObject| {
                let listed = brief::to_text(Layers(&self.source, brief, &self.changed));
                crate::truncate::count_till_limit(&listed, encoding, room).is_some()
                    && exports_fit(brief)
            };
            let brief = brief::abbreviate(parts, &fits);
            if !brief.fits {
                tracing::warn!(
                    tool = %self.name,
                    limit,
                    "tool definition still over its token budget at its smallest: its other fields are large"
                );
            }
            self.brief = brief.fields;
            self.mark(FULL_DEFINITION_TOKENS, full);
        }
        // The marks count too: settle on the count of the text that carries it.
        let mut listed = full;
        let mut settled = None;
        for _ in 0..4 {
            self.mark(DEFINITION_TOKENS, listed);
            let text = brief::to_text(self.exposed());
            let now = crate::truncate::count(&text, encoding);
            if now == listed {
                settled = Some(text);
                break;
            }
            listed = now;
        }
        self.definition_tokens = listed;
        self.full_tokens = if self.abbreviated() { full } else { listed };
        settled
    }

    /// Sets one cost mark in the listed `_meta`.
    fn mark(&mut self, key: &str, tokens: usize) {
        if let Some(Value::Object(meta)) = self.changed.get_mut("_meta") {
            meta.insert(key.into(), Value::from(tokens));
        }
    }

    /// Whether `changed` is this entry's changed fields before the cost marks.
    fn same_marks(&self, changed: &JsonObject) -> bool {
        let is_cost = |key: &String| key == DEFINITION_TOKENS || key == FULL_DEFINITION_TOKENS;
        self.changed.len() == changed.len()
            && self
                .changed
                .iter()
                .all(|(key, value)| match (key.as_str(), value) {
                    ("_meta", Value::Object(meta)) => match changed.get("_meta") {
                        Some(Value::Object(other)) => {
                            meta.iter().filter(|(k, _)| !is_cost(k)).count() == other.len()
                                && other.iter().all(|(k, v)| meta.get(k) == Some(v))
                        }
                        _ => false,
                    },
                    _ => changed.get(key) == Some(value),
                })
    }

    /// A field of the definition clients see (abbreviated when over budget).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.brief.get(key).or_else(|| self.full(key))
    }

    /// A field of the whole definition (what calls are validated against).
    pub fn full(&self, key: &str) -> Option<&Value> {
        self.changed.get(key).or_else(|| self.source.get(key))
    }

    /// Whether the definition is listed abbreviated (see [`brief`]).
    pub fn abbreviated(&self) -> bool {
        !self.brief.is_empty()
    }

    /// The definition clients see (a copy; [`Entry::get`] reads one field without it).
    pub fn definition(&self) -> JsonObject {
        self.fields()
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect()
    }

    /// The whole definition, never abbreviated (a copy; what `tool_schema` reads).
    pub fn full_definition(&self) -> JsonObject {
        layered(&self.source, &EMPTY, &self.changed)
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect()
    }

    /// The definition clients see, to serialize (without building it).
    pub fn exposed(&self) -> impl serde::Serialize + '_ {
        Exposed(self)
    }

    /// How the tool may run as a task (its effective `execution.taskSupport`).
    pub fn task_support(&self) -> TaskSupport {
        TaskSupport::of_execution(self.get("execution"))
    }

    /// The listed definition's fields in order (see [`layered`]).
    fn fields(&self) -> impl Iterator<Item = (&String, &Value)> {
        layered(&self.source, &self.brief, &self.changed)
    }
}

static EMPTY: std::sync::LazyLock<JsonObject> = std::sync::LazyLock::new(JsonObject::new);

/// A definition's fields in order: the source's, each replaced by `first`'s or else
/// `then`'s field of that name, then the fields of `then` and of `first` the source
/// lacks.
fn layered<'a>(
    source: &'a JsonObject,
    first: &'a JsonObject,
    then: &'a JsonObject,
) -> impl Iterator<Item = (&'a String, &'a Value)> {
    let replaced = source.iter().map(move |(key, value)| {
        let value = first.get(key).or_else(|| then.get(key)).unwrap_or(value);
        (key, value)
    });
    let added = then
        .iter()
        .filter(move |(key, _)| !source.contains_key(*key))
        .map(move |(key, value)| (key, first.get(key).unwrap_or(value)));
    let added_first = first
        .iter()
        .filter(move |(key, _)| !source.contains_key(*key) && !then.contains_key(*key));
    replaced.chain(added).chain(added_first)
}

/// Serializes an entry's definition without building it.
struct Exposed<'a>(&'a Entry);

impl serde::Serialize for Exposed<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.fields())
    }
}

/// Serializes layered fields (see [`layered`]) without building them.
struct Layers<'a>(&'a JsonObject, &'a JsonObject, &'a JsonObject);

impl serde::Serialize for Layers<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(layered(self.0, self.1, self.2))
    }
}

/// What a set of listed definitions costs a model (see [`Entry::definition_tokens`]),
/// and which of them are abbreviated, with their whole cost. `GET /v1/tools` answers
/// it as it is, so `/openapi.json` describes it from this type (the field docs are
/// the document's descriptions).
#[derive(Debug, Default, PartialEq, serde::Serialize, schemars::JsonSchema)]
#[schemars(
    description = "What the listed MCP definitions cost a model, in tokens (`results.encoding`)."
)]
pub struct DefinitionCosts {
    /// Sum over the listed tools (protocol tools not counted) as listed.
    pub listed_tokens: usize,
    /// The same tools' whole definitions.
    pub full_tokens: usize,
    /// Tools over their definition budget, listed abbreviated (`tool_schema` or
    /// `GET /v1/tools/{name}/schema` has the rest).
    pub abbreviated: Vec<AbbreviatedCost>,
}

/// One abbreviated definition's costs.
// Named `AbbreviatedTool` in `/openapi.json`, as it always was there.
#[derive(Debug, PartialEq, serde::Serialize, schemars::JsonSchema)]
#[schemars(rename = "AbbreviatedTool")]
pub struct AbbreviatedCost {
    pub name: String,
    pub definition_tokens: usize,
    pub full_definition_tokens: usize,
}

impl DefinitionCosts {
    pub fn of<'a>(entries: impl IntoIterator<Item = &'a Entry>) -> DefinitionCosts {
        let mut costs = DefinitionCosts::default();
        for entry in entries {
            costs.listed_tokens += entry.definition_tokens;
            costs.full_tokens += entry.full_tokens;
            if entry.abbreviated() {
                costs.abbreviated.push(AbbreviatedCost {
                    name: entry.name.clone(),
                    definition_tokens: entry.definition_tokens,
                    full_definition_tokens: entry.full_tokens,
                });
            }
        }
        costs
    }
}

/// One upstream's contribution to a catalog build.
pub struct Source<'a> {
    pub upstream: &'a str,
    pub namespace: Namespace,
    pub tools: &'a [ToolDef],
    /// How the catalog shapes its tools: task modes and definition budgets (`None` for
    /// items that are not tools: nothing is changed or counted).
    pub shaping: Option<&'a Shaping>,
}

/// A name clash found while building.
#[derive(Debug, Clone, PartialEq)]
pub struct Collision {
    pub name: String,
    /// `(upstream, tool)` pairs that wanted the name; the first kept it.
    pub claimants: Vec<(String, String)>,
    /// True when an unprefixed (`namespace: none`) upstream is involved.
    pub involves_passthrough: bool,
}

/// An immutable snapshot of the catalog; rebuilt whole when an upstream's tools change.
#[derive(Debug, Default)]
pub struct Catalog {
    entries: Vec<Arc<Entry>>,
    by_name: HashMap<String, usize>,
    /// Prompts, resources and templates of the same snapshot (one snapshot, so the
    /// policy's cached allowed sets cover every kind of item at once).
    /// `None` until set (and in the prompts catalog inside the offerings themselves).
    offerings: Option<Arc<crate::catalog::offerings::Offerings>>,
}

impl Catalog {
    /// Builds a catalog from every upstream's current tools. Also returns the collisions
    /// resolved on the way (the caller logs them; at startup a collision involving a
    /// `namespace: none` upstream is fatal).
    pub fn build(sources: &[Source<'_>]) -> (Catalog, Vec<Collision>) {
        Self::build_named(sources, "toolgate/tool")
    }

    /// [`Catalog::build`] again after a change: an entry whose definition is the same
    /// (the upstream's very object, named and marked the same) is taken over from
    /// `previous` as it is, serialized text and compiled validator included, so a
    /// rebuild costs what changed, and two catalogs never hold two copies of the same
    /// text.
    pub fn rebuild(sources: &[Source<'_>], previous: &Catalog) -> (Catalog, Vec<Collision>) {
        Self::build_from(sources, "toolgate/tool", Some(previous))
    }

    /// [`Catalog::build`] for any named item (tools, prompts): `origin_key` is the
    /// `_meta` key that records the upstream's own name.
    pub fn build_named(sources: &[Source<'_>], origin_key: &str) -> (Catalog, Vec<Collision>) {
        Self::build_from(sources, origin_key, None)
    }

    fn build_from(
        sources: &[Source<'_>],
        origin_key: &str,
        previous: Option<&Catalog>,
    ) -> (Catalog, Vec<Collision>) {
        struct Candidate<'a> {
            upstream: &'a str,
            shaping: Option<&'a Shaping>,
            tool: &'a ToolDef,
            name: String,
            altered: bool,
            passthrough: bool,
        }
        let mut by_name: BTreeMap<String, Vec<Candidate<'_>>> = BTreeMap::new();
        for source in sources {
            let passthrough = source.namespace == Namespace::None;
            for tool in source.tools {
                let wanted = match source.namespace {
                    Namespace::Prefix => format!("{}{SEPARATOR}{}", source.upstream, tool.name),
                    Namespace::None => tool.name.clone(),
                };
                let (name, altered) = legal_name(&wanted, source.upstream, &tool.name);
                by_name.entry(name.clone()).or_default().push(Candidate {
                    upstream: source.upstream,
                    shaping: source.shaping,
                    tool,
                    name,
                    altered,
                    passthrough,
                });
            }
        }

        let mut collisions = Vec::new();
        let mut final_names: BTreeMap<String, Candidate<'_>> = BTreeMap::new();
        let mut suffixed = Vec::new();
        for (name, mut group) in by_name {
            group.sort_by(|a, b| {
                (a.altered, a.upstream, &a.tool.name).cmp(&(b.altered, b.upstream, &b.tool.name))
            });
            if group.len() > 1 {
                collisions.push(Collision {
                    name: name.clone(),
                    claimants: group
                        .iter()
                        .map(|c| (c.upstream.to_owned(), c.tool.name.clone()))
                        .collect(),
                    involves_passthrough: group.iter().any(|c| c.passthrough),
                });
            }
            let mut group = group.into_iter();
            if let Some(first) = group.next() {
                final_names.insert(name, first);
            }
            suffixed.extend(group);
        }
        for mut candidate in suffixed {
            let name = hashed_name(&candidate.name, candidate.upstream, &candidate.tool.name);
            if final_names.contains_key(&name) {
                // Two different pairs with the same 32-bit hash and prefix: astronomically
                // rare, but never silent.
                tracing::error!(
                    upstream = candidate.upstream,
                    tool = %candidate.tool.name,
                    %name,
                    "tool dropped from the catalog: its name collides even after hashing"
                );
                continue;
            }
            candidate.name = name.clone();
            final_names.insert(name, candidate);
        }

        let mut catalog = Catalog::default();
        for (name, candidate) in final_names {
            let mut changed = changed_fields(&name, candidate.upstream, candidate.tool, origin_key);
            if let Some(list) = candidate.shaping.and_then(|shaping| shaping.per_user)
                && let Some(Value::Object(meta)) = changed.get_mut("_meta")
            {
                list.mark(meta);
            }
            // A tool its upstream runs only as a task stays so: no setting makes a
            // plain call of it possible.
            let own = TaskSupport::of(&candidate.tool.raw);
            if let Some(mode) = candidate
                .shaping
                .and_then(|shaping| shaping.task_modes.for_tool(&candidate.tool.name))
                .filter(|_| own != TaskSupport::Required)
            {
                set_task_support(&mut changed, candidate.tool.raw.get("execution"), mode);
            }
            let budget = candidate.shaping.map(|shaping| {
                let budgets = &shaping.definitions;
                (budgets.for_tool(&candidate.tool.name), budgets.encoding)
            });
            let unchanged = previous.and_then(|p| p.get(&name)).filter(|old| {
                Arc::ptr_eq(&old.source, &candidate.tool.raw)
                    && old.upstream == candidate.upstream
                    && old.same_marks(&changed)
                    && old.budget == budget
            });
            let entry = match unchanged {
                Some(old) => Arc::clone(old),
                None => Arc::new(Entry::new(
                    name.clone(),
                    candidate.upstream,
                    candidate.tool,
                    changed,
                    budget,
                )),
            };
            catalog.by_name.insert(name, catalog.entries.len());
            catalog.entries.push(entry);
        }
        (catalog, collisions)
    }

    /// This snapshot with the upstreams' prompts, resources and templates.
    pub fn with_offerings(mut self, offerings: crate::catalog::offerings::Offerings) -> Catalog {
        self.offerings = Some(Arc::new(offerings));
        self
    }

    /// This snapshot with the prompts, resources and templates of `other` (a user's
    /// own catalog shares the shared one's).
    pub fn with_offerings_of(mut self, other: &Catalog) -> Catalog {
        self.offerings = other.offerings.clone();
        self
    }

    /// Prompts, resources and templates (see [`crate::catalog::offerings`]).
    pub fn offerings(&self) -> &crate::catalog::offerings::Offerings {
        static NONE: std::sync::LazyLock<crate::catalog::offerings::Offerings> =
            std::sync::LazyLock::new(Default::default);
        self.offerings.as_deref().unwrap_or(&NONE)
    }

    /// Looks a tool up by the name clients use.
    pub fn get(&self, name: &str) -> Option<&Arc<Entry>> {
        self.by_name.get(name).map(|&i| &self.entries[i])
    }

    /// Every entry, sorted by name.
    pub fn entries(&self) -> &[Arc<Entry>] {
        &self.entries
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The catalog name of an item `original` of `upstream`, before collision handling:
/// prefixed (or not) and mapped onto the legal alphabet and length. Resources and
/// templates are named this way for the policy (their URIs, not their names, address
/// them, so a repeated name needs no suffix).
pub fn item_name(upstream: &str, namespace: Namespace, original: &str) -> String {
    let wanted = match namespace {
        Namespace::Prefix => format!("{upstream}{SEPARATOR}{original}"),
        Namespace::None => original.to_owned(),
    };
    legal_name(&wanted, upstream, original).0
}

/// Maps `wanted` onto the legal alphabet and length. Returns the name and whether it had
/// to change.
fn legal_name(wanted: &str, upstream: &str, tool: &str) -> (String, bool) {
    let mapped: String = wanted
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mapped = if mapped.is_empty() {
        "_".to_owned()
    } else {
        mapped
    };
    if mapped.len() > MAX_NAME_LEN {
        (hashed_name(&mapped, upstream, tool), true)
    } else {
        let altered = mapped != wanted;
        (mapped, altered)
    }
}

/// `name` cut to leave room for `_` and the hash of the original pair.
fn hashed_name(name: &str, upstream: &str, tool: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(upstream.as_bytes());
    hasher.update([0]);
    hasher.update(tool.as_bytes());
    let digest = hasher.finalize();
    let hex: String = digest
        .iter()
        .take(HASH_HEX_LEN / 2)
        .map(|b| format!("{b:02x}"))
        .collect();
    // `name` is ASCII by construction, so byte slicing is safe.
    let keep = name.len().min(MAX_NAME_LEN - HASH_HEX_LEN - 1);
    format!("{}_{hex}", &name[..keep])
}

/// The fields the catalog changes in `tool`'s definition: its `name`, and its `_meta`
/// with the routing facts added (the upstream's own `_meta` keys kept).
fn changed_fields(name: &str, upstream: &str, tool: &ToolDef, origin_key: &str) -> JsonObject {
    let mut meta = match tool.raw.get("_meta") {
        Some(Value::Object(meta)) => meta.clone(),
        _ => JsonObject::new(),
    };
    meta.insert(
        "toolgate/upstream".into(),
        Value::String(upstream.to_owned()),
    );
    meta.insert(origin_key.into(), Value::String(tool.name.clone()));
    let mut changed = JsonObject::new();
    changed.insert("name".into(), Value::String(name.to_owned()));
    changed.insert("_meta".into(), Value::Object(meta));
    changed
}

/// Sets `execution.taskSupport` in `changed`, keeping whatever else the source's
/// `execution` holds.
fn set_task_support(changed: &mut JsonObject, source: Option<&Value>, mode: TaskSupport) {
    let mut execution = match source {
        Some(Value::Object(execution)) => execution.clone(),
        _ => JsonObject::new(),
    };
    execution.insert("taskSupport".into(), Value::String(mode.as_str().into()));
    changed.insert("execution".into(), Value::Object(execution));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Kind, ToolSettings};
    use serde_json::json;

    fn tool(name: &str) -> ToolDef {
        let raw = json!({"name": name, "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}, "x-extra": 1});
        ToolDef::from_raw(raw.as_object().unwrap().clone()).unwrap()
    }

    fn names(catalog: &Catalog) -> Vec<String> {
        catalog.entries().iter().map(|e| e.name.clone()).collect()
    }

    fn shaped(modes: &TaskModes) -> Shaping {
        Shaping {
            task_modes: modes.clone(),
            ..Shaping::default()
        }
    }

    fn valid(name: &str) -> bool {
        !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn task_modes_come_from_the_tool_then_the_upstream_then_the_kind() {
        let own = |support: Option<&str>, name: &str| {
            let mut raw = json!({"name": name, "inputSchema": {"type": "object"}});
            if let Some(support) = support {
                raw["execution"] = json!({"taskSupport": support, "x-kept": 1});
            }
            ToolDef::from_raw(raw.as_object().unwrap().clone()).unwrap()
        };
        let tools = [
            own(None, "plain"),
            own(Some("required"), "slow"),
            own(Some("optional"), "either"),
        ];
        let mode_of = |modes: Option<&TaskModes>| {
            let shaping = modes.map(shaped);
            let (catalog, _) = Catalog::build(&[Source {
                upstream: "up",
                namespace: Namespace::Prefix,
                tools: &tools,
                shaping: shaping.as_ref(),
            }]);
            ["plain", "slow", "either"].map(|name| {
                let entry = catalog.get(&format!("up__{name}")).unwrap();
                entry.task_support().as_str()
            })
        };
        // MCP upstreams without settings: each tool's own word (absent: forbidden).
        let mcp = TaskModes::from_settings(Kind::Stdio, None, &BTreeMap::new());
        assert_eq!(mode_of(Some(&mcp)), ["forbidden", "required", "optional"]);
        assert_eq!(mode_of(None), ["forbidden", "required", "optional"]);
        // OpenAPI: optional unless set (a task-only tool stays so).
        let openapi = TaskModes::from_settings(Kind::Openapi, None, &BTreeMap::new());
        assert_eq!(
            mode_of(Some(&openapi)),
            ["optional", "required", "optional"]
        );
        // The upstream's setting, then a tool's own setting over it.
        let per_tool = BTreeMap::from([(
            "slow".to_owned(),
            ToolSettings {
                background: Some(TaskSupport::Required),
                definition_max_tokens: None,
            },
        )]);
        let set = TaskModes::from_settings(Kind::Stdio, Some(TaskSupport::Forbidden), &per_tool);
        assert_eq!(mode_of(Some(&set)), ["forbidden", "required", "forbidden"]);
        // A tool the upstream runs only as a task stays task-only whatever is set.
        let lowered = BTreeMap::from([(
            "slow".to_owned(),
            ToolSettings {
                background: Some(TaskSupport::Optional),
                definition_max_tokens: None,
            },
        )]);
        let set_optional = TaskModes::from_settings(Kind::Stdio, None, &lowered);
        assert_eq!(
            mode_of(Some(&set_optional)),
            ["forbidden", "required", "optional"]
        );
        // What else `execution` holds is kept.
        let (catalog, _) = Catalog::build(&[Source {
            upstream: "up",
            namespace: Namespace::Prefix,
            tools: &tools,
            shaping: Some(&shaped(&set)),
        }]);
        let execution = &catalog.get("up__either").unwrap().definition()["execution"];
        assert_eq!(execution, &json!({"taskSupport": "forbidden", "x-kept": 1}));
        assert!(
            catalog
                .get("up__either")
                .unwrap()
                .definition_json
                .contains("\"taskSupport\":\"forbidden\"")
        );
    }

    #[test]
    fn prefixes_and_keeps_raw_fields() {
        let tools = [tool("echo"), tool("get-sum")];
        let (catalog, collisions) = Catalog::build(&[Source {
            upstream: "ev",
            namespace: Namespace::Prefix,
            tools: &tools,
            shaping: None,
        }]);
        assert!(collisions.is_empty());
        assert_eq!(names(&catalog), ["ev__echo", "ev__get-sum"]);
        let entry = catalog.get("ev__echo").unwrap();
        assert_eq!(entry.original, "echo");
        assert_eq!(entry.definition()["execution"]["taskSupport"], "optional");
        assert_eq!(entry.definition()["x-extra"], 1);
        assert_eq!(entry.definition()["_meta"]["toolgate/upstream"], "ev");
    }

    /// The definition clients see is the upstream's, field for field and in order,
    /// with only `name` replaced and the routing facts added; its stored text is the
    /// same definition.
    #[test]
    fn the_exposed_definition_is_the_upstreams_in_its_order() {
        let raw = json!({"name": "t", "_meta": {"theirs": 1}, "inputSchema": {"type": "object"},
            "execution": "odd", "z": true});
        let tools = [ToolDef::from_raw(raw.as_object().unwrap().clone()).unwrap()];
        let modes = TaskModes::from_settings(Kind::Openapi, None, &BTreeMap::new());
        let (catalog, _) = Catalog::build(&[Source {
            upstream: "up",
            namespace: Namespace::Prefix,
            tools: &tools,
            shaping: Some(&shaped(&modes)),
        }]);
        let entry = catalog.get("up__t").unwrap();
        let definition = entry.definition();
        let keys: Vec<&str> = definition.keys().map(String::as_str).collect();
        assert_eq!(keys, ["name", "_meta", "inputSchema", "execution", "z"]);
        assert_eq!(definition["name"], "up__t");
        let tokens = entry.definition_tokens;
        assert_eq!(
            definition["_meta"],
            json!({"theirs": 1, "toolgate/upstream": "up", "toolgate/tool": "t",
                "toolgate/definitionTokens": tokens})
        );
        // The mark counts the very text listed, itself included.
        assert_eq!(
            tokens,
            crate::truncate::count(&entry.definition_json, Encoding::O200kBase)
        );
        assert_eq!(definition["execution"], json!({"taskSupport": "optional"}));
        let text: Value = serde_json::from_str(&entry.definition_json).unwrap();
        assert_eq!(text, Value::Object(definition));
        assert_eq!(entry.get("z"), Some(&json!(true)));
        assert_eq!(entry.task_support(), TaskSupport::Optional);
        // The upstream's object itself is shared, not copied.
        assert!(Arc::ptr_eq(&entry.source, &tools[0].raw));
    }

    /// A rebuild takes over what did not change (the same upstream object, named and
    /// marked the same) and makes new entries for the rest.
    #[test]
    fn a_rebuild_takes_unchanged_entries_over() {
        let source = |tools: &'static [ToolDef], shaping: Option<&'static Shaping>| Source {
            upstream: "up",
            namespace: Namespace::Prefix,
            tools,
            shaping,
        };
        let first_tools: &'static [ToolDef] = Box::leak(Box::new([tool("one"), tool("two")]));
        let (first, _) = Catalog::build(&[source(first_tools, None)]);
        let (second, _) = Catalog::rebuild(&[source(first_tools, None)], &first);
        for name in ["up__one", "up__two"] {
            assert!(Arc::ptr_eq(
                first.get(name).unwrap(),
                second.get(name).unwrap()
            ));
        }
        // `two` changed upstream (another object): a new entry; `one` is taken over.
        let changed =
            json!({"name": "two", "description": "new", "inputSchema": {"type": "object"}});
        let next_tools: &'static [ToolDef] = Box::leak(Box::new([
            first_tools[0].clone(),
            ToolDef::from_raw(changed.as_object().unwrap().clone()).unwrap(),
        ]));
        let (third, _) = Catalog::rebuild(&[source(next_tools, None)], &second);
        assert!(Arc::ptr_eq(
            second.get("up__one").unwrap(),
            third.get("up__one").unwrap()
        ));
        let two = third.get("up__two").unwrap();
        assert!(!Arc::ptr_eq(second.get("up__two").unwrap(), two));
        assert_eq!(two.definition()["description"], "new");
        assert!(two.definition_json.contains("\"description\":\"new\""));
        // A new task mode marks every tool anew.
        let modes: &'static Shaping = Box::leak(Box::new(shaped(&TaskModes::from_settings(
            Kind::Stdio,
            Some(TaskSupport::Forbidden),
            &BTreeMap::new(),
        ))));
        let (fourth, _) = Catalog::rebuild(&[source(next_tools, Some(modes))], &third);
        let one = fourth.get("up__one").unwrap();
        assert!(!Arc::ptr_eq(third.get("up__one").unwrap(), one));
        assert_eq!(one.task_support(), TaskSupport::Forbidden);
    }

    #[test]
    fn maps_illegal_characters_and_shortens_deterministically() {
        let long = "repos/get-a-very-long-operation-name-that-goes-on/and/on/and/on/forever";
        let tools = [tool("a.b/c"), tool(long)];
        let (catalog, _) = Catalog::build(&[Source {
            upstream: "gh",
            namespace: Namespace::Prefix,
            tools: &tools,
            shaping: None,
        }]);
        let all = names(&catalog);
        assert!(all.contains(&"gh__a_b_c".to_owned()), "{all:?}");
        assert!(all.iter().all(|n| valid(n)), "{all:?}");
        let shortened = all.iter().find(|n| n.len() == 64).unwrap();
        // Same input, same name — independent of order.
        let reversed = [tool(long), tool("a.b/c")];
        let (again, _) = Catalog::build(&[Source {
            upstream: "gh",
            namespace: Namespace::Prefix,
            tools: &reversed,
            shaping: None,
        }]);
        assert!(again.get(shortened).is_some());
    }

    #[test]
    fn collisions_resolve_deterministically_regardless_of_order() {
        let a = [tool("_x")];
        let b = [tool("x")];
        let c = [tool("a.b"), tool("a_b")];
        let build = |order: &[usize]| {
            let sources = [
                Source {
                    upstream: "a",
                    namespace: Namespace::Prefix,
                    tools: &a,
                    shaping: None,
                },
                Source {
                    upstream: "a_",
                    namespace: Namespace::Prefix,
                    tools: &b,
                    shaping: None,
                },
                Source {
                    upstream: "c",
                    namespace: Namespace::Prefix,
                    tools: &c,
                    shaping: None,
                },
            ];
            let picked: Vec<Source<'_>> = order
                .iter()
                .map(|&i| Source {
                    upstream: sources[i].upstream,
                    namespace: sources[i].namespace,
                    tools: sources[i].tools,
                    shaping: None,
                })
                .collect();
            Catalog::build(&picked)
        };
        let (one, collisions) = build(&[0, 1, 2]);
        let (two, _) = build(&[2, 1, 0]);
        assert_eq!(names(&one), names(&two));
        assert_eq!(collisions.len(), 2, "{collisions:?}");
        assert_eq!(one.len(), 4);
        // The unaltered name wins; the mapped one is suffixed.
        assert_eq!(one.get("c__a_b").unwrap().original, "a_b");
        assert!(names(&one).iter().all(|n| valid(n)));
    }

    #[test]
    fn passthrough_collisions_are_flagged() {
        let a = [tool("echo")];
        let b = [tool("echo")];
        let (_, collisions) = Catalog::build(&[
            Source {
                upstream: "one",
                namespace: Namespace::None,
                tools: &a,
                shaping: None,
            },
            Source {
                upstream: "two",
                namespace: Namespace::None,
                tools: &b,
                shaping: None,
            },
        ]);
        assert_eq!(collisions.len(), 1);
        assert!(collisions[0].involves_passthrough);
    }
}
