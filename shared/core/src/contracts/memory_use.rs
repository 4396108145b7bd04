//! What a run does with the tenant's memory across runs: the envelope's
//! `memory` block (the namespaces its nodes recall from, how many snippets
//! each gets, where its remembered facets go, what its agents' memory
//! tools may read and write), and a recalled snippet as a node receives it.
//!
//! Memory is opt-in per envelope: a run without the block recalls nothing
//! and remembers nothing. Recall never reaches the planner, so a recalled
//! item cannot change a plan; it reaches a node as quoted data (see
//! `state::context`).

use baton_memory::item::{Provenance, check_namespace};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::basics::error::CoreError;

/// Snippets a node gets when the envelope does not say.
pub const DEFAULT_SNIPPETS_PER_NODE: u32 = 3;
/// Snippets a node gets at most.
pub const MAX_SNIPPETS_PER_NODE: u32 = 20;
/// Namespaces a run recalls from at most (one search reads each whole).
pub const MAX_RECALLED_NAMESPACES: usize = 10;
/// Characters of one recalled snippet's text a node is given at most.
pub const MAX_SNIPPET_CHARS: usize = 2_000;

/// The envelope's `memory` block.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvelopeMemory {
    /// What the run's model nodes recall before they run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recall: Option<MemoryRecall>,
    /// The namespace the run's remembered facets are written to when it
    /// completes (a capability names them in `remember`; each facet is an
    /// item keyed by the facet's name). Agents' `memory_put` writes here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remember_to: Option<Vec<String>>,
}

/// Where and how much a node recalls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemoryRecall {
    /// Namespaces searched (1 to 10), each read whole; agents'
    /// `memory_search` reads these and nothing else.
    pub namespaces: Vec<Vec<String>>,
    /// Snippets each node gets at most (1 to 20, default 3), ranked for the
    /// node's instructions and input facets.
    #[serde(default = "default_snippets_per_node")]
    pub per_node: u32,
}

fn default_snippets_per_node() -> u32 {
    DEFAULT_SNIPPETS_PER_NODE
}

impl EnvelopeMemory {
    /// The checks parsing cannot make, the path of the first fault named
    /// (`$.memory…`).
    pub fn check(&self) -> Result<(), CoreError> {
        let invalid = |path: String, message: String| CoreError::InvalidEnvelope { path, message };
        if let Some(recall) = &self.recall {
            if recall.namespaces.is_empty() || recall.namespaces.len() > MAX_RECALLED_NAMESPACES {
                return Err(invalid(
                    "$.memory.recall.namespaces".into(),
                    format!(
                        "1 to {MAX_RECALLED_NAMESPACES} namespaces (this has {})",
                        recall.namespaces.len()
                    ),
                ));
            }
            for (index, namespace) in recall.namespaces.iter().enumerate() {
                check_namespace(
                    &format!("$.memory.recall.namespaces[{index}]"),
                    namespace,
                    false,
                )
                .map_err(|fault| invalid(fault.path, fault.message))?;
            }
            if !(1..=MAX_SNIPPETS_PER_NODE).contains(&recall.per_node) {
                return Err(invalid(
                    "$.memory.recall.perNode".into(),
                    format!("1 to {MAX_SNIPPETS_PER_NODE} snippets"),
                ));
            }
        }
        if let Some(namespace) = &self.remember_to {
            check_namespace("$.memory.rememberTo", namespace, false)
                .map_err(|fault| invalid(fault.path, fault.message))?;
        }
        Ok(())
    }

    /// Whether an agent's memory tools may read `namespace` (one the run
    /// recalls from, or the one it remembers to).
    pub fn may_read(&self, namespace: &[String]) -> bool {
        self.recall
            .as_ref()
            .is_some_and(|recall| recall.namespaces.iter().any(|named| named == namespace))
            || self.remember_to.as_deref() == Some(namespace)
    }

    /// The namespaces an agent's `memory_search` reads.
    pub fn readable(&self) -> Vec<Vec<String>> {
        let mut namespaces: Vec<Vec<String>> = self
            .recall
            .as_ref()
            .map(|recall| recall.namespaces.clone())
            .unwrap_or_default();
        if let Some(written) = &self.remember_to
            && !namespaces.contains(written)
        {
            namespaces.push(written.clone());
        }
        namespaces
    }
}

/// What an agent's memory tools may touch in one run: the namespaces
/// `memory_search` reads and the one `memory_put` writes to, and whose
/// preferences they are (a chat's signed-in person).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemoryToolScope {
    pub readable: Vec<Vec<String>>,
    pub writable: Option<Vec<String>>,
    pub person: Option<String>,
}

/// The first part of a person's preferences namespace.
pub const PEOPLE_NAMESPACE: &str = "people";
/// The last part of a person's preferences namespace.
pub const PREFERENCES_NAMESPACE: &str = "preferences";

impl MemoryToolScope {
    /// The scope of a run: its envelope's `memory` block (reads what it
    /// recalls from and remembers to, writes where it remembers), and for a
    /// chat whose settings remember preferences, its person's
    /// `["people", <user>, "preferences"]` (read and written; it is the one
    /// written to).
    pub fn of(
        memory: Option<&EnvelopeMemory>,
        chat_person: Option<&str>,
        chat_remembers_preferences: bool,
    ) -> Self {
        let mut scope = MemoryToolScope {
            readable: memory.map(EnvelopeMemory::readable).unwrap_or_default(),
            writable: memory.and_then(|memory| memory.remember_to.clone()),
            person: None,
        };
        if chat_remembers_preferences
            && let Some(person) = chat_person.filter(|person| !person.trim().is_empty())
        {
            let preferences = vec![
                PEOPLE_NAMESPACE.to_string(),
                person.to_string(),
                PREFERENCES_NAMESPACE.to_string(),
            ];
            if !scope.readable.contains(&preferences) {
                scope.readable.insert(0, preferences.clone());
            }
            scope.writable = Some(preferences);
            scope.person = Some(person.to_string());
        }
        scope.readable.truncate(MAX_RECALLED_NAMESPACES);
        scope
    }

    /// Whether the tools have anything to touch (else they are not offered).
    pub fn is_empty(&self) -> bool {
        self.readable.is_empty() && self.writable.is_none()
    }
}

/// One item a node was given from memory: quoted data with where it came
/// from, never an instruction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecalledSnippet {
    pub namespace: Vec<String>,
    pub key: String,
    /// The item's text, at most [`MAX_SNIPPET_CHARS`] characters.
    pub text: String,
    /// Who wrote it: the run, node and attempt, or the person.
    pub provenance: Provenance,
    /// When it was last written (RFC 3339).
    pub updated_at: String,
}

impl RecalledSnippet {
    /// A snippet of an item's text, cut to [`MAX_SNIPPET_CHARS`].
    pub fn new(
        namespace: Vec<String>,
        key: String,
        text: &str,
        provenance: Provenance,
        updated_at: String,
    ) -> Self {
        let text = match text.char_indices().nth(MAX_SNIPPET_CHARS) {
            Some((cut, _)) => format!("{}…", &text[..cut]),
            None => text.to_string(),
        };
        Self {
            namespace,
            key,
            text,
            provenance,
            updated_at,
        }
    }
}

/// The text a node's recall is ranked by: its instructions, then its input
/// facets' names and values, cut to `max_chars`.
pub fn recall_query(
    instructions: &str,
    inputs: &serde_json::Map<String, Value>,
    max_chars: usize,
) -> String {
    let mut query = String::from(instructions);
    for (facet, value) in inputs {
        query.push('\n');
        query.push_str(facet);
        query.push_str(": ");
        match value {
            Value::String(text) => query.push_str(text),
            other => query.push_str(&other.to_string()),
        }
    }
    match query.char_indices().nth(max_chars) {
        Some((cut, _)) => query[..cut].to_string(),
        None => query,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|part| part.to_string()).collect()
    }

    #[test]
    fn a_memory_block_names_the_path_of_its_fault() {
        let cases: [(Value, &str); 4] = [
            (
                serde_json::json!({"recall": {"namespaces": []}}),
                "$.memory.recall.namespaces",
            ),
            (
                serde_json::json!({"recall": {"namespaces": [["client"], []]}}),
                "$.memory.recall.namespaces[1]",
            ),
            (
                serde_json::json!({"recall": {"namespaces": [["client"]], "perNode": 21}}),
                "$.memory.recall.perNode",
            ),
            (
                serde_json::json!({"rememberTo": ["client", "a\u{0007}"]}),
                "$.memory.rememberTo[1]",
            ),
        ];
        for (block, path) in cases {
            let memory: EnvelopeMemory = serde_json::from_value(block.clone()).unwrap();
            match memory.check() {
                Err(CoreError::InvalidEnvelope { path: found, .. }) => {
                    assert_eq!(found, path, "{block}")
                }
                other => panic!("{block}: {other:?}"),
            }
        }
        let fine: EnvelopeMemory = serde_json::from_value(serde_json::json!({
            "recall": {"namespaces": [["client", "x", "tone"]]},
            "rememberTo": ["client", "x", "tone"]
        }))
        .unwrap();
        assert_eq!(fine.check(), Ok(()));
        assert_eq!(fine.recall.as_ref().map(|recall| recall.per_node), Some(3));
        assert!(fine.may_read(&names(&["client", "x", "tone"])));
        assert!(!fine.may_read(&names(&["client", "y"])));
        assert_eq!(fine.readable(), vec![names(&["client", "x", "tone"])]);
    }

    #[test]
    fn a_chat_remembering_preferences_scopes_its_tools_to_its_person() {
        let memory: EnvelopeMemory = serde_json::from_value(serde_json::json!({
            "recall": {"namespaces": [["team", "facts"]]}
        }))
        .unwrap();
        let preferences = names(&["people", "ana@example.com", "preferences"]);
        let chat = MemoryToolScope::of(Some(&memory), Some("ana@example.com"), true);
        assert_eq!(
            chat.readable,
            vec![preferences.clone(), names(&["team", "facts"])]
        );
        assert_eq!(chat.writable, Some(preferences));
        assert_eq!(chat.person.as_deref(), Some("ana@example.com"));
        // No person, or settings that do not remember: the envelope's alone.
        let anonymous = MemoryToolScope::of(Some(&memory), None, true);
        assert_eq!(anonymous.readable, vec![names(&["team", "facts"])]);
        assert_eq!(anonymous.writable, None);
        assert!(MemoryToolScope::of(None, Some("ana@example.com"), false).is_empty());
    }

    #[test]
    fn a_snippet_is_cut_at_its_limit_on_a_character_boundary() {
        let long = "é".repeat(MAX_SNIPPET_CHARS + 5);
        let snippet = RecalledSnippet::new(
            names(&["n"]),
            "k".into(),
            &long,
            Provenance::default(),
            "2026-12-07T00:00:00Z".into(),
        );
        assert_eq!(snippet.text.chars().count(), MAX_SNIPPET_CHARS + 1);
        assert!(snippet.text.ends_with('…'));
    }

    #[test]
    fn the_recall_query_holds_instructions_then_inputs() {
        let mut inputs = serde_json::Map::new();
        inputs.insert("brief".into(), Value::String("a launch".into()));
        inputs.insert("knobs".into(), serde_json::json!({"count": 2}));
        let query = recall_query("Write copy.", &inputs, 1_000);
        assert_eq!(query, "Write copy.\nbrief: a launch\nknobs: {\"count\":2}");
        assert_eq!(recall_query("Write copy.", &inputs, 5), "Write");
    }
}
