//! Capabilities a plan needs beyond what produces the contract's facets:
//! those `policies.planner.selection.require` names, a reviewer under
//! `constraints.qualityThreshold`, a node of each
//! `policies.planner.topology.requiredKinds` kind. Each is planned after
//! what produces its inputs (the deterministic planner's drafting rules).

use crate::contracts::capability::CapabilityRegistration;
use crate::contracts::diagnostics::{DiagnosticCause, PlanDiagnostic};

use super::planning_context::{Draft, PlanningContext};

/// Capabilities `selection.require` names by id that nothing the contract
/// asks for brought in (a reviewer, typically) are planned after what
/// produces their inputs; when those inputs cannot be had, a diagnostic says so.
pub(super) fn add_required_capabilities(
    context: &PlanningContext<'_>,
    draft: &mut Draft,
    diagnostics: &mut Vec<PlanDiagnostic>,
) {
    let Some(selection) = context.envelope.policies.planner_selection() else {
        return;
    };
    for required in &selection.require {
        let Some(capability) = context.registry.capability(required) else {
            continue;
        };
        if draft
            .chosen_capability_ids
            .contains(&capability.capability_id)
            || context.is_listed(|s| &s.forbid, &capability.capability_id)
        {
            continue;
        }
        let snapshot = draft.clone();
        let mut stack = Vec::new();
        let inputs_resolved = context
            .required_inputs(capability)
            .all(|input| context.resolve_facet(input, draft, &mut stack));
        if inputs_resolved {
            draft.choose(capability);
        } else {
            *draft = snapshot;
            diagnostics.push(
                PlanDiagnostic::hard(
                    format!("policy.selection.require.{required}"),
                    DiagnosticCause::MissingProducer,
                    format!("the inputs of required `{required}` are produced or supplied"),
                )
                .with_suggestion(format!(
                    "`{required}` needs {}; supply them in `inputs` or register their producers.",
                    capability.input_contract.join(", ")
                )),
            );
        }
    }
}

/// What the envelope's constraints need that nothing planned so far gives:
/// a reviewer (a capability with a `qualityScore`) under
/// `constraints.qualityThreshold`, and a node of each
/// `policies.planner.topology.requiredKinds` kind. Of the registry
/// capabilities that give it, take something the plan makes and whose
/// inputs can be had (never a forbidden one), the one needing the fewest
/// new nodes is planned after its producers (ties: preferred ones first,
/// then by cost, then by id). When none can, the plan goes without it and the
/// validator says so (an advisory for the reviewer, a hard finding for a
/// required kind).
pub(super) fn add_capabilities_the_constraints_need(
    context: &PlanningContext<'_>,
    draft: &mut Draft,
) {
    let registry = context.registry;
    let mut needs = Vec::new();
    if context.envelope.constraints.quality_threshold.is_some() {
        needs.push(ConstraintNeed::Reviewer);
    }
    if let Some(topology) = context
        .envelope
        .policies
        .planner
        .as_ref()
        .and_then(|planner| planner.topology.as_ref())
    {
        needs.extend(
            topology
                .required_kinds
                .iter()
                .cloned()
                .map(ConstraintNeed::Kind),
        );
    }
    for need in needs {
        let planned = draft
            .chosen_capability_ids
            .iter()
            .filter_map(|id| registry.capability(id))
            .any(|capability| need.given_by(capability));
        if planned {
            continue;
        }
        // It must take something the plan makes (a reviewer reviews a
        // draft; a node of a required kind works on the plan's output).
        let mut candidates: Vec<&CapabilityRegistration> = registry
            .capabilities()
            .filter(|capability| need.given_by(capability))
            .filter(|capability| !context.is_listed(|s| &s.forbid, &capability.capability_id))
            .filter(|capability| {
                capability
                    .input_contract
                    .iter()
                    .any(|facet| draft.produced.contains(facet))
            })
            .collect();
        candidates.sort_by_key(|capability| {
            (
                !context.is_listed(|s| &s.prefer, &capability.capability_id),
                context.cost_order(capability),
                capability.capability_id.clone(),
            )
        });
        // The candidate that needs the fewest new nodes for its inputs
        // (one reviewing what the plan makes already beats one that pulls
        // in producers of its own); ties go to the order above.
        let mut best: Option<(usize, Draft)> = None;
        for capability in candidates {
            let mut trial = draft.clone();
            let mut stack = Vec::new();
            let inputs_resolved = context
                .required_inputs(capability)
                .all(|input| context.resolve_facet(input, &mut trial, &mut stack));
            if !inputs_resolved {
                continue;
            }
            let added = trial.chosen_capability_ids.len() - draft.chosen_capability_ids.len();
            trial.choose(capability);
            if best.as_ref().is_none_or(|(fewest, _)| added < *fewest) {
                best = Some((added, trial));
            }
        }
        if let Some((_, chosen)) = best {
            *draft = chosen;
        }
    }
}

/// Something the envelope's constraints need in a plan.
enum ConstraintNeed {
    /// A reviewer: a capability with a `qualityScore`.
    Reviewer,
    /// A node of this kind.
    Kind(String),
}

impl ConstraintNeed {
    fn given_by(&self, capability: &CapabilityRegistration) -> bool {
        match self {
            ConstraintNeed::Reviewer => capability.quality_score.is_some(),
            ConstraintNeed::Kind(kind) => capability.kind.as_str() == kind,
        }
    }
}
