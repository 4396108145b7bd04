//! Context-type guidance as registry data (`registry/contexts/*.json`): what
//! a conversation in a given context is for and how the agent must behave
//! in it. A session's `contextType` picks one; its text joins the system
//! prompt. No context type is named in code.

use serde::{Deserialize, Serialize};

/// One context type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContextGuidance {
    pub name: String,
    /// Other names callers use for it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
    /// The primary intent, one line.
    pub intent: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_behaviors: Vec<String>,
    /// The model profile this context wants (`speed`, `balanced`, `quality`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
}

impl ContextGuidance {
    /// Checks a definition; an error is `(JSON path, message)`.
    pub fn check(&self) -> Result<(), (String, String)> {
        let valid = |name: &str| {
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        if !valid(&self.name) {
            return Err((
                "$.name".into(),
                format!("`{}`: ASCII letters, digits, `_` or `-`", self.name),
            ));
        }
        if let Some(index) = self.aliases.iter().position(|alias| !valid(alias)) {
            return Err((
                format!("$.aliases[{index}]"),
                "ASCII letters, digits, `_` or `-`".into(),
            ));
        }
        if self.intent.trim().is_empty() {
            return Err(("$.intent".into(), "say what the context is for".into()));
        }
        Ok(())
    }

    /// Whether `context_type` names this context (its name or an alias).
    pub fn answers_to(&self, context_type: &str) -> bool {
        self.name == context_type || self.aliases.iter().any(|alias| alias == context_type)
    }

    /// The section this context adds to a session's system prompt.
    pub fn prompt_section(&self) -> String {
        let mut section = format!("Context: {}. Intent: {}.", self.name, self.intent);
        if !self.required_behaviors.is_empty() {
            section.push_str("\nRequired behaviours:");
            for behavior in &self.required_behaviors {
                section.push_str("\n- ");
                section.push_str(behavior);
            }
        }
        section
    }
}
