//! How the catalog shapes one upstream's tools beyond naming them: whether each may run
//! as a background task, and how many tokens its listed definition may cost.

use std::collections::BTreeMap;

use crate::config::{Kind, ResolvedSettings, TaskSupport, ToolSettings};
use crate::truncate::Encoding;

/// Everything the catalog applies to one upstream's tools.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Shaping {
    pub task_modes: TaskModes,
    pub definitions: DefinitionBudgets,
    /// For an upstream reached with each user's own authorization: whose list its
    /// tools come from (marked in each definition's `_meta`).
    pub per_user: Option<PerUserList>,
}

/// Whose list a per-user upstream's tools come from, as their definitions say:
/// `_meta["toolgate/authorization"] = "user"` on both (a call may answer
/// `authorization_required` with a link for the user to connect), and
/// `_meta["toolgate/connected"] = true` on the caller's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerUserList {
    /// The list callers who have not connected see (what every user's list has alike).
    Shared,
    /// The caller's own connection listed these.
    Own,
}

impl PerUserList {
    /// Adds the marks to a definition's `_meta`.
    pub(super) fn mark(self, meta: &mut toolgate_adapters::JsonObject) {
        use serde_json::Value;
        meta.insert(
            "toolgate/authorization".into(),
            Value::String("user".into()),
        );
        if self == PerUserList::Own {
            meta.insert("toolgate/connected".into(), Value::Bool(true));
        }
    }
}

impl Shaping {
    /// The shaping a config's resolved settings give an upstream of `kind`.
    pub fn from_settings(kind: Kind, settings: &ResolvedSettings, encoding: Encoding) -> Shaping {
        Shaping {
            task_modes: TaskModes::from_settings(kind, settings.background, &settings.tools),
            definitions: DefinitionBudgets {
                default: settings.definition_max_tokens,
                tools: settings
                    .tools
                    .iter()
                    .filter_map(|(name, tool)| Some((name.clone(), tool.definition_max_tokens?)))
                    .collect(),
                encoding,
            },
            per_user: None,
        }
    }

    /// Default shaping for an upstream of `kind` (no settings of its own).
    pub fn of_kind(kind: Kind) -> Shaping {
        Shaping {
            task_modes: TaskModes::from_settings(kind, None, &BTreeMap::new()),
            definitions: DefinitionBudgets::default(),
            per_user: None,
        }
    }
}

/// How many tokens each of an upstream's tool definitions may cost as listed
/// (`catalog.definition_max_tokens`, the upstream's, the tool's).
#[derive(Debug, Clone, PartialEq)]
pub struct DefinitionBudgets {
    default: usize,
    tools: BTreeMap<String, usize>,
    pub encoding: Encoding,
}

impl Default for DefinitionBudgets {
    fn default() -> Self {
        DefinitionBudgets {
            default: crate::config::DEFAULT_DEFINITION_MAX_TOKENS,
            tools: BTreeMap::new(),
            encoding: Encoding::default(),
        }
    }
}

impl DefinitionBudgets {
    /// Every tool of the upstream within `tokens`.
    pub fn uniform(tokens: usize) -> DefinitionBudgets {
        DefinitionBudgets {
            default: tokens,
            ..DefinitionBudgets::default()
        }
    }

    /// The budget of the upstream's tool `original`.
    pub fn for_tool(&self, original: &str) -> usize {
        self.tools.get(original).copied().unwrap_or(self.default)
    }
}

/// How one upstream's tools may run as background tasks, as each tool's definition
/// then says (`execution.taskSupport`, what every surface reads): the config's word
/// for the tool, else for the upstream, else its kind's default (`optional` for
/// OpenAPI), else what the tool itself says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskModes {
    upstream: Option<TaskSupport>,
    tools: BTreeMap<String, TaskSupport>,
}

impl TaskModes {
    pub fn from_settings(
        kind: Kind,
        background: Option<TaskSupport>,
        tools: &BTreeMap<String, ToolSettings>,
    ) -> TaskModes {
        // An HTTP operation says nothing about tasks and can always run in the
        // background; an MCP server's or a skill's tool says for itself.
        let kind_default = match kind {
            Kind::Openapi => Some(TaskSupport::Optional),
            Kind::Stdio | Kind::Sse | Kind::StreamableHttp | Kind::Skills | Kind::Embedded => None,
        };
        TaskModes {
            upstream: background.or(kind_default),
            tools: tools
                .iter()
                .filter_map(|(name, tool)| Some((name.clone(), tool.background?)))
                .collect(),
        }
    }

    /// The mode the gateway sets for the upstream's tool `original`; `None`: the
    /// tool's own stands.
    pub(super) fn for_tool(&self, original: &str) -> Option<TaskSupport> {
        self.tools.get(original).copied().or(self.upstream)
    }
}
