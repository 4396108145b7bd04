//! Nodes asked for only the outputs the plan needs. A capability that
//! declares `partialOutputs` may be asked for a subset of its output
//! facets; once a plan's nodes and edges are known, each such node keeps
//! only the facets something reads: a later node (an edge), the caller's
//! contract (a goal), the node's own quality score or acceptance report,
//! the revision loop (a facet that drives revisions), or the envelope's
//! policies (a facet named there). Its output contract and instructions
//! are compiled for those alone; the plan's `metadata.outputsLeftOut`
//! names what each node was not asked for. A node nothing reads keeps
//! every output (it was planned for a reason the plan does not show).
//!
//! Invariant: narrowing never removes a facet an edge, a goal or a
//! quality pointer names, so the plan validates as before.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::basics::error::CoreError;
use crate::catalog::registry::Registry;
use crate::contracts::capability::CapabilityRegistration;
use crate::contracts::compiler::{ContractDirection, compile_contract};
use crate::contracts::envelope::TaskEnvelope;
use crate::planning::plan::{PlanEdge, PlanNode};

/// Writes a node's instructions: `(capability, input facets, output facets)`.
pub(super) type ComposeInstructions<'a> =
    dyn Fn(&CapabilityRegistration, &[String], &[String]) -> String + 'a;

/// Narrows the outputs of `nodes` whose capability allows it (their
/// instructions recomposed by `compose_instructions(capability, inputs,
/// outputs)`); returns what each narrowed node was not asked for, by node id.
pub(super) fn narrow_to_needed_outputs(
    nodes: &mut [PlanNode],
    edges: &[PlanEdge],
    goals: &[String],
    envelope: &TaskEnvelope,
    registry: &Registry,
    compose_instructions: &ComposeInstructions<'_>,
) -> Result<BTreeMap<String, Vec<String>>, CoreError> {
    let mut left_out_by_node = BTreeMap::new();
    let mut policies_text: Option<String> = None;
    for node in nodes.iter_mut() {
        let Some(capability) = registry
            .capability(&node.capability_id)
            .filter(|capability| capability.partial_outputs)
        else {
            continue;
        };
        let policies_text = policies_text
            .get_or_insert_with(|| serde_json::to_string(&envelope.policies).unwrap_or_default());
        let (needed, left_out): (Vec<String>, Vec<String>) =
            node.output_facets.iter().cloned().partition(|facet| {
                goals.contains(facet)
                    || edges
                        .iter()
                        .any(|edge| edge.from == node.node_id && edge.facet == *facet)
                    || quality_reads(node, facet)
                    || registry
                        .facets
                        .get(facet)
                        .is_some_and(|definition| definition.drives_revisions)
                    || policies_text.contains(facet.as_str())
            });
        if needed.is_empty() || left_out.is_empty() {
            continue;
        }
        let contract = &envelope.output_contract;
        let tighten = |facet: &str| -> Option<Value> {
            goals
                .iter()
                .any(|goal| goal == facet)
                .then(|| contract.property_schema(facet).cloned())
                .flatten()
        };
        node.output_contract = compile_contract(
            &registry.facets,
            &needed,
            ContractDirection::Output,
            &tighten,
        )?;
        node.instructions = compose_instructions(capability, &node.input_facets, &needed).into();
        node.output_facets = needed;
        left_out_by_node.insert(node.node_id.clone(), left_out);
    }
    Ok(left_out_by_node)
}

/// Whether the node's quality score or acceptance report is read from
/// `facet`.
fn quality_reads(node: &PlanNode, facet: &str) -> bool {
    let Some(spec) = &node.quality_score else {
        return false;
    };
    let first_segment = |pointer: &str| {
        pointer
            .trim_start_matches('/')
            .split('/')
            .next()
            .unwrap_or_default()
            .to_string()
    };
    first_segment(&spec.pointer) == facet
        || spec
            .acceptance_pointer
            .as_deref()
            .is_some_and(|pointer| first_segment(pointer) == facet)
}
