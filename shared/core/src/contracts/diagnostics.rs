//! Plan diagnostics and the specified merge algorithm: dedupe
//! by `(constraintId || hash(constraint), nodeId || '*', cause)`, severity
//! dominance with merged suggestions, stable ordering, bundle status and the
//! weighted satisfaction score.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::contracts::contract::ConstraintLevel;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DiagnosticStatus {
    Unsatisfied,
    Satisfied,
    Unknown,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum DiagnosticCause {
    MissingProducer,
    MissingEnforcer,
    SchemaIncompatible,
    UnsatisfiedSoft,
    Advisory,
}

impl DiagnosticCause {
    fn as_str(self) -> &'static str {
        match self {
            DiagnosticCause::MissingProducer => "missing_producer",
            DiagnosticCause::MissingEnforcer => "missing_enforcer",
            DiagnosticCause::SchemaIncompatible => "schema_incompatible",
            DiagnosticCause::UnsatisfiedSoft => "unsatisfied_soft",
            DiagnosticCause::Advisory => "advisory",
        }
    }
}

/// One finding about a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanDiagnostic {
    pub severity: ConstraintLevel,
    pub status: DiagnosticStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraint_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability_id: Option<String>,
    pub cause: DiagnosticCause,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggestion: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Map<String, Value>>,
}

impl PlanDiagnostic {
    /// A hard, unsatisfied diagnostic: blocks the plan.
    pub fn hard(
        constraint_id: impl Into<String>,
        cause: DiagnosticCause,
        constraint: impl Into<String>,
    ) -> Self {
        PlanDiagnostic {
            severity: ConstraintLevel::Hard,
            status: DiagnosticStatus::Unsatisfied,
            constraint: Some(constraint.into()),
            constraint_id: Some(constraint_id.into()),
            node_id: None,
            capability_id: None,
            cause,
            suggestion: None,
            details: None,
        }
    }

    /// An informational `advisory` finding: reported, never blocking.
    pub fn advisory(constraint_id: impl Into<String>, constraint: impl Into<String>) -> Self {
        PlanDiagnostic {
            severity: ConstraintLevel::Informational,
            status: DiagnosticStatus::Unknown,
            ..PlanDiagnostic::hard(constraint_id, DiagnosticCause::Advisory, constraint)
        }
    }

    /// A hard `schema_incompatible` finding about the plan's structure.
    pub fn structural(constraint_id: &str, constraint: &str, suggestion: String) -> Self {
        PlanDiagnostic::hard(
            constraint_id,
            DiagnosticCause::SchemaIncompatible,
            constraint,
        )
        .with_suggestion(suggestion)
    }

    pub fn with_node(mut self, node_id: impl Into<String>) -> Self {
        self.node_id = Some(node_id.into());
        self
    }

    pub fn with_capability(mut self, capability_id: impl Into<String>) -> Self {
        self.capability_id = Some(capability_id.into());
        self
    }

    pub fn with_suggestion(mut self, suggestion: impl Into<String>) -> Self {
        self.suggestion = Some(suggestion.into());
        self
    }

    fn dedupe_key(&self) -> (String, String, &'static str) {
        let constraint_key = match (&self.constraint_id, &self.constraint) {
            (Some(id), _) => id.clone(),
            (None, Some(constraint)) => format!("{:x}", Sha256::digest(constraint.as_bytes())),
            (None, None) => String::new(),
        };
        let node_key = self.node_id.clone().unwrap_or_else(|| "*".to_string());
        (constraint_key, node_key, self.cause.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    Accepted,
    AcceptedWithFindings,
    Rejected,
}

/// The merged, bucketed result of validating a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiagnosticsBundle {
    pub status: PlanStatus,
    pub satisfaction_score: f64,
    pub failures: Vec<PlanDiagnostic>,
    pub warnings: Vec<PlanDiagnostic>,
    pub infos: Vec<PlanDiagnostic>,
}

impl DiagnosticsBundle {
    /// A plan with nothing to report (a chat run's one-node plan).
    pub fn satisfied() -> Self {
        DiagnosticsBundle {
            status: PlanStatus::Accepted,
            satisfaction_score: 1.0,
            failures: Vec::new(),
            warnings: Vec::new(),
            infos: Vec::new(),
        }
    }
}

/// Per-constraint satisfiability, for the score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConstraintOutcome {
    pub level: ConstraintLevel,
    pub satisfiable: bool,
}

pub const HARD_WEIGHT: f64 = 1.0;
pub const SOFT_WEIGHT: f64 = 0.5;

/// `(Σ w_i s_i) / (Σ w_i)` over hard and soft constraints; 1.0 when there are none.
pub fn satisfaction_score(outcomes: &[ConstraintOutcome]) -> f64 {
    let mut weighted = 0.0;
    let mut total = 0.0;
    for outcome in outcomes {
        let weight = match outcome.level {
            ConstraintLevel::Hard => HARD_WEIGHT,
            ConstraintLevel::Soft => SOFT_WEIGHT,
            ConstraintLevel::Informational => continue,
        };
        total += weight;
        if outcome.satisfiable {
            weighted += weight;
        }
    }
    if total == 0.0 { 1.0 } else { weighted / total }
}

/// Dedupes, applies severity dominance, orders, buckets and scores.
pub fn merge_diagnostics(
    diagnostics: Vec<PlanDiagnostic>,
    outcomes: &[ConstraintOutcome],
) -> DiagnosticsBundle {
    let mut merged: BTreeMap<(String, String, &'static str), PlanDiagnostic> = BTreeMap::new();
    for diagnostic in diagnostics {
        let key = diagnostic.dedupe_key();
        match merged.get_mut(&key) {
            None => {
                merged.insert(key, diagnostic);
            }
            Some(existing) => {
                let suggestions = merge_suggestions(
                    existing.suggestion.as_deref(),
                    diagnostic.suggestion.as_deref(),
                );
                if diagnostic.severity < existing.severity {
                    *existing = diagnostic;
                }
                existing.suggestion = suggestions;
            }
        }
    }
    let mut ordered: Vec<PlanDiagnostic> = merged.into_values().collect();
    ordered.sort_by(|a, b| {
        a.severity
            .cmp(&b.severity)
            .then_with(|| a.constraint_id.cmp(&b.constraint_id))
            .then_with(|| a.node_id.cmp(&b.node_id))
    });
    let rejected = ordered
        .iter()
        .any(|d| d.severity == ConstraintLevel::Hard && d.status == DiagnosticStatus::Unsatisfied);
    let has_findings = ordered.iter().any(|d| {
        d.severity != ConstraintLevel::Hard
            && (d.status == DiagnosticStatus::Unsatisfied || d.cause == DiagnosticCause::Advisory)
    });
    let status = if rejected {
        PlanStatus::Rejected
    } else if has_findings {
        PlanStatus::AcceptedWithFindings
    } else {
        PlanStatus::Accepted
    };
    let mut bundle = DiagnosticsBundle {
        status,
        satisfaction_score: satisfaction_score(outcomes),
        failures: Vec::new(),
        warnings: Vec::new(),
        infos: Vec::new(),
    };
    for diagnostic in ordered {
        match diagnostic.severity {
            ConstraintLevel::Hard => bundle.failures.push(diagnostic),
            ConstraintLevel::Soft => bundle.warnings.push(diagnostic),
            ConstraintLevel::Informational => bundle.infos.push(diagnostic),
        }
    }
    bundle
}

fn merge_suggestions(first: Option<&str>, second: Option<&str>) -> Option<String> {
    let mut lines: Vec<&str> = Vec::new();
    for text in [first, second].into_iter().flatten() {
        for line in text.lines() {
            if !lines.contains(&line) {
                lines.push(line);
            }
        }
    }
    (!lines.is_empty()).then(|| lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diagnostic(
        severity: ConstraintLevel,
        id: &str,
        node: Option<&str>,
        cause: DiagnosticCause,
        suggestion: &str,
    ) -> PlanDiagnostic {
        PlanDiagnostic {
            severity,
            status: DiagnosticStatus::Unsatisfied,
            constraint: Some(format!("constraint {id}")),
            constraint_id: Some(id.into()),
            node_id: node.map(String::from),
            capability_id: None,
            cause,
            suggestion: Some(suggestion.into()),
            details: None,
        }
    }

    #[test]
    fn duplicates_merge_with_dominant_severity_and_joined_suggestions() {
        let bundle = merge_diagnostics(
            vec![
                diagnostic(
                    ConstraintLevel::Soft,
                    "min_qa",
                    Some("n1"),
                    DiagnosticCause::MissingProducer,
                    "Insert QA.",
                ),
                diagnostic(
                    ConstraintLevel::Hard,
                    "min_qa",
                    Some("n1"),
                    DiagnosticCause::MissingProducer,
                    "Insert a reviewer.",
                ),
            ],
            &[],
        );
        assert_eq!(bundle.failures.len(), 1);
        assert!(bundle.warnings.is_empty());
        assert_eq!(
            bundle.failures[0].suggestion.as_deref(),
            Some("Insert QA.\nInsert a reviewer.")
        );
        assert_eq!(bundle.status, PlanStatus::Rejected);
    }

    #[test]
    fn ordering_is_severity_then_constraint_then_node() {
        let bundle = merge_diagnostics(
            vec![
                diagnostic(
                    ConstraintLevel::Hard,
                    "b",
                    Some("n2"),
                    DiagnosticCause::MissingProducer,
                    "",
                ),
                diagnostic(
                    ConstraintLevel::Hard,
                    "a",
                    Some("n9"),
                    DiagnosticCause::MissingProducer,
                    "",
                ),
                diagnostic(
                    ConstraintLevel::Hard,
                    "a",
                    Some("n1"),
                    DiagnosticCause::MissingProducer,
                    "",
                ),
            ],
            &[],
        );
        let order: Vec<_> = bundle
            .failures
            .iter()
            .map(|d| (d.constraint_id.clone().unwrap(), d.node_id.clone().unwrap()))
            .collect();
        assert_eq!(
            order,
            vec![
                ("a".into(), "n1".into()),
                ("a".into(), "n9".into()),
                ("b".into(), "n2".into())
            ]
        );
    }

    #[test]
    fn soft_findings_accept_with_findings_and_score_by_weight() {
        let bundle = merge_diagnostics(
            vec![diagnostic(
                ConstraintLevel::Soft,
                "exact_two",
                None,
                DiagnosticCause::UnsatisfiedSoft,
                "",
            )],
            &[
                ConstraintOutcome {
                    level: ConstraintLevel::Hard,
                    satisfiable: true,
                },
                ConstraintOutcome {
                    level: ConstraintLevel::Soft,
                    satisfiable: false,
                },
                ConstraintOutcome {
                    level: ConstraintLevel::Informational,
                    satisfiable: false,
                },
            ],
        );
        assert_eq!(bundle.status, PlanStatus::AcceptedWithFindings);
        assert!((bundle.satisfaction_score - 1.0 / 1.5).abs() < 1e-9);
    }

    #[test]
    fn no_diagnostics_is_accepted_with_full_score() {
        let bundle = merge_diagnostics(vec![], &[]);
        assert_eq!(bundle.status, PlanStatus::Accepted);
        assert_eq!(bundle.satisfaction_score, 1.0);
    }
}
