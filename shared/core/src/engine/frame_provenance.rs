//! Facet provenance on frames that are not a node's own: the planner's
//! (`plan_generated`, `plan_updated`), a policy's (`policy_triggered`) and a
//! person's (`hitl_request`, `hitl_resolved`). A frame about a node carries
//! that node's compiled contracts' provenance, as node frames do; any other
//! carries where each property the run delivers comes from in the plan in
//! force (the output provenance of its final producer), as `complete` does.

use crate::state::run::RunState;
use crate::wire::event::{EventDraft, FrameProvenance};

/// Where each delivered property comes from in the plan in force; none
/// before a plan exists.
pub(super) fn delivered_provenance(state: &RunState) -> Option<FrameProvenance> {
    let plan = state.plan.as_ref()?;
    let properties = state.envelope.output_contract.top_level_properties();
    let output: Vec<crate::contracts::compiler::FacetProvenance> = properties
        .iter()
        .filter_map(|property| plan.final_producer_of(property))
        .flat_map(|producer| producer.output_contract.provenance.iter())
        .filter(|entry| properties.contains(&entry.facet))
        .cloned()
        .collect();
    Some(FrameProvenance {
        input: std::sync::Arc::new(Vec::new()),
        output: std::sync::Arc::new(output),
    })
}

/// `frame` with the provenance of `node_id` (a node of the plan in force),
/// else the run's delivered provenance.
pub(super) fn with_provenance(
    state: &RunState,
    frame: EventDraft,
    node_id: Option<&str>,
) -> EventDraft {
    let node = node_id.and_then(|id| state.plan.as_ref().and_then(|plan| plan.node(id)));
    let provenance = match node {
        Some(node) => Some(FrameProvenance {
            input: node.input_contract.provenance.clone(),
            output: node.output_contract.provenance.clone(),
        }),
        None => delivered_provenance(state),
    };
    match provenance {
        Some(provenance) => frame.provenance(provenance),
        None => frame,
    }
}
