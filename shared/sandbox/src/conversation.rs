//! The builder's conversation and how each of the caller's messages is
//! read: an objective, a confirmation, outputs added or removed, or inputs
//! (one JSON object, or `facet: value` / `facet.field: value` lines).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `POST /sandbox/drafts`: the conversation so far, oldest first; the
/// builder's own replies may be sent back as `assistant` messages (they
/// are not read).
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DraftRequest {
    #[serde(default)]
    pub messages: Vec<DraftMessage>,
}

/// One message of the conversation.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DraftMessage {
    pub role: DraftRole,
    pub content: String,
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DraftRole {
    User,
    Assistant,
}

/// Something wrong, and the JSON path it is about.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DraftProblem {
    pub path: String,
    pub message: String,
}

impl DraftProblem {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        DraftProblem {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for DraftProblem {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}: {}", self.path, self.message)
    }
}

impl std::error::Error for DraftProblem {}

/// The most messages a conversation may have.
pub const MAX_DRAFT_MESSAGES: usize = 64;

/// The longest message, in bytes.
pub const MAX_DRAFT_MESSAGE_BYTES: usize = 32 * 1024;

/// What one of the caller's messages says.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Reading {
    /// What the run is for (the first message, or an `objective:` line).
    Objective(String),
    /// The caller takes the draft.
    Confirm,
    /// Outputs to add, by facet name.
    AddGoals(Vec<String>),
    /// Outputs to drop, by facet name.
    RemoveGoals(Vec<String>),
    /// `(key, value)` pairs: a facet name, or `facet.field`, and its value
    /// (JSON from a JSON object, text from a line, shaped later by the
    /// schema it is for).
    Inputs(Vec<(String, InputText)>),
    /// Something the builder cannot read, and why.
    Unreadable(String),
}

/// A value as the caller wrote it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum InputText {
    /// A value of a JSON object, taken as it is.
    Json(Value),
    /// A line's text, shaped by the schema it is for.
    Text(String),
}

/// Words that take the draft as it is.
const CONFIRMATIONS: &[&str] = &[
    "yes",
    "y",
    "ok",
    "okay",
    "confirm",
    "confirmed",
    "looks good",
    "that is it",
    "thats it",
    "go ahead",
    "take it",
    "done",
    "yes please",
];

/// Reads one message of the caller's. `objective_known`: an earlier
/// message gave the objective (so prose is not read as one again).
pub(crate) fn read_message(text: &str, objective_known: bool) -> Reading {
    let text = text.trim();
    if text.is_empty() {
        return Reading::Unreadable("the message is empty".into());
    }
    let plain: String = text
        .to_lowercase()
        .chars()
        .filter(|character| character.is_alphanumeric() || character.is_whitespace())
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<&str>>()
        .join(" ");
    if CONFIRMATIONS.contains(&plain.as_str()) {
        return Reading::Confirm;
    }
    if let Some(rest) = command_rest(text, &["add", "also"]) {
        return Reading::AddGoals(names_in(rest));
    }
    if let Some(rest) = command_rest(text, &["remove", "drop", "without"]) {
        return Reading::RemoveGoals(names_in(rest));
    }
    if text.starts_with('{') {
        return match serde_json::from_str::<Map<String, Value>>(text) {
            Ok(fields) => Reading::Inputs(
                fields
                    .into_iter()
                    .map(|(key, value)| (key, InputText::Json(value)))
                    .collect(),
            ),
            Err(error) => Reading::Unreadable(format!(
                "it starts like a JSON object but is not one (line {}, column {}): {error}",
                error.line(),
                error.column()
            )),
        };
    }
    if let Some(pairs) = key_value_lines(text) {
        let objective = pairs
            .iter()
            .find(|(key, _)| key == "objective")
            .map(|(_, value)| value.clone());
        return match objective {
            Some(InputText::Text(objective)) if pairs.len() == 1 => Reading::Objective(objective),
            Some(_) => Reading::Unreadable(
                "give the objective on its own (`objective: …`), not among inputs".into(),
            ),
            None => Reading::Inputs(pairs),
        };
    }
    if objective_known {
        return Reading::Unreadable(
            "it is neither a confirmation (`yes`), a change of outputs (`add NAME`, `remove NAME`) nor inputs (`facet: value` lines or one JSON object); to start over with a new objective, write `objective: …`".into(),
        );
    }
    Reading::Objective(text.to_string())
}

/// What follows a leading command word (`add copyVariants`).
fn command_rest<'t>(text: &'t str, commands: &[&str]) -> Option<&'t str> {
    let (first, rest) = text.split_once(char::is_whitespace)?;
    commands
        .iter()
        .any(|command| first.eq_ignore_ascii_case(command))
        .then_some(rest.trim())
}

/// Facet names in a list ("a, b and c").
fn names_in(text: &str) -> Vec<String> {
    text.split(|character: char| character == ',' || character.is_whitespace())
        .map(|name| {
            name.trim_matches(|character: char| !(character.is_alphanumeric() || character == '_'))
        })
        .filter(|name| !name.is_empty() && !name.eq_ignore_ascii_case("and"))
        .map(str::to_string)
        .collect()
}

/// Every non-empty line as `key: value` (or `key = value`), a key being a
/// name or dotted names; None when a line is not.
fn key_value_lines(text: &str) -> Option<Vec<(String, InputText)>> {
    let mut pairs = Vec::new();
    for line in text.lines().map(str::trim).filter(|line| !line.is_empty()) {
        let split_at = line.find([':', '='])?;
        let (key, value) = (line[..split_at].trim(), line[split_at + 1..].trim());
        let is_key = !key.is_empty()
            && key.split('.').all(|part| {
                !part.is_empty()
                    && part
                        .chars()
                        .all(|character| character.is_alphanumeric() || character == '_')
            });
        if !is_key || value.is_empty() {
            return None;
        }
        pairs.push((key.to_string(), InputText::Text(value.to_string())));
    }
    (!pairs.is_empty()).then_some(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prose_first_is_the_objective_and_later_it_is_refused() {
        assert_eq!(
            read_message("Write a summary of the quarter", false),
            Reading::Objective("Write a summary of the quarter".into())
        );
        assert!(matches!(
            read_message("Write a summary of the quarter", true),
            Reading::Unreadable(_)
        ));
    }

    #[test]
    fn confirmations_commands_and_inputs_are_told_apart() {
        assert_eq!(read_message(" Yes! ", true), Reading::Confirm);
        assert_eq!(read_message("Looks good.", true), Reading::Confirm);
        assert_eq!(
            read_message("add first_facet, second_facet and third", true),
            Reading::AddGoals(vec![
                "first_facet".into(),
                "second_facet".into(),
                "third".into()
            ])
        );
        assert_eq!(
            read_message("remove some_facet", true),
            Reading::RemoveGoals(vec!["some_facet".into()])
        );
        assert_eq!(
            read_message("thing.name: Example Co\nthing.count: 3", true),
            Reading::Inputs(vec![
                ("thing.name".into(), InputText::Text("Example Co".into())),
                ("thing.count".into(), InputText::Text("3".into())),
            ])
        );
        assert_eq!(
            read_message(r#"{"thing": {"name": "x"}}"#, true),
            Reading::Inputs(vec![(
                "thing".into(),
                InputText::Json(serde_json::json!({"name": "x"}))
            )])
        );
        assert_eq!(
            read_message("objective: Start again", true),
            Reading::Objective("Start again".into())
        );
    }

    #[test]
    fn a_broken_json_object_says_where() {
        let Reading::Unreadable(why) = read_message("{\"thing\": ", true) else {
            unreachable!("read as something else");
        };
        assert!(why.contains("line 1"), "{why}");
    }
}
