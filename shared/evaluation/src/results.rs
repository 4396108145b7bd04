//! The results line: one JSON object per example, written by `baton eval`
//! (and `POST /evaluations`) and read back by `compare`. Unknown fields are
//! kept out of the way (ignored on read), so an older file still compares.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One check of one example.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    /// `status`, `contract`, `assertions[0]`, `mentions`, `maxCostUsd`,
    /// `maxDurationMs`, `minJudgeScore`, or a step that failed (`submitted`,
    /// `settled`, `judged`).
    pub check: String,
    pub passed: bool,
    pub detail: String,
}

impl Check {
    pub fn new(check: impl Into<String>, passed: bool, detail: impl Into<String>) -> Self {
        Self {
            check: check.into(),
            passed,
            detail: detail.into(),
        }
    }
}

/// Prompt and completion tokens of the run.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct Tokens {
    pub prompt: u64,
    pub completion: u64,
}

/// What the judge panel made of the example's output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JudgeOutcome {
    /// The panel's consensus score, 0 to 10.
    pub score: f64,
    pub confidence: f64,
    pub variance: f64,
    /// The file holding the panel's whole output (with its hash-chained
    /// transcript), as `baton judge verify` reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript_file: Option<String>,
    /// The last message hash of the transcript (what verification ends on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript_head: Option<String>,
}

/// One example's results line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExampleResult {
    pub id: String,
    /// The dataset line it came from (1-based).
    #[serde(default)]
    pub line: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// Where the run can be seen (the API that ran it), when not the local store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    pub passed: bool,
    /// The run's final status, `None` when it never settled.
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub checks: Vec<Check>,
    #[serde(default)]
    pub cost_usd: Option<f64>,
    #[serde(default)]
    pub tokens: Tokens,
    #[serde(default)]
    pub duration_ms: u64,
    #[serde(default)]
    pub model_by_node: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<JudgeOutcome>,
}

impl ExampleResult {
    /// A line for an example that never reached a settled run.
    pub fn not_run(id: &str, line: usize, run_id: Option<String>, failed: Check) -> Self {
        Self {
            id: id.to_string(),
            line,
            run_id,
            api: None,
            passed: false,
            status: None,
            checks: vec![failed],
            cost_usd: None,
            tokens: Tokens::default(),
            duration_ms: 0,
            model_by_node: BTreeMap::new(),
            judge: None,
        }
    }

    /// The checks that failed, as `check: detail`.
    pub fn failures(&self) -> Vec<String> {
        self.checks
            .iter()
            .filter(|check| !check.passed)
            .map(|check| format!("{}: {}", check.check, check.detail))
            .collect()
    }
}

/// A results line that is not one, with its line number (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadableResults {
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for UnreadableResults {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "line {}: {}", self.line, self.message)
    }
}

/// Reads a results file (blank lines skipped); two lines with one example
/// id are refused, since a comparison pairs by id.
pub fn parse_results(text: &str) -> Result<Vec<ExampleResult>, UnreadableResults> {
    let mut results: Vec<ExampleResult> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let result: ExampleResult =
            serde_json::from_str(line).map_err(|error| UnreadableResults {
                line: index + 1,
                message: format!("not a results line: {error}"),
            })?;
        if results.iter().any(|seen| seen.id == result.id) {
            return Err(UnreadableResults {
                line: index + 1,
                message: format!("$.id: example `{}` appears twice", result.id),
            });
        }
        results.push(result);
    }
    Ok(results)
}

/// The results as a file's text: one line each, newline-terminated.
pub fn results_text(results: &[ExampleResult]) -> String {
    results
        .iter()
        .map(|result| serde_json::to_string(result).unwrap_or_default() + "\n")
        .collect()
}

/// A completed example for the crate's tests: one `assertions[0]` check
/// (passed or failing with `detail`), run `run_{id}`, 100 ms.
#[cfg(test)]
pub(crate) fn completed_example(
    id: &str,
    passed: bool,
    score: Option<f64>,
    cost: Option<f64>,
    detail: &str,
) -> ExampleResult {
    let mut result = ExampleResult::not_run(
        id,
        1,
        Some(format!("run_{id}")),
        Check::new("assertions[0]", passed, detail),
    );
    result.passed = passed;
    result.status = Some("completed".into());
    result.duration_ms = 100;
    result.cost_usd = cost;
    result.judge = score.map(|score| JudgeOutcome {
        score,
        confidence: 1.0,
        variance: 0.0,
        transcript_file: None,
        transcript_head: None,
    });
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_round_trips_and_a_repeated_id_is_refused() {
        let result = ExampleResult::not_run("a", 2, None, Check::new("settled", false, "late"));
        let text = results_text(std::slice::from_ref(&result));
        assert_eq!(parse_results(&text).unwrap(), vec![result]);
        let twice = format!("{text}\n{text}");
        let refused = parse_results(&twice).unwrap_err();
        assert_eq!(refused.line, 3);
        assert!(refused.message.contains("`a` appears twice"), "{refused}");
        assert_eq!(parse_results("{\"id\": 1}").unwrap_err().line, 1);
    }
}
