//! The configuration of one skills upstream, as it appears in the gateway's file.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Skill packages served as prompts, resources and tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkillsConfig {
    /// Directories to serve: each immediate subdirectory holding a `SKILL.md` is one
    /// skill, and a directory that itself holds a `SKILL.md` is one skill. A relative
    /// path is resolved against the config file's directory.
    pub paths: Vec<String>,
}

impl SkillsConfig {
    /// Every problem of the settings, each naming its field (relative to `skills`).
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        if self.paths.is_empty() {
            problems.push((
                "paths".into(),
                "list at least one directory of skills".into(),
            ));
        }
        for (index, path) in self.paths.iter().enumerate() {
            if path.trim().is_empty() {
                problems.push((format!("paths[{index}]"), "the path is empty".into()));
            }
        }
        problems
    }
}
