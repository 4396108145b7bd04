//! A memory item, its namespace and provenance, and the checks a new item
//! passes before a store keeps it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Parts a namespace has at most.
pub const MAX_NAMESPACE_DEPTH: usize = 8;
/// Characters a namespace part, or a key, has at most.
pub const MAX_NAMESPACE_PART_CHARS: usize = 128;
/// Characters of an item's search text at most.
pub const MAX_TEXT_CHARS: usize = 16_384;
/// Bytes of an item's value (as JSON) at most: an item, with its text and
/// embedding, stays well inside one DynamoDB item (400 KB).
pub const MAX_VALUE_BYTES: usize = 65_536;

/// The separator of a namespace's parts as stores key them (a control
/// character, which no part may hold).
pub const PART_SEPARATOR: char = '\u{1f}';

/// Who wrote an item.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    /// The run that wrote it (a remembered facet, an agent's tool call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// The person who wrote it (through the API), or whose answer it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub person: Option<String>,
}

/// One item of a tenant's memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryItem {
    /// Outermost first, e.g. a client's name, then a subject.
    pub namespace: Vec<String>,
    pub key: String,
    pub value: Value,
    /// What search reads (the value's text when it is a string).
    pub text: String,
    pub provenance: Provenance,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
    /// RFC 3339; past it the item is gone (stores stop answering it, and
    /// retention removes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// The embedding of `text` by `embeddingModel`, when the deployment has
    /// one (kept for search; not answered over the API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub embedding: Option<Vec<f32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding_model: Option<String>,
}

impl MemoryItem {
    /// The namespace as stores key it: its parts joined by
    /// [`PART_SEPARATOR`].
    pub fn namespace_key(&self) -> String {
        namespace_key(&self.namespace)
    }
}

/// `namespace`'s parts joined by [`PART_SEPARATOR`].
pub fn namespace_key(namespace: &[String]) -> String {
    let separator = PART_SEPARATOR.to_string();
    namespace.join(&separator)
}

/// Whether `namespace` is `prefix` or lies under it.
pub fn under_prefix(namespace: &[String], prefix: &[String]) -> bool {
    namespace.len() >= prefix.len() && namespace[..prefix.len()] == *prefix
}

/// What is wrong with an item: the JSON path and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct InvalidItem {
    pub path: String,
    pub message: String,
}

fn invalid(path: impl Into<String>, message: impl Into<String>) -> InvalidItem {
    InvalidItem {
        path: path.into(),
        message: message.into(),
    }
}

/// Checks a name (a namespace part, a key) at `path`.
fn check_name(path: &str, name: &str) -> Result<(), InvalidItem> {
    let characters = name.chars().count();
    if characters == 0 || characters > MAX_NAMESPACE_PART_CHARS {
        return Err(invalid(
            path,
            format!("1 to {MAX_NAMESPACE_PART_CHARS} characters (this has {characters})"),
        ));
    }
    if name.chars().any(char::is_control) {
        return Err(invalid(path, "no control characters"));
    }
    Ok(())
}

/// Checks a namespace (or a prefix, which may be empty when `may_be_empty`)
/// at `path`.
pub fn check_namespace(
    path: &str,
    namespace: &[String],
    may_be_empty: bool,
) -> Result<(), InvalidItem> {
    if namespace.is_empty() && !may_be_empty {
        return Err(invalid(path, "at least one part"));
    }
    if namespace.len() > MAX_NAMESPACE_DEPTH {
        return Err(invalid(
            path,
            format!(
                "at most {MAX_NAMESPACE_DEPTH} parts (this has {})",
                namespace.len()
            ),
        ));
    }
    for (index, part) in namespace.iter().enumerate() {
        check_name(&format!("{path}[{index}]"), part)?;
    }
    Ok(())
}

/// Checks what a writer gives of an item: its namespace, key, value and
/// text (paths as the API's body names them).
pub fn check_item(
    namespace: &[String],
    key: &str,
    value: &Value,
    text: &str,
) -> Result<(), InvalidItem> {
    check_namespace("$.namespace", namespace, false)?;
    check_name("$.key", key)?;
    let value_bytes = value.to_string().len();
    if value_bytes > MAX_VALUE_BYTES {
        return Err(invalid(
            "$.value",
            format!("{value_bytes} bytes as JSON, over the limit of {MAX_VALUE_BYTES}"),
        ));
    }
    let text_characters = text.chars().count();
    if text_characters > MAX_TEXT_CHARS {
        return Err(invalid(
            "$.text",
            format!("{text_characters} characters, over the limit of {MAX_TEXT_CHARS}"),
        ));
    }
    Ok(())
}

/// The text an item is searched by when its writer gives none: a string
/// value itself, any other value as compact JSON.
pub fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parts(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn a_wrong_item_is_refused_naming_its_path() {
        let refused = |namespace: &[&str], key: &str, value: Value, text: &str| {
            check_item(&parts(namespace), key, &value, text)
                .unwrap_err()
                .path
        };
        assert_eq!(refused(&[], "k", json!(1), ""), "$.namespace");
        assert_eq!(refused(&["a", ""], "k", json!(1), ""), "$.namespace[1]");
        assert_eq!(refused(&["a\u{1f}b"], "k", json!(1), ""), "$.namespace[0]");
        assert_eq!(refused(&["a"], "", json!(1), ""), "$.key");
        let large = json!("x".repeat(MAX_VALUE_BYTES));
        assert_eq!(refused(&["a"], "k", large, ""), "$.value");
        let long = "y".repeat(MAX_TEXT_CHARS + 1);
        assert_eq!(refused(&["a"], "k", json!(1), &long), "$.text");
        let deep: Vec<&str> = vec!["p"; MAX_NAMESPACE_DEPTH + 1];
        assert_eq!(refused(&deep, "k", json!(1), ""), "$.namespace");
        assert!(check_item(&parts(&["client", "tone"]), "k", &json!({"a": 1}), "text").is_ok());
    }

    #[test]
    fn a_prefix_holds_its_namespace_and_those_under_it() {
        let namespace = parts(&["client", "one", "tone"]);
        assert!(under_prefix(&namespace, &parts(&["client"])));
        assert!(under_prefix(&namespace, &parts(&["client", "one", "tone"])));
        assert!(under_prefix(&namespace, &[]));
        assert!(!under_prefix(&namespace, &parts(&["client", "on"])));
        assert!(!under_prefix(
            &parts(&["client"]),
            &parts(&["client", "one"])
        ));
        assert_eq!(namespace_key(&parts(&["a", "b"])), "a\u{1f}b");
    }
}
