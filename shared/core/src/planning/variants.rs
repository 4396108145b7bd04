//! Branch expansion for variants: when the contract
//! asks for exactly N items of a goal facet (`minItems == maxItems == N`, or
//! `policies.planner.topology.variantCount`; under the `diversity`
//! objective a list goal facet gets [`DIVERSITY_VARIANTS`] within its
//! bounds), the facet's terminal producer
//! becomes N parallel branch nodes, each held to exactly one item, and an
//! orchestrator-managed join node concatenates them. Each branch is its own
//! step message, so branches run in parallel.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::basics::schema::schema_key_of;
use crate::contracts::capability::{AgentType, NodeKind};
use crate::contracts::compiler::CompiledContract;
use crate::contracts::envelope::TaskEnvelope;
use crate::contracts::policies::OptimisationObjective;
use crate::planning::plan::{
    BUILTIN_JOIN_CAPABILITY, BuiltinOperation, NodeExecutor, PlanEdge, PlanGraph, PlanNode,
    VariantSlot,
};

/// Variants of a list goal facet under `optimisation.objective:
/// "diversity"` when neither the contract nor `topology.variantCount` fixes
/// the count (held within the contract's `minItems` and `maxItems`).
pub const DIVERSITY_VARIANTS: u32 = 3;

/// How many variants the contract asks of `facet`, when more than one
/// (`topology.variantCount`, else `minItems == maxItems`, else
/// [`DIVERSITY_VARIANTS`] under the `diversity` objective).
pub fn requested_variant_count(envelope: &TaskEnvelope, facet: &str) -> Option<u32> {
    let caller_schema = envelope.output_contract.property_schema(facet)?;
    let is_array = caller_schema.get("type").and_then(Value::as_str) == Some("array")
        || caller_schema.get("items").is_some();
    if !is_array {
        return None;
    }
    let from_policy = envelope
        .policies
        .planner
        .as_ref()
        .and_then(|planner| planner.topology.as_ref())
        .and_then(|topology| topology.variant_count);
    let bound = |key: &str| {
        caller_schema
            .get(key)
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
    };
    let from_contract = match (bound("minItems"), bound("maxItems")) {
        (Some(minimum), Some(maximum)) if minimum == maximum => Some(minimum),
        _ => None,
    };
    let for_diversity = || {
        let objective = envelope
            .policies
            .planner_optimisation()
            .and_then(|optimisation| optimisation.objective);
        (objective == Some(OptimisationObjective::Diversity)).then(|| {
            DIVERSITY_VARIANTS
                .max(bound("minItems").unwrap_or(1))
                .min(bound("maxItems").unwrap_or(u32::MAX))
        })
    };
    from_policy
        .or(from_contract)
        .or_else(for_diversity)
        .filter(|count| *count > 1)
}

/// The caller's item schema for `facet` without its count bounds.
fn caller_schema_without_counts(envelope: &TaskEnvelope, facet: &str) -> Value {
    let mut schema = envelope
        .output_contract
        .property_schema(facet)
        .cloned()
        .unwrap_or_else(|| json!({}));
    if let Some(object) = schema.as_object_mut() {
        object.remove("minItems");
        object.remove("maxItems");
    }
    schema
}

fn contract_with_property(
    base: &CompiledContract,
    facet: &str,
    property_schema: Value,
    only_this_facet: bool,
) -> CompiledContract {
    let mut schema = (*base.schema).clone();
    if only_this_facet {
        schema["properties"] = json!({ facet: property_schema });
        schema["required"] = json!([facet]);
    } else {
        schema["properties"][facet] = property_schema;
    }
    let provenance = base
        .provenance
        .iter()
        .filter(|provenance| !only_this_facet || provenance.facet == facet)
        .cloned()
        .collect::<Vec<_>>()
        .into();
    CompiledContract {
        schema_key: schema_key_of(&schema),
        schema: Arc::new(schema),
        provenance,
    }
}

/// Expands every goal facet that asks for several variants. Producers with
/// downstream consumers are left alone (their consumers would each need one
/// variant; that is a planner concern for later).
pub fn expand_variants(
    mut plan: PlanGraph,
    envelope: &TaskEnvelope,
    facet_schema: &dyn Fn(&str) -> Option<Value>,
) -> PlanGraph {
    for goal in plan.goal_facets.clone() {
        let Some(count) = requested_variant_count(envelope, &goal) else {
            continue;
        };
        let Some(producer) = plan.final_producer_of(&goal).cloned() else {
            continue;
        };
        let has_consumers = plan.edges.iter().any(|edge| edge.from == producer.node_id);
        if has_consumers
            || producer.agent_type() == AgentType::Builtin
            || producer.variant.is_some()
        {
            continue;
        }
        let Some(position) = plan
            .nodes
            .iter()
            .position(|node| node.node_id == producer.node_id)
        else {
            continue;
        };
        let own_schema = facet_schema(&goal).unwrap_or_else(|| json!({}));
        let branch_property = json!({"allOf": [own_schema, caller_schema_without_counts(envelope, &goal), {"minItems": 1, "maxItems": 1}]});
        let incoming: Vec<PlanEdge> = plan
            .edges
            .iter()
            .filter(|edge| edge.to == producer.node_id)
            .cloned()
            .collect();
        plan.edges.retain(|edge| edge.to != producer.node_id);
        let mut replacement = Vec::new();
        let mut branch_ids = Vec::new();
        for index in 1..=count {
            let mut branch = producer.clone();
            branch.node_id = format!("{}_v{index}", producer.node_id);
            branch.label = format!("{} (variant {index} of {count})", producer.label);
            branch.kind = NodeKind::Branch;
            branch.variant = Some(VariantSlot { index, count });
            branch.output_contract = contract_with_property(
                &producer.output_contract,
                &goal,
                branch_property.clone(),
                false,
            );
            branch.instructions = format!(
                "{}\n\nYou write variant {index} of {count}: put exactly one item in `{goal}`, and make it differ in angle from the other variants.",
                branch.instructions
            )
            .into();
            for edge in &incoming {
                plan.edges.push(PlanEdge {
                    from: edge.from.clone(),
                    to: branch.node_id.clone(),
                    facet: edge.facet.clone(),
                });
            }
            branch_ids.push(branch.node_id.clone());
            replacement.push(branch);
        }
        let join_id = format!("{}_join", producer.node_id);
        for branch_id in &branch_ids {
            plan.edges.push(PlanEdge {
                from: branch_id.clone(),
                to: join_id.clone(),
                facet: goal.clone(),
            });
        }
        let join_property = producer.output_contract.schema["properties"][&goal].clone();
        replacement.push(PlanNode {
            node_id: join_id,
            capability_id: BUILTIN_JOIN_CAPABILITY.to_string(),
            label: format!("Join {count} variants of {goal}"),
            kind: NodeKind::Transformation,
            executor: NodeExecutor::Builtin(BuiltinOperation::ConcatArrays {
                facet: goal.clone(),
                sources: branch_ids,
            }),
            derived: false,
            input_facets: Vec::new(),
            output_facets: vec![goal.clone()],
            input_contract: CompiledContract {
                schema_key: schema_key_of(&json!({"type": "object"})),
                schema: Arc::new(json!({"type": "object"})),
                provenance: Default::default(),
            },
            output_contract: contract_with_property(
                &producer.output_contract,
                &goal,
                join_property,
                true,
            ),
            instructions: "".into(),
            variant: None,
            allows_clarify: false,
            guard: None,
            task_surface: None,
            quality_score: None,
            remember: Vec::new(),
            model: None,
        });
        plan.nodes.splice(position..=position, replacement);
        plan.metadata.insert("branchCount".into(), json!(count));
    }
    plan
}
