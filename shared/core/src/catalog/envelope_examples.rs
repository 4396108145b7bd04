//! The registry's example envelopes (`registry/examples/*.json`): what the
//! developer sandbox offers as a starting point. Each is read as JSON with
//! a string `objective`; whether it passes a submission's checks is the
//! sandbox's test to show, not the loader's (a cold start reads them).

use serde::Serialize;
use serde_json::Value;

use crate::basics::error::CoreError;

/// One example envelope, named by its file stem.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EnvelopeExample {
    /// The file's stem (`positioning-recommendation`).
    pub name: String,
    /// The envelope's objective, for a list.
    pub objective: String,
    /// The whole envelope, its editor-only `$schema` removed.
    pub envelope: Value,
}

impl EnvelopeExample {
    /// Reads the file `source_name` (a path ending in `NAME.json`) whose
    /// text is `text`.
    pub fn from_text(source_name: &str, text: &str) -> Result<Self, CoreError> {
        let refused = |path: &str, message: String| CoreError::InvalidRegistry {
            source_name: source_name.to_string(),
            path: path.into(),
            message,
        };
        let mut envelope: Value = serde_json::from_str(text).map_err(|error| {
            refused(
                "$",
                format!(
                    "not JSON (line {}, column {}): {error}",
                    error.line(),
                    error.column()
                ),
            )
        })?;
        let Some(fields) = envelope.as_object_mut() else {
            return Err(refused("$", "an example envelope is a JSON object".into()));
        };
        fields.remove("$schema");
        let objective = fields
            .get("objective")
            .and_then(Value::as_str)
            .ok_or_else(|| refused("$.objective", "an example envelope has an objective".into()))?
            .to_string();
        let file_name = source_name
            .rsplit(['/', '\\'])
            .next()
            .unwrap_or(source_name);
        let name = file_name
            .strip_suffix(".json")
            .unwrap_or(file_name)
            .to_string();
        Ok(EnvelopeExample {
            name,
            objective,
            envelope,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_example_is_named_by_its_file_and_loses_its_editor_schema() {
        let example = EnvelopeExample::from_text(
            "registry/examples/first-draft.json",
            r#"{"$schema": "../schemas/envelope.schema.json", "objective": "Write it"}"#,
        )
        .unwrap_or_else(|error| unreachable!("{error}"));
        assert_eq!(example.name, "first-draft");
        assert_eq!(example.objective, "Write it");
        assert!(example.envelope.get("$schema").is_none());
    }

    #[test]
    fn an_example_without_an_objective_is_refused_naming_the_path() {
        let error = EnvelopeExample::from_text("x/broken.json", r#"{"inputs": {}}"#)
            .err()
            .map(|error| error.to_string())
            .unwrap_or_default();
        assert!(error.contains("$.objective"), "{error}");
        assert!(error.contains("x/broken.json"), "{error}");
    }
}
