//! Skill packages as an upstream: a directory holding `SKILL.md` (instructions),
//! optionally `skill.yaml` (`description`, `name`) and any other files (`scripts/`,
//! `assets/`, …) becomes
//!
//! - a **prompt** named like the skill, whose `prompts/get` is SKILL.md as one user
//!   message (described by `skill.yaml`'s `description`, else SKILL.md's front matter
//!   `description`, else its first heading);
//! - a **resource** per file, `skill://<skill>/<relative path>`, read as text when it is
//!   UTF-8 and as a base64 blob otherwise, never outside the skill's directory;
//! - a **tool** named like the skill, without arguments, returning SKILL.md and a
//!   `resource_link` per file, for clients that only call tools.
//!
//! The paths are watched: an edit, a new or removed skill or file changes the lists
//! (and bumps `tools_changed`) within about a second; reads always serve the file as
//! it is now. Counts and sizes are capped ([`Limits`]), with a log line naming what
//! was left out.
//!
//! Modules: `config` (the file's settings), `scan` (what is on disk), `files` (URIs,
//! MIME types, safe reads), `listing` (the MCP shapes), `watch` (change
//! notification), `upstream` (the [`crate::Upstream`] implementation).

mod config;
mod files;
mod listing;
mod scan;
mod upstream;
mod watch;

pub use config::SkillsConfig;
pub use files::{SCHEME, mime_type, parse_uri, uri};
pub use scan::{Limits, METADATA_FILE, SKILL_FILE};
pub use upstream::SkillsUpstream;
