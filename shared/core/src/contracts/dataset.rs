//! Evaluation datasets: a JSONL file of examples, each a full task envelope
//! or inputs merged into a template envelope the header names, with what a
//! run of it is expected to do (its status, JSONLogic assertions over its
//! output, facts the output mentions, a reference answer, a judge score,
//! cost and duration bounds). This module reads and checks a dataset; it
//! runs nothing.
//!
//! Invariants:
//! - Every error names the line (1-based) and the JSON path on it.
//! - An example's envelope is checked as a submission would be
//!   ([`TaskEnvelope::parse_value`]) once the template is merged, and every
//!   assertion is checked as a JSONLogic expression, before anything runs.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::contracts::envelope::TaskEnvelope;

/// One line of a dataset: the header (first line only) or an example.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum DatasetLine {
    Header(DatasetHeaderLine),
    Example(Box<DatasetExample>),
}

/// The optional first line: `{"dataset": {...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DatasetHeaderLine {
    pub dataset: DatasetHeader,
}

/// What applies to every example.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DatasetHeader {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// An envelope file (relative to the dataset) whose `inputs` an
    /// example's `inputs` are merged into, key by key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// A judge panel request file (relative to the dataset) that scores
    /// each example's output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judges: Option<String>,
}

/// One example.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DatasetExample {
    /// Unique within the dataset.
    pub id: String,
    /// A whole task envelope (without a template)…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envelope: Option<Value>,
    /// …or inputs merged into the header's template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Map<String, Value>>,
    #[serde(default)]
    pub expect: Expectations,
}

/// What a run of the example is expected to do; every field is optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expectations {
    /// The run's final status (e.g. `completed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// JSONLogic expressions over the output, each to hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assertions: Vec<Value>,
    /// Facts the output must mention (case-insensitive, anywhere in its text).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mentions: Vec<String>,
    /// A reference answer, for the judges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<Value>,
    /// The least mean judge score that passes (0 to 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_judge_score: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_duration_ms: Option<u64>,
}

/// A dataset read and checked: its header and each example with its
/// envelope resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    pub header: DatasetHeader,
    pub examples: Vec<ResolvedExample>,
}

/// An example whose envelope is whole (the template merged).
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedExample {
    pub id: String,
    /// The line it came from (1-based).
    pub line: usize,
    pub envelope: Value,
    pub expect: Expectations,
}

/// What is wrong with a dataset: the line (1-based), the JSON path on it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {path}: {message}")]
pub struct DatasetError {
    pub line: usize,
    pub path: String,
    pub message: String,
}

fn error(line: usize, path: impl Into<String>, message: impl Into<String>) -> DatasetError {
    DatasetError {
        line,
        path: path.into(),
        message: message.into(),
    }
}

/// Why the template envelope a dataset names could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TemplateUnreadable {
    #[error("`{file}`: {source}")]
    Unread {
        file: String,
        source: std::io::Error,
    },
    #[error("`{file}`: not JSON: {source}")]
    NotJson {
        file: String,
        source: serde_json::Error,
    },
    /// A server reads no files: the template comes with the request.
    #[error("`{file}`: a server reads no files: give the template envelope as `$.template`")]
    NoFilesHere { file: String },
}

/// Reads and checks a dataset. `load_template` reads the envelope file the
/// header names (relative to the dataset: the caller resolves it).
pub fn parse_dataset(
    text: &str,
    load_template: impl Fn(&str) -> Result<Value, TemplateUnreadable>,
) -> Result<Dataset, DatasetError> {
    let mut header: Option<DatasetHeader> = None;
    let mut template: Option<Value> = None;
    let mut examples: Vec<ResolvedExample> = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(raw)
            .map_err(|problem| error(line, "$", format!("not JSON: {problem}")))?;
        if value.get("dataset").is_some() {
            if header.is_some() || !examples.is_empty() {
                return Err(error(
                    line,
                    "$.dataset",
                    "the header is the first line, once",
                ));
            }
            let parsed: DatasetHeaderLine = serde_path_to_error::deserialize(&value)
                .map_err(|problem| located(line, problem))?;
            if let Some(file) = &parsed.dataset.template {
                let loaded = load_template(file)
                    .map_err(|problem| error(line, "$.dataset.template", problem.to_string()))?;
                TaskEnvelope::parse_value(&loaded).map_err(|problem| {
                    error(line, "$.dataset.template", format!("`{file}`: {problem}"))
                })?;
                template = Some(loaded);
            }
            header = Some(parsed.dataset);
            continue;
        }
        let example: DatasetExample =
            serde_path_to_error::deserialize(&value).map_err(|problem| located(line, problem))?;
        if examples.iter().any(|kept| kept.id == example.id) {
            return Err(error(
                line,
                "$.id",
                format!("`{}` is used twice", example.id),
            ));
        }
        let mut envelope = match (example.envelope, example.inputs, &template) {
            (Some(envelope), None, _) => envelope,
            (None, Some(inputs), Some(template)) => with_inputs(template, inputs),
            (None, Some(_), None) => {
                return Err(error(
                    line,
                    "$.inputs",
                    "inputs need a template: name one in the header (`dataset.template`) or give a whole `envelope`",
                ));
            }
            (Some(_), Some(_), _) => {
                return Err(error(
                    line,
                    "$.inputs",
                    "give `envelope` or `inputs`, not both",
                ));
            }
            (None, None, _) => {
                return Err(error(line, "$", "an example gives `envelope` or `inputs`"));
            }
        };
        // Each example runs afresh: an idempotency key (the template's, or a
        // whole envelope's) would hand every example, and every later
        // evaluation within the key's day, the first run made with it.
        if let Some(fields) = envelope.as_object_mut() {
            fields.remove("idempotencyKey");
        }
        TaskEnvelope::parse_value(&envelope).map_err(|problem| match problem {
            crate::CoreError::InvalidEnvelope { path, message } => {
                error(line, path.replacen('$', "$.envelope", 1), message)
            }
            other => error(line, "$.envelope", other.to_string()),
        })?;
        for (position, assertion) in example.expect.assertions.iter().enumerate() {
            crate::basics::logic::check_expression(assertion).map_err(|problem| {
                error(
                    line,
                    format!("$.expect.assertions[{position}]"),
                    format!("not a JSONLogic expression Baton evaluates: {problem:?}"),
                )
            })?;
        }
        if let Some(score) = example.expect.min_judge_score
            && !(0.0..=10.0).contains(&score)
        {
            return Err(error(line, "$.expect.minJudgeScore", "a score is 0 to 10"));
        }
        examples.push(ResolvedExample {
            id: example.id,
            line,
            envelope,
            expect: example.expect,
        });
    }
    if examples.is_empty() {
        return Err(error(1, "$", "the dataset has no example"));
    }
    Ok(Dataset {
        header: header.unwrap_or_default(),
        examples,
    })
}

fn located(line: usize, problem: serde_path_to_error::Error<serde_json::Error>) -> DatasetError {
    let (path, message) = crate::contracts::envelope::located_serde_error(problem);
    error(line, path, message)
}

/// The template with `inputs` laid over its own, key by key.
fn with_inputs(template: &Value, inputs: Map<String, Value>) -> Value {
    let mut envelope = template.clone();
    if let Some(fields) = envelope.as_object_mut() {
        fields.remove("$schema");
        let merged = fields
            .entry("inputs")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(merged) = merged.as_object_mut() {
            merged.extend(inputs);
        }
    }
    envelope
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn template() -> Value {
        json!({
            "objective": "Summarise",
            "inputs": {"tone": "plain", "topic": "x"},
            "outputContract": {"schema": {"type": "object"}}
        })
    }

    fn parse(text: &str) -> Result<Dataset, DatasetError> {
        parse_dataset(text, |file| {
            if file == "template.json" {
                Ok(template())
            } else {
                Err(TemplateUnreadable::Unread {
                    file: file.to_string(),
                    source: std::io::ErrorKind::NotFound.into(),
                })
            }
        })
    }

    #[test]
    fn no_example_keeps_an_idempotency_key_so_each_runs_afresh() {
        let keyed = |id: &str| {
            json!({"id": id, "envelope": {"objective": "o", "idempotencyKey": "same-key",
                   "outputContract": {"schema": {"type": "object"}}}})
            .to_string()
        };
        let dataset = parse(&format!("{}\n{}", keyed("a"), keyed("b"))).unwrap();
        for example in &dataset.examples {
            assert!(
                example.envelope.get("idempotencyKey").is_none(),
                "{}",
                example.id
            );
        }
    }

    #[test]
    fn inputs_are_merged_into_the_template_and_whole_envelopes_kept() {
        let dataset = parse(concat!(
            r#"{"dataset": {"name": "d", "template": "template.json"}}"#,
            "\n",
            r#"{"id": "a", "inputs": {"topic": "y"}, "expect": {"status": "completed", "assertions": [{"!!": [{"var": "summary"}]}], "mentions": ["y"]}}"#,
            "\n\n",
            r#"{"id": "b", "envelope": {"objective": "o", "outputContract": {"schema": {"type": "object"}}}}"#,
        ))
        .unwrap();
        assert_eq!(dataset.header.name, "d");
        assert_eq!(dataset.examples.len(), 2);
        assert_eq!(
            dataset.examples[0].envelope["inputs"],
            json!({"tone": "plain", "topic": "y"})
        );
        assert_eq!(
            dataset.examples[0].expect.status.as_deref(),
            Some("completed")
        );
        assert_eq!(dataset.examples[1].line, 4);
        assert_eq!(dataset.examples[1].envelope["objective"], "o");
    }

    /// The shipped datasets read, their templates resolved next to them,
    /// and every line follows `registry/schemas/dataset.schema.json`.
    #[test]
    fn the_shipped_datasets_parse_and_follow_their_schema() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let folder = root.join("registry/examples/datasets");
        let schema: Value = serde_json::from_str(
            &std::fs::read_to_string(root.join("registry/schemas/dataset.schema.json")).unwrap(),
        )
        .unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        let mut read = 0;
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (index, line) in text.lines().enumerate() {
                let value: Value = serde_json::from_str(line).unwrap();
                let errors: Vec<String> = validator
                    .iter_errors(&value)
                    .map(|problem| problem.to_string())
                    .collect();
                assert!(
                    errors.is_empty(),
                    "{}:{}: {errors:?}",
                    path.display(),
                    index + 1
                );
            }
            let dataset = parse_dataset(&text, |file| {
                let loaded = std::fs::read_to_string(folder.join(file)).map_err(|source| {
                    TemplateUnreadable::Unread {
                        file: file.to_string(),
                        source,
                    }
                })?;
                serde_json::from_str(&loaded).map_err(|source| TemplateUnreadable::NotJson {
                    file: file.to_string(),
                    source,
                })
            })
            .unwrap_or_else(|problem| panic!("{}: {problem}", path.display()));
            assert!(dataset.examples.len() >= 3, "{}", path.display());
            read += 1;
        }
        assert!(read >= 1, "a dataset ships in registry/examples/datasets");
    }

    #[test]
    fn every_error_names_its_line_and_path() {
        let header = r#"{"dataset": {"name": "d", "template": "template.json"}}"#;
        for (text, line, path) in [
            ("{not json", 1, "$"),
            (r#"{"id": "a"}"#, 1, "$"),
            (r#"{"id": "a", "inputs": {}}"#, 1, "$.inputs"),
            (
                r#"{"id": "a", "envelope": {"objective": 3}}"#,
                1,
                "$.envelope.objective",
            ),
            (
                &format!(
                    "{header}\n{}",
                    r#"{"id": "a", "inputs": {}, "expect": {"colour": 1}}"#
                ),
                2,
                "$.expect.colour",
            ),
            (
                &format!(
                    "{header}\n{}",
                    r#"{"id": "a", "inputs": {}, "expect": {"assertions": [{"nonsense_op": [1]}]}}"#
                ),
                2,
                "$.expect.assertions[0]",
            ),
            (
                &format!(
                    "{header}\n{}\n{}",
                    r#"{"id": "a", "inputs": {}}"#, r#"{"id": "a", "inputs": {}}"#
                ),
                3,
                "$.id",
            ),
            (
                r#"{"dataset": {"name": "d", "template": "missing.json"}}"#,
                1,
                "$.dataset.template",
            ),
            (header, 1, "$"),
        ] {
            let problem = parse(text).unwrap_err();
            assert_eq!(
                (problem.line, problem.path.as_str()),
                (line, path),
                "{text}: {problem}"
            );
        }
    }
}
