//! The diagnostics merger on the specification's own payloads
//! (§5.9.4, copied verbatim below): dedupe key, severity dominance with
//! merged suggestions, stable ordering, bundle status and satisfaction score.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use baton_core::contracts::contract::ConstraintLevel;
use baton_core::contracts::diagnostics::{
    ConstraintOutcome, DiagnosticsBundle, PlanDiagnostic, PlanStatus, merge_diagnostics,
};
use serde_json::{Value, json};

/// The specification's worked example, verbatim.
fn seed_bundle() -> Value {
    json!({
      "status": "rejected",
      "satisfactionScore": 0.0,
      "failures": [
        {
          "severity": "hard",
          "status": "unsatisfied",
          "constraint": "qaFindings.overallScore >= 0.8",
          "constraintId": "min_qa",
          "cause": "missing_producer",
          "nodeId": "publish-1",
          "capabilityId": "QualityAssuranceAgent.contentReview",
          "suggestion": "Insert QualityAssuranceAgent.contentReview before Publish."
        }
      ],
      "warnings": [
        {
          "severity": "soft",
          "status": "unsatisfied",
          "constraint": "copyVariants.length == 2",
          "constraintId": "exact_two",
          "cause": "unsatisfied_soft",
          "suggestion": "Expand branch node to produce exactly 2 variants."
        }
      ],
      "infos": [
        {
          "severity": "informational",
          "status": "unknown",
          "constraint": "toneOfVoice documented",
          "constraintId": "tone_hint",
          "cause": "advisory",
          "details": { "note": "Planner may prefer 'professional' for B2B." }
        }
      ]
    })
}

fn seed_diagnostic(bucket: &str) -> PlanDiagnostic {
    serde_json::from_value(seed_bundle()[bucket][0].clone()).unwrap()
}

fn hard_failure() -> PlanDiagnostic {
    seed_diagnostic("failures")
}
fn soft_warning() -> PlanDiagnostic {
    seed_diagnostic("warnings")
}
fn advisory_info() -> PlanDiagnostic {
    seed_diagnostic("infos")
}

fn outcome(level: ConstraintLevel, satisfiable: bool) -> ConstraintOutcome {
    ConstraintOutcome { level, satisfiable }
}

#[test]
fn the_seed_payload_is_reproduced_field_for_field() {
    // Shuffled and duplicated input; the constraints behind it: min_qa (hard)
    // and exact_two (soft) unsatisfiable, tone_hint informational.
    let bundle = merge_diagnostics(
        vec![
            advisory_info(),
            soft_warning(),
            hard_failure(),
            soft_warning(),
            advisory_info(),
        ],
        &[
            outcome(ConstraintLevel::Hard, false),
            outcome(ConstraintLevel::Soft, false),
            outcome(ConstraintLevel::Informational, false),
        ],
    );
    assert_eq!(serde_json::to_value(&bundle).unwrap(), seed_bundle());
    let parsed: DiagnosticsBundle = serde_json::from_value(seed_bundle()).unwrap();
    assert_eq!(parsed, bundle);
}

#[test]
fn severity_dominance_keeps_the_highest_and_merges_unique_suggestions() {
    // Same dedupe key (exact_two, *, unsatisfied_soft) reported soft and hard.
    let mut as_hard = soft_warning();
    as_hard.severity = ConstraintLevel::Hard;
    as_hard.suggestion = Some("Add a join node after the branches.".into());
    let bundle = merge_diagnostics(vec![soft_warning(), as_hard, soft_warning()], &[]);
    assert_eq!(bundle.warnings, vec![]);
    assert_eq!(bundle.failures.len(), 1);
    assert_eq!(
        bundle.failures[0].suggestion.as_deref(),
        Some(
            "Expand branch node to produce exactly 2 variants.\nAdd a join node after the branches."
        )
    );
    assert_eq!(bundle.status, PlanStatus::Rejected);
}

#[test]
fn the_dedupe_key_is_constraint_node_and_cause() {
    let on_other_node = {
        let mut diagnostic = hard_failure();
        diagnostic.node_id = Some("publish-2".into());
        diagnostic
    };
    let other_cause = {
        let mut diagnostic = hard_failure();
        diagnostic.cause = serde_json::from_value(json!("missing_enforcer")).unwrap();
        diagnostic
    };
    // Without a constraintId the constraint text's hash stands in for it.
    let unnamed = |text: &str| {
        let mut diagnostic = soft_warning();
        diagnostic.constraint_id = None;
        diagnostic.constraint = Some(text.into());
        diagnostic
    };
    let table: Vec<(Vec<PlanDiagnostic>, usize)> = vec![
        (vec![hard_failure(), hard_failure()], 1),
        (vec![hard_failure(), on_other_node], 2),
        (vec![hard_failure(), other_cause], 2),
        (vec![unnamed("a == 1"), unnamed("a == 1")], 1),
        (vec![unnamed("a == 1"), unnamed("a == 2")], 2),
    ];
    for (diagnostics, expected) in table {
        let bundle = merge_diagnostics(diagnostics.clone(), &[]);
        let merged = bundle.failures.len() + bundle.warnings.len() + bundle.infos.len();
        assert_eq!(merged, expected, "{diagnostics:?}");
    }
}

#[test]
fn ordering_is_severity_then_constraint_id_then_node_id() {
    let hard = |constraint_id: &str, node_id: Option<&str>| {
        let mut diagnostic = hard_failure();
        diagnostic.constraint_id = Some(constraint_id.into());
        diagnostic.node_id = node_id.map(str::to_string);
        diagnostic
    };
    let bundle = merge_diagnostics(
        vec![
            advisory_info(),
            hard("min_qa", Some("publish-2")),
            soft_warning(),
            hard("b_rule", None),
            hard("min_qa", Some("publish-1")),
            hard("a_rule", Some("z")),
        ],
        &[],
    );
    let order: Vec<(Option<&str>, Option<&str>)> = bundle
        .failures
        .iter()
        .map(|d| (d.constraint_id.as_deref(), d.node_id.as_deref()))
        .collect();
    assert_eq!(
        order,
        vec![
            (Some("a_rule"), Some("z")),
            (Some("b_rule"), None),
            (Some("min_qa"), Some("publish-1")),
            (Some("min_qa"), Some("publish-2")),
        ]
    );
    assert_eq!(
        bundle.warnings[0].constraint_id.as_deref(),
        Some("exact_two")
    );
    assert_eq!(bundle.infos[0].constraint_id.as_deref(), Some("tone_hint"));
}

#[test]
fn status_table() {
    let satisfied_soft = {
        let mut diagnostic = soft_warning();
        diagnostic.status = serde_json::from_value(json!("satisfied")).unwrap();
        diagnostic
    };
    let satisfied_hard = {
        let mut diagnostic = hard_failure();
        diagnostic.status = serde_json::from_value(json!("satisfied")).unwrap();
        diagnostic
    };
    let table: Vec<(Vec<PlanDiagnostic>, PlanStatus)> = vec![
        (vec![], PlanStatus::Accepted),
        (vec![hard_failure()], PlanStatus::Rejected),
        (
            vec![hard_failure(), soft_warning(), advisory_info()],
            PlanStatus::Rejected,
        ),
        (vec![soft_warning()], PlanStatus::AcceptedWithFindings),
        (vec![advisory_info()], PlanStatus::AcceptedWithFindings),
        (vec![satisfied_soft], PlanStatus::Accepted),
        (vec![satisfied_hard], PlanStatus::Accepted),
    ];
    for (diagnostics, status) in table {
        assert_eq!(
            merge_diagnostics(diagnostics.clone(), &[]).status,
            status,
            "{diagnostics:?}"
        );
    }
}

#[test]
fn satisfaction_score_table() {
    use ConstraintLevel::{Hard, Informational, Soft};
    let table: Vec<(Vec<ConstraintOutcome>, f64)> = vec![
        (vec![], 1.0),
        (vec![outcome(Hard, true)], 1.0),
        (vec![outcome(Hard, false)], 0.0),
        // (1.0·1 + 0.5·0) / 1.5
        (vec![outcome(Hard, true), outcome(Soft, false)], 1.0 / 1.5),
        // (1.0·0 + 0.5·1) / 1.5
        (vec![outcome(Hard, false), outcome(Soft, true)], 0.5 / 1.5),
        (vec![outcome(Soft, false), outcome(Soft, true)], 0.5),
        // Informational constraints are not scored.
        (vec![outcome(Informational, false)], 1.0),
        (
            vec![outcome(Hard, true), outcome(Informational, false)],
            1.0,
        ),
    ];
    for (outcomes, expected) in table {
        let score = merge_diagnostics(vec![], &outcomes).satisfaction_score;
        assert!(
            (score - expected).abs() < 1e-12,
            "{outcomes:?}: {score} ≠ {expected}"
        );
    }
}
