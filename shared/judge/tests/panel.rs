//! Consensus on a fixed score table (9, 8, 8.5, 2), with and without the
//! outlier rule, with explicit and reputation weights; convergence; the
//! transcript's hash chain, verified, then broken by one byte; requests
//! refused with their JSON path. Expected values are computed here from the
//! documented formulas, not by the code under test.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use baton_judge::consensus::{
    ConsensusAlgorithm, JudgeScore, consensus, needs_discussion, outliers,
};
use baton_judge::request::PanelRequest;
use baton_judge::transcript::{
    ConversationMessage, EvaluationTranscript, MessagePhase, MessageRole,
};
use serde_json::json;

fn table() -> Vec<JudgeScore> {
    vec![
        JudgeScore::plain("a", 9.0),
        JudgeScore::plain("b", 8.0),
        JudgeScore::plain("c", 8.5),
        JudgeScore::plain("d", 2.0),
    ]
}

fn close(actual: f64, expected: f64) {
    assert!(
        (actual - expected).abs() < 1e-9,
        "{actual} differs from {expected}"
    );
}

#[test]
fn the_three_algorithms_without_outlier_detection() {
    let simple = consensus(&table(), ConsensusAlgorithm::SimpleAverage, false, 0).unwrap();
    close(simple.final_score, (9.0 + 8.0 + 8.5 + 2.0) / 4.0);
    let mean = 27.5 / 4.0;
    let expected_variance = [9.0f64, 8.0, 8.5, 2.0]
        .iter()
        .map(|score| (score - mean).powi(2))
        .sum::<f64>()
        / 4.0;
    close(simple.variance, expected_variance);
    close(
        simple.confidence,
        (1.0 - (expected_variance.sqrt() / 5.0).min(1.0)) * 4.0 / 5.0,
    );
    assert!(simple.excluded_outliers.is_empty());
    let median = consensus(&table(), ConsensusAlgorithm::Median, false, 0).unwrap();
    close(median.final_score, (8.0 + 8.5) / 2.0);

    let mut explicit = table();
    explicit[0].explicit_weight = Some(2.0);
    for judge in &mut explicit[1..] {
        judge.explicit_weight = Some(1.0);
    }
    let weighted = consensus(&explicit, ConsensusAlgorithm::WeightedAverage, false, 0).unwrap();
    close(weighted.final_score, (2.0 * 9.0 + 8.0 + 8.5 + 2.0) / 5.0);
    let weights = weighted.weights.unwrap();
    close(weights["a"], 0.4);
    close(weights.values().sum(), 1.0);
}

#[test]
fn reputation_weights_follow_the_stated_formula() {
    let mut judges = table();
    judges[0].average_rating = Some(9.0);
    judges[0].success_rate = Some(0.9);
    judges[1].average_rating = Some(8.0);
    judges[1].success_rate = Some(1.0);
    // c has no reputation: 0.5.
    judges[3].average_rating = Some(2.0);
    judges[3].success_rate = Some(0.5);
    let raw = [0.9 * 0.9, 0.8 * 1.0, 0.5, 0.2 * 0.5];
    let scores = [9.0, 8.0, 8.5, 2.0];
    let expected =
        raw.iter().zip(scores).map(|(w, s)| w * s).sum::<f64>() / raw.iter().sum::<f64>();
    let weighted = consensus(&judges, ConsensusAlgorithm::WeightedAverage, false, 0).unwrap();
    close(weighted.final_score, expected);
}

#[test]
fn the_outlier_rule_leaves_out_the_far_judge_only() {
    // median 8.25; absolute deviations 0.75, 0.25, 0.25, 6.25 → MAD 0.5;
    // z(d) = 0.6745 × 6.25 / 0.5 ≈ 8.43 > 3.5; z(a) ≈ 1.01.
    assert_eq!(outliers(&table()), vec!["d".to_string()]);
    let simple = consensus(&table(), ConsensusAlgorithm::SimpleAverage, true, 1).unwrap();
    close(simple.final_score, (9.0 + 8.0 + 8.5) / 3.0);
    assert_eq!(simple.excluded_outliers, vec!["d".to_string()]);
    assert_eq!(
        simple.individual_scores.len(),
        4,
        "the outlier's score stays listed"
    );
    let variance = (0.25 + 0.25 + 0.0) / 3.0;
    close(simple.variance, variance);
    close(simple.confidence, (1.0 - variance.sqrt() / 5.0) * 3.0 / 4.0);
    assert_eq!(simple.convergence_rounds, 1);
    let median = consensus(&table(), ConsensusAlgorithm::Median, true, 1).unwrap();
    close(median.final_score, 8.5);
    let mut explicit = table();
    explicit[0].explicit_weight = Some(2.0);
    for judge in &mut explicit[1..] {
        judge.explicit_weight = Some(1.0);
    }
    let weighted = consensus(&explicit, ConsensusAlgorithm::WeightedAverage, true, 1).unwrap();
    close(weighted.final_score, (2.0 * 9.0 + 8.0 + 8.5) / 4.0);
    // With most judges in exact agreement (MAD 0) the mean deviation stands
    // in: 8, 8, 8, 8, 1 → meanAD 7/5, z(e) = 7 / (1.253314 × 1.4) ≈ 3.99 > 3.5;
    // 8, 8, 8, 3 → meanAD 5/4, z(d) = 5 / (1.253314 × 1.25) ≈ 3.19: kept.
    let agreeing: Vec<JudgeScore> = [("a", 8.0), ("b", 8.0), ("c", 8.0), ("d", 8.0), ("e", 1.0)]
        .iter()
        .map(|(id, score)| JudgeScore::plain(id, *score))
        .collect();
    assert_eq!(outliers(&agreeing), vec!["e".to_string()]);
    assert!(
        outliers(
            &agreeing[1..4]
                .iter()
                .cloned()
                .chain([JudgeScore::plain("d", 3.0)])
                .collect::<Vec<_>>()
        )
        .is_empty()
    );
    // Two judges are never reduced further.
    assert!(outliers(&table()[..2]).is_empty());
}

#[test]
fn scores_off_the_scale_are_refused_not_clamped() {
    let mut judges = table();
    judges[2].score = 11.0;
    assert!(consensus(&judges, ConsensusAlgorithm::SimpleAverage, false, 0).is_err());
    judges[2].score = f64::NAN;
    assert!(consensus(&judges, ConsensusAlgorithm::Median, false, 0).is_err());
    assert!(consensus(&[], ConsensusAlgorithm::Median, false, 0).is_err());
}

#[test]
fn discussion_goes_on_while_the_variance_is_above_the_threshold_and_rounds_remain() {
    let agreeing = [8.0, 8.5, 8.2];
    assert!(!needs_discussion(&agreeing, 0.5, 0, 3), "converged at once");
    let split = [9.0, 3.0, 6.0];
    assert!(needs_discussion(&split, 0.5, 0, 3));
    assert!(needs_discussion(&split, 0.5, 2, 3));
    assert!(
        !needs_discussion(&split, 0.5, 3, 3),
        "stops at maxDiscussionRounds"
    );
}

fn message(
    id: &str,
    agent: &str,
    content: &str,
    phase: MessagePhase,
    round: u32,
) -> ConversationMessage {
    ConversationMessage {
        id: id.into(),
        role: MessageRole::Agent,
        agent_id: Some(agent.into()),
        model: None,
        content: content.into(),
        timestamp: 1_730_050_000_000 + u64::from(round),
        phase,
        round: Some(round),
        ledger_tx_id: None,
        previous_hash: String::new(),
        hash: String::new(),
    }
}

#[test]
fn the_transcript_is_a_hash_chain_and_one_changed_byte_is_found() {
    let mut transcript = EvaluationTranscript::new("run_1");
    transcript.append(
        0,
        message("m1", "a", "score 9: precise", MessagePhase::Scoring, 0),
    );
    transcript.append(
        0,
        message("m2", "b", "score 8: clear", MessagePhase::Scoring, 0),
    );
    transcript.append(
        1,
        message("m3", "b", "revised to 8.5", MessagePhase::Discussion, 1),
    );
    transcript.append(
        1,
        message("m4", "a", "keeping 9", MessagePhase::Discussion, 1),
    );
    assert_eq!(transcript.verify(), Ok(4));
    let first = &transcript.rounds[0].messages[0];
    assert_eq!(first.previous_hash, "");
    assert_eq!(first.hash.len(), 64);
    assert_eq!(transcript.rounds[0].messages[1].previous_hash, first.hash);

    // Round trip through JSON keeps it verifiable.
    let stored = serde_json::to_string(&transcript).unwrap();
    let loaded: EvaluationTranscript = serde_json::from_str(&stored).unwrap();
    assert_eq!(loaded.verify(), Ok(4));

    // One byte of the third message's content changed.
    let mut tampered = loaded.clone();
    tampered.rounds[1].messages[0].content = "revised to 8.6".into();
    let broken = tampered.verify().unwrap_err();
    assert_eq!((broken.round, broken.index), (1, 0));
    assert_eq!(broken.message_id, "m3");
    // A message taken out breaks the next link.
    let mut cut = loaded;
    cut.rounds[0].messages.remove(1);
    assert_eq!(cut.verify().unwrap_err().message_id, "m3");
}

fn request() -> serde_json::Value {
    json!({
        "request": {
            "id": "req-001",
            "content": "Paste your prompt or document here...",
            "criteria": ["Accuracy", "Clarity"],
            "selectedAgents": [
                {"id": "agent-1", "name": "GrammarExpert",
                 "hederaAccount": {"accountId": "0.0.12345"},
                 "paymentConfig": {"enabled": true, "pricePerJudgment": 0.5},
                 "reputation": {"totalReviews": 10, "averageRating": 8.9, "successRate": 0.95},
                 "capabilities": {"modelName": "gpt-4o", "systemPrompt": "You are a grammar expert."}},
                {"id": "agent-2", "name": "Skeptic"}
            ],
            "requestedBy": "user-abc",
            "createdAt": 1730050000000u64,
            "status": "pending"
        },
        "config": {"maxDiscussionRounds": 3, "roundTimeout": 60000, "consensusAlgorithm": "weighted_average",
                   "enableDiscussion": true, "convergenceThreshold": 0.5, "outlierDetection": true}
    })
}

#[test]
fn panel_requests_parse_and_bad_ones_name_their_path() {
    let parsed = PanelRequest::parse(&request()).unwrap();
    let weighted = parsed.judge_score("agent-1", 9.0);
    close(weighted.raw_weight(), 0.89 * 0.95);
    close(parsed.judge_score("agent-2", 7.0).raw_weight(), 0.5);
    for (change, path) in [
        (
            json!({"request": {"selectedAgents": []}}),
            "$.request.selectedAgents",
        ),
        (
            json!({"config": {"roundTimeout": 0}}),
            "$.config.roundTimeout",
        ),
        (
            json!({"config": {"maxDiscussionRounds": 50}}),
            "$.config.maxDiscussionRounds",
        ),
        (json!({"weights": {"nobody": 1.0}}), "$.weights.nobody"),
    ] {
        let mut body = request();
        merge(&mut body, &change);
        let error = PanelRequest::parse(&body).unwrap_err();
        assert_eq!(error.path, path, "{error}");
    }
    // A panel past the cap is refused when asked for, not when stored.
    let mut crowded = request();
    crowded["request"]["selectedAgents"] = json!(
        (0..=baton_judge::request::MAX_JUDGES)
            .map(|index| json!({"id": format!("judge-{index}")}))
            .collect::<Vec<_>>()
    );
    let refused = PanelRequest::parse(&crowded).unwrap_err();
    assert_eq!(refused.path, "$.request.selectedAgents");
    assert!(refused.message.contains("at most 50"), "{refused}");
    let mut twice = request();
    twice["request"]["selectedAgents"][1]["id"] = json!("agent-1");
    assert_eq!(
        PanelRequest::parse(&twice).unwrap_err().path,
        "$.request.selectedAgents[1].id"
    );
}

/// JSON merge patch (RFC 7386) for the test's variations.
fn merge(target: &mut serde_json::Value, patch: &serde_json::Value) {
    match (target, patch) {
        (serde_json::Value::Object(target), serde_json::Value::Object(patch)) => {
            for (key, value) in patch {
                merge(
                    target.entry(key.clone()).or_insert(serde_json::Value::Null),
                    value,
                );
            }
        }
        (target, patch) => *target = patch.clone(),
    }
}
