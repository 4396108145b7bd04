//! An evaluation a server runs (`POST /api/v1/flex/evaluations`): the
//! request it takes, read and checked here (the dataset given inline: a
//! server reads no files), and the record it keeps and answers with.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use baton_core::contracts::dataset::{Dataset, TemplateUnreadable, parse_dataset};

use crate::results::ExampleResult;
use crate::summary::Summary;

/// The most examples one served evaluation runs.
pub const MAX_EXAMPLES_PER_EVALUATION: usize = 100;

/// The most examples of one served evaluation running at once.
pub const MAX_EVALUATION_CONCURRENCY: usize = 8;

/// `POST /evaluations`'s body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EvaluationRequest {
    /// A name for the list (default: the dataset header's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The dataset's lines as JSON objects (an optional header
    /// `{"dataset": {…}}`, then one example each), or its JSONL text.
    pub dataset: Value,
    /// The template envelope examples given by `inputs` are laid over (a
    /// header's `template` file name is not read: a server reads no files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<Value>,
    /// A judge panel request (`request` with criteria and judges, `config`)
    /// scoring every example.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judges: Option<Value>,
    /// Examples running at once (1 to 8, default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<usize>,
}

/// A request that is not one: the JSON path and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidEvaluation {
    pub path: String,
    pub message: String,
}

fn invalid(path: impl Into<String>, message: impl Into<String>) -> InvalidEvaluation {
    InvalidEvaluation {
        path: path.into(),
        message: message.into(),
    }
}

/// Where the template came from, for the dataset's header.
const INLINE_TEMPLATE: &str = "(the request's template)";

impl EvaluationRequest {
    /// Reads a body, naming the JSON path of what is wrong.
    pub fn parse(body: &Value) -> Result<Self, InvalidEvaluation> {
        // The same path rules as an envelope's (a missing or unknown field named).
        let request: Self = serde_path_to_error::deserialize(body).map_err(|error| {
            let (path, message) = baton_core::contracts::envelope::located_serde_error(error);
            invalid(path, message)
        })?;
        if let Some(concurrency) = request.concurrency
            && !(1..=MAX_EVALUATION_CONCURRENCY).contains(&concurrency)
        {
            return Err(invalid(
                "$.concurrency",
                format!("1 to {MAX_EVALUATION_CONCURRENCY}"),
            ));
        }
        if request
            .judges
            .as_ref()
            .is_some_and(|judges| !judges.is_object())
        {
            return Err(invalid("$.judges", "a judge panel request is an object"));
        }
        Ok(request)
    }

    /// The dataset, read and checked with the request's template. An error
    /// names `$.dataset[i]` (the line as an array item) or `$.dataset` with
    /// its line, then the path inside it.
    pub fn dataset(&self) -> Result<Dataset, InvalidEvaluation> {
        let (mut lines, as_array): (Vec<Value>, bool) = match &self.dataset {
            Value::Array(lines) => (lines.clone(), true),
            Value::String(text) => {
                let mut lines = Vec::new();
                for (index, line) in text.lines().enumerate() {
                    if line.trim().is_empty() {
                        continue;
                    }
                    lines.push(serde_json::from_str(line).map_err(|error| {
                        invalid(
                            "$.dataset",
                            format!("line {}: not JSON: {error}", index + 1),
                        )
                    })?);
                }
                (lines, false)
            }
            _ => {
                return Err(invalid(
                    "$.dataset",
                    "the dataset's lines as an array of objects, or its JSONL text",
                ));
            }
        };
        // The template comes with the request: the header names it (a
        // header is added when the dataset has none).
        let mut inserted_header = false;
        if self.template.is_some() {
            match lines.first_mut().and_then(|first| first.get_mut("dataset")) {
                Some(Value::Object(header)) => {
                    header.insert("template".into(), Value::String(INLINE_TEMPLATE.into()));
                }
                _ => {
                    let mut header = Map::new();
                    let name = self.name.clone().unwrap_or_else(|| "evaluation".into());
                    header.insert("name".into(), Value::String(name));
                    header.insert("template".into(), Value::String(INLINE_TEMPLATE.into()));
                    lines.insert(0, serde_json::json!({ "dataset": header }));
                    inserted_header = true;
                }
            }
        }
        let text: String = lines.iter().map(|line| line.to_string() + "\n").collect();
        let template = self.template.clone();
        let dataset = parse_dataset(&text, |file| match (&template, file) {
            (Some(template), INLINE_TEMPLATE) => Ok(template.clone()),
            _ => Err(TemplateUnreadable::NoFilesHere {
                file: file.to_string(),
            }),
        })
        .map_err(|error| {
            // Back to the caller's numbering: the line as given.
            let given = error.line - usize::from(inserted_header);
            if as_array {
                let inner = error.path.strip_prefix('$').unwrap_or(&error.path);
                invalid(
                    format!("$.dataset[{}]{inner}", given.saturating_sub(1)),
                    error.message,
                )
            } else {
                invalid(
                    "$.dataset",
                    format!("line {given}: {}: {}", error.path, error.message),
                )
            }
        })?;
        if dataset.examples.len() > MAX_EXAMPLES_PER_EVALUATION {
            return Err(invalid(
                "$.dataset",
                format!(
                    "{} examples; a served evaluation runs at most {MAX_EXAMPLES_PER_EVALUATION} (run more with `baton eval --api`)",
                    dataset.examples.len()
                ),
            ));
        }
        Ok(dataset)
    }
}

/// Where a served evaluation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EvaluationStatus {
    Running,
    Completed,
    /// The server stopped before it finished (the examples it finished are kept).
    Interrupted,
}

/// A served evaluation as it is kept and answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvaluationRecord {
    pub evaluation_id: String,
    pub name: String,
    pub status: EvaluationStatus,
    /// RFC 3339.
    pub created_at: String,
    pub total: usize,
    pub finished: usize,
    pub passed: usize,
    /// Whether a judge panel scores the examples.
    pub judged: bool,
    /// Once every example finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
    /// The finished examples' results lines, in the dataset's order (left
    /// out of the list).
    #[serde(default)]
    pub results: Vec<ExampleResult>,
    /// The examples whose runs are under way, with their run ids (left
    /// out once the evaluation ends).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub in_flight: Vec<ExampleInFlight>,
}

/// An example of a running evaluation whose run has started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExampleInFlight {
    /// The example's id.
    pub id: String,
    /// Its line in the dataset (1-based, as results lines number it).
    pub line: usize,
    /// The example's run (`{evaluationId}.{line}` is its idempotency key).
    pub run_id: String,
    /// The judge panel's run, once the example's run completed and the
    /// panel was asked (`{evaluationId}.{id}.judges`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_run_id: Option<String>,
}

/// `GET /evaluations`: the tenant's evaluations, newest first, without their results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvaluationList {
    pub evaluations: Vec<EvaluationRecord>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn template() -> Value {
        json!({"objective": "Summarise a note", "inputs": {"kept": "from the template"},
               "outputContract": {"mode": "json_schema", "schema": {"type": "object"}}})
    }

    #[test]
    fn lines_as_objects_or_text_with_an_inline_template() {
        let request = EvaluationRequest::parse(&json!({
            "dataset": [{"id": "a", "inputs": {"given": "x"}}, {"id": "b", "inputs": {}}],
            "template": template(),
        }))
        .unwrap();
        let dataset = request.dataset().unwrap();
        assert_eq!(dataset.examples.len(), 2);
        assert_eq!(dataset.examples[0].envelope["inputs"]["given"], "x");
        assert_eq!(
            dataset.examples[0].envelope["inputs"]["kept"],
            "from the template"
        );
        let text = EvaluationRequest::parse(&json!({
            "dataset": "{\"dataset\": {\"name\": \"n\", \"template\": \"t.json\"}}\n{\"id\": \"a\", \"inputs\": {}}\n",
            "template": template(),
        }))
        .unwrap();
        assert_eq!(text.dataset().unwrap().header.name, "n");
    }

    #[test]
    fn what_is_wrong_is_named_by_its_path() {
        let refused = |body: Value| {
            EvaluationRequest::parse(&body)
                .and_then(|request| request.dataset().map(|_| ()))
                .unwrap_err()
        };
        assert_eq!(refused(json!({"dataset": [], "extra": 1})).path, "$.extra");
        assert_eq!(refused(json!({})).path, "$.dataset");
        assert_eq!(
            refused(json!({"dataset": [], "concurrency": 9})).path,
            "$.concurrency"
        );
        assert_eq!(refused(json!({"dataset": 3})).path, "$.dataset");
        let wrong = refused(
            json!({"dataset": [{"id": "a", "inputs": {}}, {"id": "b", "envelope": {"objective": 3}}], "template": template()}),
        );
        assert_eq!(wrong.path, "$.dataset[1].envelope.objective", "{wrong:?}");
        let no_template = refused(
            json!({"dataset": [{"dataset": {"name": "n", "template": "t.json"}}, {"id": "a", "inputs": {}}]}),
        );
        assert_eq!(
            no_template.path, "$.dataset[0].dataset.template",
            "{no_template:?}"
        );
        assert!(
            no_template.message.contains("a server reads no files"),
            "{no_template:?}"
        );
        let text = refused(json!({"dataset": "{\"id\": \"a\"}\nnot json\n"}));
        assert_eq!(text.path, "$.dataset");
        assert!(text.message.starts_with("line 2: not JSON"), "{text:?}");
        let many: Vec<Value> = (0..101)
            .map(|at| json!({"id": format!("e{at}"), "inputs": {}}))
            .collect();
        let too_many = refused(json!({"dataset": many, "template": template()}));
        assert!(too_many.message.contains("at most 100"), "{too_many:?}");
    }
}
