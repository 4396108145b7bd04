//! What a new plan version goes without, said: the capabilities the old
//! version used that the new one drops, and what took an escalated node's
//! facets over (split from `replan` to keep each file short).

use std::collections::BTreeSet;

use crate::basics::codes::WarningCode;
use crate::planning::plan::PlanGraph;
use crate::state::replan_cause::ReplanCause;
use crate::wire::frames;

use super::step_context::StepContext;

/// Capabilities the old version used that the new one goes without
/// (besides those the cause excluded) are said: the output will be made
/// without them.
pub(super) fn say_dropped_specialists(
    step: &mut StepContext<'_, '_>,
    previous: &PlanGraph,
    plan: &PlanGraph,
    cause: &ReplanCause,
) {
    let dropped: BTreeSet<&str> = previous
        .nodes
        .iter()
        .map(|node| node.capability_id.as_str())
        .filter(|capability| {
            !plan
                .nodes
                .iter()
                .any(|node| node.capability_id == *capability)
                && !cause
                    .exclude_capabilities
                    .iter()
                    .any(|excluded| excluded == capability)
        })
        .collect();
    if dropped.is_empty() {
        return;
    }
    let names: Vec<&str> = dropped.into_iter().collect();
    let warning = frames::warning(
        &step.stamp(),
        None,
        format!(
            "plan version {} goes without {}: the output is made without them",
            plan.plan_version,
            names.join(", ")
        ),
        &frames::WarningPayload::of(WarningCode::SpecialistSkipped),
    );
    step.emit(warning);
}

/// Once a version replaced the plan an escalated node was in: whether
/// another capability makes what it made (a `capability_fallback`
/// warning), or the version goes without it (`specialist_skipped` too).
pub(super) fn say_what_took_over(
    step: &mut StepContext<'_, '_>,
    escalated: &crate::records::governance::EscalationRecord,
) {
    // The node making all of the escalated facets, else one making some.
    let taken_over_by = step.state().plan.as_ref().and_then(|plan| {
        let makes_all = |other: &&crate::planning::plan::PlanNode| {
            escalated
                .output_facets
                .iter()
                .all(|facet| other.output_facets.contains(facet))
        };
        let makes_some = |other: &&crate::planning::plan::PlanNode| {
            other
                .output_facets
                .iter()
                .any(|facet| escalated.output_facets.contains(facet))
        };
        plan.nodes
            .iter()
            .find(makes_all)
            .or_else(|| plan.nodes.iter().find(makes_some))
            .map(|other| other.capability_id.clone())
    });
    let replaced_by_another = taken_over_by.is_some();
    let version = step.state().plan_version();
    let node_id = escalated.node_id.as_str();
    let said = &escalated.failure;
    let warning = frames::warning(
        &step.stamp(),
        Some(node_id),
        if let Some(capability_id) = &taken_over_by {
            format!("{said}; plan version {version} uses another capability: {capability_id}")
        } else {
            format!(
                "{said}; plan version {version} goes without it: no other capability makes {}",
                escalated.output_facets.join(", ")
            )
        },
        &frames::WarningPayload::of(crate::basics::codes::WarningCode::CapabilityFallback),
    );
    step.emit(warning);
    if !replaced_by_another {
        let skipped = frames::warning(
            &step.stamp(),
            Some(node_id),
            format!(
                "plan version {version} goes without {}: the output is made without it",
                escalated.capability_id
            ),
            &frames::WarningPayload::of(crate::basics::codes::WarningCode::SpecialistSkipped),
        );
        step.emit(skipped);
    }
}
