//! An example's checks over its settled run, and the judge panel request
//! for its output.

use baton_core::contracts::dataset::Expectations;
use serde_json::Value;

use crate::results::Check;

/// What the checks need of a settled run.
#[derive(Debug, Clone, PartialEq)]
pub struct SettledRun {
    /// The run's final status (`completed`, `failed`, …).
    pub status: String,
    /// Its output (`null` when it has none).
    pub output: Value,
    pub cost_usd: Option<f64>,
    pub duration_ms: u64,
}

/// The deterministic checks, in a fixed order: status, contract (a
/// completed run's output met its contract: the engine completes no run
/// whose output does not), each assertion, each mention, cost, duration.
pub fn deterministic_checks(expect: &Expectations, run: &SettledRun) -> Vec<Check> {
    let mut checks = Vec::new();
    let wanted = expect.status.as_deref().unwrap_or("completed");
    checks.push(Check::new(
        "status",
        run.status == wanted,
        format!("{}, expected {wanted}", run.status),
    ));
    if run.status == "completed" {
        checks.push(Check::new(
            "contract",
            true,
            "the output met the envelope's output contract",
        ));
    }
    for (index, assertion) in expect.assertions.iter().enumerate() {
        let held = baton_core::basics::logic::evaluate(assertion, &run.output);
        checks.push(Check::new(
            format!("assertions[{index}]"),
            held == Ok(true),
            match held {
                Ok(true) => "holds".to_string(),
                Ok(false) => format!("does not hold: {assertion}"),
                Err(error) => format!("cannot be evaluated: {error}"),
            },
        ));
    }
    let text = run.output.to_string().to_lowercase();
    for (index, fact) in expect.mentions.iter().enumerate() {
        checks.push(Check::new(
            format!("mentions[{index}]"),
            text.contains(&fact.to_lowercase()),
            format!("`{fact}`"),
        ));
    }
    if let Some(bound) = expect.max_cost_usd {
        checks.push(match run.cost_usd {
            Some(spent) => Check::new(
                "maxCostUsd",
                spent <= bound,
                format!("${spent:.6} of ${bound}"),
            ),
            None => Check::new("maxCostUsd", true, "no priced model call"),
        });
    }
    if let Some(bound) = expect.max_duration_ms {
        checks.push(Check::new(
            "maxDurationMs",
            run.duration_ms <= bound,
            format!("{} ms of {bound} ms", run.duration_ms),
        ));
    }
    checks
}

/// Why a judge panel gave an example no outcome.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JudgeFailure {
    /// The panel file has no `request` object.
    #[error("$.request: the judge panel file has no `request` object")]
    NoRequestObject,
    /// The request made for the example is not a valid panel request.
    #[error("{0}")]
    InvalidRequest(String),
    /// The panel concluded without a verdict.
    #[error("the judge panel reached no consensus: {0}")]
    NoConsensus(String),
    /// The panel's output could not be written as its transcript.
    #[error("the panel's output could not be written: {0}")]
    Unwritable(String),
    /// The transcript could not be kept where results are kept.
    #[error("the panel's transcript was not kept: {0}")]
    TranscriptNotKept(String),
}

/// Why an example has no judge score.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unjudged {
    /// The dataset and the command line name no panel.
    #[error("no judge panel: name one in the dataset's `judges` or with --judges")]
    NoPanel,
    /// The run did not complete (its status).
    #[error("not judged: the run ended {0}")]
    RunEnded(String),
    /// The panel was asked and failed.
    #[error(transparent)]
    Failed(#[from] JudgeFailure),
}

/// The judge check: the panel's score against `minJudgeScore`. `None` when
/// the example sets no minimum; a minimum with no score (no panel named,
/// or the panel failed) fails, saying why.
pub fn judge_check(expect: &Expectations, score: Result<f64, &Unjudged>) -> Option<Check> {
    let minimum = expect.min_judge_score?;
    Some(match score {
        Ok(score) => Check::new(
            "minJudgeScore",
            score >= minimum,
            format!("{score:.2} of at least {minimum}"),
        ),
        Err(reason) => Check::new("minJudgeScore", false, reason.to_string()),
    })
}

/// The judge panel request for one example: the panel template (a panel
/// request file: `request` with criteria and judges, `config`) with
/// `request.id` set to the example's id and `request.content` to what the
/// judges read: the objective, the output and the reference answer when
/// the example has one. Refused (naming the JSON path) when the template
/// is not an object with a `request` object.
pub fn judge_request_for(
    template: &Value,
    example_id: &str,
    objective: &str,
    output: &Value,
    reference: Option<&Value>,
) -> Result<Value, JudgeFailure> {
    let mut request = template.clone();
    let Some(inner) = request.get_mut("request").and_then(Value::as_object_mut) else {
        return Err(JudgeFailure::NoRequestObject);
    };
    let mut content = format!(
        "Objective: {objective}\n\nOutput to judge:\n{}",
        serde_json::to_string_pretty(output).unwrap_or_default()
    );
    if let Some(reference) = reference {
        content.push_str(&format!(
            "\n\nReference answer (what a good output looks like):\n{}",
            serde_json::to_string_pretty(reference).unwrap_or_default()
        ));
    }
    inner.insert("id".into(), Value::String(example_id.to_string()));
    inner.insert("content".into(), Value::String(content));
    Ok(request)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn expectations(value: Value) -> Expectations {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn every_deterministic_check_runs_in_order_and_can_fail() {
        let expect = expectations(json!({
            "assertions": [{"==": [{"var": "n"}, 2]}, {"==": [{"var": "n"}, 3]}],
            "mentions": ["Harbour", "Paris"],
            "maxCostUsd": 0.01,
            "maxDurationMs": 1000
        }));
        let run = SettledRun {
            status: "completed".into(),
            output: json!({"n": 2, "text": "a walk by the harbour"}),
            cost_usd: Some(0.02),
            duration_ms: 900,
        };
        let checks = deterministic_checks(&expect, &run);
        let outcome: Vec<(&str, bool)> = checks
            .iter()
            .map(|check| (check.check.as_str(), check.passed))
            .collect();
        assert_eq!(
            outcome,
            vec![
                ("status", true),
                ("contract", true),
                ("assertions[0]", true),
                ("assertions[1]", false),
                ("mentions[0]", true),
                ("mentions[1]", false),
                ("maxCostUsd", false),
                ("maxDurationMs", true),
            ]
        );
        let failed = SettledRun {
            status: "failed".into(),
            ..run
        };
        let checks = deterministic_checks(&Expectations::default(), &failed);
        assert_eq!(checks.len(), 1, "no contract check for a run that failed");
        assert!(!checks[0].passed);
        assert_eq!(checks[0].detail, "failed, expected completed");
    }

    #[test]
    fn a_judge_minimum_without_a_score_fails_saying_why() {
        let expect = expectations(json!({"minJudgeScore": 7}));
        assert!(judge_check(&expect, Ok(7.0)).unwrap().passed);
        assert!(!judge_check(&expect, Ok(6.9)).unwrap().passed);
        let missing = judge_check(&expect, Err(&Unjudged::NoPanel)).unwrap();
        assert!(!missing.passed);
        assert_eq!(
            missing.detail,
            "no judge panel: name one in the dataset's `judges` or with --judges"
        );
        assert_eq!(judge_check(&Expectations::default(), Ok(1.0)), None);
    }

    #[test]
    fn the_judges_read_the_objective_the_output_and_the_reference() {
        let template = json!({"request": {"id": "x", "content": "", "criteria": ["clarity"], "selectedAgents": []}, "config": {}});
        let request = judge_request_for(
            &template,
            "example-1",
            "Summarise the note",
            &json!({"title": "Short"}),
            Some(&json!({"title": "Shorter still"})),
        )
        .unwrap();
        assert_eq!(request["request"]["id"], "example-1");
        let content = request["request"]["content"].as_str().unwrap();
        assert!(content.starts_with("Objective: Summarise the note"));
        assert!(content.contains("Short") && content.contains("Shorter still"));
        assert_eq!(request["request"]["criteria"], json!(["clarity"]));
        let refused = judge_request_for(&json!({}), "a", "o", &json!(null), None).unwrap_err();
        assert_eq!(refused, JudgeFailure::NoRequestObject);
        assert!(refused.to_string().starts_with("$.request"), "{refused}");
    }
}
