//! The panel's rounds without I/O: convergence at once, discussion up to
//! `maxDiscussionRounds`, a judge left out of a round, and the transcript
//! the rounds leave (verifiable).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use baton_judge::panel::{JudgeAnswer, JudgeOutcome, Panel, PanelAdvance};
use baton_judge::request::PanelRequest;
use serde_json::json;

fn request(max_rounds: u32, threshold: f64) -> PanelRequest {
    PanelRequest::parse(&json!({
        "request": {"id": "req-1", "content": "A document.", "criteria": ["Accuracy"],
                    "selectedAgents": [{"id": "a"}, {"id": "b"}, {"id": "c"}]},
        "config": {"maxDiscussionRounds": max_rounds, "roundTimeout": 1000,
                   "consensusAlgorithm": "simple_average", "enableDiscussion": true,
                   "convergenceThreshold": threshold, "outlierDetection": false}
    }))
    .unwrap()
}

fn answered(score: f64) -> JudgeOutcome {
    JudgeOutcome::Answered(JudgeAnswer {
        score,
        feedback: format!("scored {score}"),
        strengths: vec!["clear".into()],
        improvements: vec![],
        model: Some(format!("model-{score}")),
    })
}

fn round(panel: &mut Panel, scores: &[(&str, JudgeOutcome)]) -> PanelAdvance {
    let current = panel.round();
    for (judge, outcome) in scores {
        panel.take(judge, current, outcome.clone(), 1_000 + u64::from(current));
    }
    panel.advance(2_000 + u64::from(current))
}

#[test]
fn a_panel_that_already_agrees_stops_after_scoring() {
    let (mut panel, calls) = Panel::start(request(3, 0.5), "topic", 0);
    assert_eq!(calls.len(), 3, "every judge scores independently");
    assert!(calls.iter().all(|call| call.round == 0));
    let done = round(
        &mut panel,
        &[
            ("a", answered(8.0)),
            ("b", answered(8.5)),
            ("c", answered(8.2)),
        ],
    );
    let PanelAdvance::Done(output) = done else {
        panic!("expected the panel to conclude, got {done:?}")
    };
    assert_eq!(output.consensus.convergence_rounds, 0);
    assert!((output.consensus.final_score - (8.0 + 8.5 + 8.2) / 3.0).abs() < 1e-9);
    assert_eq!(output.individual_results.len(), 3);
    assert_eq!(
        output.transcript.verify(),
        Ok(5),
        "opening, three scores, consensus"
    );
}

#[test]
fn a_split_panel_discusses_until_max_rounds() {
    let (mut panel, _) = Panel::start(request(2, 0.5), "topic", 0);
    let first = round(
        &mut panel,
        &[
            ("a", answered(9.0)),
            ("b", answered(3.0)),
            ("c", answered(6.0)),
        ],
    );
    let PanelAdvance::Ask(calls) = first else {
        panic!("expected a discussion round")
    };
    assert!(calls.iter().all(|call| call.round == 1));
    assert!(
        calls[1].user_message.contains("a: 9")
            && calls[1].user_message.contains("Your latest score: 3"),
        "each judge sees the others' scores and reasons: {}",
        calls[1].user_message
    );
    let second = round(
        &mut panel,
        &[
            ("a", answered(9.0)),
            ("b", answered(3.5)),
            ("c", answered(6.0)),
        ],
    );
    assert!(
        matches!(second, PanelAdvance::Ask(_)),
        "still split, a round remains"
    );
    let third = round(
        &mut panel,
        &[
            ("a", answered(8.5)),
            ("b", answered(4.0)),
            ("c", answered(6.0)),
        ],
    );
    let PanelAdvance::Done(output) = third else {
        panic!("expected the panel to stop at maxDiscussionRounds")
    };
    assert_eq!(output.consensus.convergence_rounds, 2);
    assert_eq!(output.transcript.rounds.len(), 3);
    assert!(output.transcript.rounds[0].variance.unwrap() > 0.5);
    assert!(output.transcript.verify().is_ok());
}

#[test]
fn a_judge_that_times_out_is_left_out_of_that_round() {
    let (mut panel, _) = Panel::start(request(1, 0.5), "topic", 0);
    let first = round(
        &mut panel,
        &[
            ("a", answered(9.0)),
            ("b", JudgeOutcome::TimedOut),
            ("c", answered(3.0)),
        ],
    );
    assert!(matches!(first, PanelAdvance::Ask(_)));
    assert!(
        panel.warnings()[0].starts_with("b: round 0"),
        "{:?}",
        panel.warnings()
    );
    let done = round(
        &mut panel,
        &[
            ("a", answered(8.0)),
            ("b", answered(7.0)),
            ("c", JudgeOutcome::Failed("schema".into())),
        ],
    );
    let PanelAdvance::Done(output) = done else {
        panic!("expected the end")
    };
    // c keeps its round-0 score; b's round-1 score counts.
    assert_eq!(output.consensus.individual_scores["c"], 3.0);
    assert_eq!(output.consensus.individual_scores["b"], 7.0);
    assert_eq!(output.warnings.len(), 2);
    // Stale answers (an earlier round's) change nothing.
    let (mut late, _) = Panel::start(request(1, 0.5), "topic", 0);
    late.take("a", 5, answered(1.0), 0);
    assert!(
        matches!(late.advance(0), PanelAdvance::Failed(_)),
        "no judge answered round 0"
    );
}

/// A request that names no criteria is judged on `overall quality`: the
/// transcript's opening says so, and so does every judge's request.
#[test]
fn a_request_without_criteria_is_judged_on_overall_quality() {
    let request = PanelRequest::parse(&json!({
        "request": {"id": "req-2", "content": "A document.",
                    "selectedAgents": [{"id": "a"}, {"id": "b"}]},
        "config": {"maxDiscussionRounds": 1, "roundTimeout": 1000,
                   "consensusAlgorithm": "simple_average", "enableDiscussion": false,
                   "convergenceThreshold": 1.0, "outlierDetection": false}
    }))
    .unwrap();
    assert!(request.request.criteria.is_empty());
    let (panel, calls) = Panel::start(request, "topic", 0);
    let (_, _, opening) = panel.transcript().messages().next().unwrap();
    assert!(
        opening
            .content
            .contains(baton_judge::panel::DEFAULT_CRITERION),
        "{}",
        opening.content
    );
    assert_eq!(calls.len(), 2);
    for call in calls {
        let message: serde_json::Value = serde_json::from_str(&call.user_message).unwrap();
        assert_eq!(
            message["criteria"],
            json!(["overall quality"]),
            "{}",
            call.judge_id
        );
    }
}

/// `enableDiscussion: false`: a panel whose judges disagree far beyond the
/// threshold still concludes after scoring, with no discussion round.
#[test]
fn with_discussion_off_a_split_panel_concludes_after_scoring() {
    let mut body = json!({
        "request": {"id": "req-3", "content": "A document.", "criteria": ["Accuracy"],
                    "selectedAgents": [{"id": "a"}, {"id": "b"}, {"id": "c"}]},
        "config": {"maxDiscussionRounds": 3, "roundTimeout": 1000,
                   "consensusAlgorithm": "simple_average", "enableDiscussion": true,
                   "convergenceThreshold": 0.5, "outlierDetection": false}
    });
    let split = [
        ("a", answered(2.0)),
        ("b", answered(9.0)),
        ("c", answered(5.0)),
    ];
    let (mut discussing, _) = Panel::start(PanelRequest::parse(&body).unwrap(), "topic", 0);
    assert!(
        matches!(round(&mut discussing, &split), PanelAdvance::Ask(_)),
        "with discussion on, the same scores open a discussion round"
    );
    body["config"]["enableDiscussion"] = json!(false);
    let (mut panel, _) = Panel::start(PanelRequest::parse(&body).unwrap(), "topic", 0);
    let PanelAdvance::Done(output) = round(&mut panel, &split) else {
        panic!("with discussion off, the panel concludes after scoring")
    };
    assert_eq!(output.consensus.convergence_rounds, 0);
    assert!((output.consensus.final_score - 16.0 / 3.0).abs() < 1e-9);
    assert!(
        output
            .transcript
            .messages()
            .all(|(_, _, message)| message.phase
                != baton_judge::transcript::MessagePhase::Discussion),
        "no message of the transcript is a discussion"
    );
}
