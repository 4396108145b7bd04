//! A plan without a run: what `baton plan` prints and the MCP `plan` tool
//! answers. The envelope's legacy keys are normalised as a submission's
//! would be, the deterministic planner plans, the validator judges, and
//! each node's escalation target is named. Nothing is stored and no model
//! is called.

use serde::Serialize;

use crate::basics::schema::ValidatorCache;
use crate::catalog::registry::Registry;
use crate::contracts::diagnostics::{DiagnosticsBundle, PlanStatus};
use crate::contracts::envelope::TaskEnvelope;
use crate::planning::escalation_targets::{EscalationTarget, escalation_targets};
use crate::planning::plan::PlanGraph;
use crate::planning::planner::plan_deterministically;
use crate::planning::validator::{rejected_bundle, validate_plan};

/// The plan a run of an envelope would start with, and its judgement.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanPreview {
    pub diagnostics: DiagnosticsBundle,
    /// Absent when no plan could be drawn.
    pub plan: Option<PlanGraph>,
    /// Where each node's facets go if it fails.
    pub escalation: Option<Vec<EscalationTarget>>,
}

impl PlanPreview {
    /// No plan, or one the validator rejects: a run would end
    /// `plan_rejected`.
    pub fn is_rejected(&self) -> bool {
        self.plan.is_none() || self.diagnostics.status == PlanStatus::Rejected
    }
}

/// The plan of `envelope` (its legacy keys already normalised) on
/// `registry`, judged.
pub fn preview_plan(
    envelope: &TaskEnvelope,
    registry: &Registry,
    validators: &ValidatorCache,
) -> PlanPreview {
    match plan_deterministically(envelope, registry) {
        Ok(plan) => {
            let diagnostics = validate_plan(&plan, envelope, registry, validators);
            let escalation = escalation_targets(&plan, envelope, registry, validators);
            PlanPreview {
                diagnostics,
                plan: Some(plan),
                escalation: Some(escalation),
            }
        }
        Err(diagnostics) => PlanPreview {
            diagnostics: rejected_bundle(diagnostics),
            plan: None,
            escalation: None,
        },
    }
}
