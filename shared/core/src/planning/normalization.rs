//! The normalization node: a `transformation` node the
//! planner injects after execution when the produced facets would not, by
//! themselves, satisfy the caller's output schema.
//!
//! Every goal facet's producer is already held to the caller's schema for
//! that property (the compiler `allOf`s it in), so the assembled output fits
//! the caller schema exactly when that schema constrains nothing but its
//! facet-named properties. It needs a transformation when it asks for a
//! top-level property no facet is named after (a `summary` derived from the
//! facets, say), or puts constraints on the object as a whole (`minProperties`,
//! `dependentRequired`, `if`/`then`, `not`, `allOf`, …). Then one AI node, run
//! by the orchestrator (capability id [`NORMALIZE_CAPABILITY`], not a
//! registered capability), reads the goal facets and answers the whole
//! caller schema; it becomes the final producer of every output property.

use std::sync::Arc;

use serde_json::Value;

use crate::basics::schema::schema_key_of;
use crate::catalog::registry::Registry;
use crate::contracts::capability::NodeKind;
use crate::contracts::compiler::{CompiledContract, ContractDirection, compile_contract};
use crate::contracts::envelope::TaskEnvelope;
use crate::planning::plan::{PlanEdge, PlanGraph, PlanNode};

/// Capability id recorded on normalization nodes (orchestrator-managed).
pub const NORMALIZE_CAPABILITY: &str = "baton.normalize";

/// Node id of the injected normalization node.
pub const NORMALIZE_NODE_ID: &str = "normalize";

/// Top-level keywords that only shape the facet-named properties, which the
/// producers' tightened contracts already enforce.
const PER_PROPERTY_KEYWORDS: [&str; 9] = [
    "type",
    "properties",
    "required",
    "additionalProperties",
    "title",
    "description",
    "$schema",
    "$id",
    "examples",
];

/// Why the facet outputs alone would not satisfy the caller's schema, if
/// they would not: the non-facet properties and the object-level keywords.
pub fn reasons_for_normalization(envelope: &TaskEnvelope, registry: &Registry) -> Vec<String> {
    let schema = &envelope.output_contract.schema;
    let mut reasons: Vec<String> = envelope
        .output_contract
        .top_level_properties()
        .into_iter()
        .filter(|property| !registry.facets.contains(property))
        .map(|property| format!("property `{property}` is not a facet"))
        .collect();
    if let Some(object) = schema.as_object() {
        reasons.extend(
            object
                .keys()
                .filter(|keyword| !PER_PROPERTY_KEYWORDS.contains(&keyword.as_str()))
                .map(|keyword| format!("object-level keyword `{keyword}`")),
        );
    }
    reasons
}

fn normalization_instructions(reasons: &[String]) -> String {
    format!(
        "You are the orchestrator's normalisation step. The inputs are the finished results of the earlier steps. \
Answer with one JSON object that satisfies the output schema exactly: copy every input value that has a place in the schema unchanged, \
derive the remaining fields only from the inputs, and invent nothing. The output schema needs this step because: {}.",
        reasons.join("; ")
    )
}

/// The caller's schema with each facet-named property also held to its
/// facet's schema (`allOf`), as every other producer of a goal facet is: the
/// normalised values stay valid facet values, and the model sees their shape.
fn normalized_output_schema(envelope: &TaskEnvelope, registry: &Registry) -> Value {
    let mut schema = envelope.output_contract.schema.clone();
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for (name, property_schema) in properties.iter_mut() {
            if let Some(facet) = registry.facets.get(name) {
                let caller_schema = property_schema.take();
                *property_schema =
                    serde_json::json!({"allOf": [facet.schema.clone(), caller_schema]});
            }
        }
    }
    schema
}

/// Appends the normalization node to `plan` when the caller's schema needs
/// it; records `metadata.normalizationInjected` either way.
pub fn inject_normalization(
    mut plan: PlanGraph,
    envelope: &TaskEnvelope,
    registry: &Registry,
) -> Result<PlanGraph, crate::basics::error::CoreError> {
    let reasons = reasons_for_normalization(envelope, registry);
    // With no goal facet there is nothing to normalise from: the validator
    // reports the uncovered properties instead.
    let injected = !reasons.is_empty()
        && !plan.goal_facets.is_empty()
        && !plan
            .nodes
            .iter()
            .any(|node| node.node_id == NORMALIZE_NODE_ID);
    plan.metadata
        .insert("normalizationInjected".into(), Value::Bool(injected));
    if !injected {
        return Ok(plan);
    }
    let mut edges = Vec::new();
    let mut input_facets = Vec::new();
    for goal in &plan.goal_facets {
        if let Some(producer) = plan.final_producer_of(goal) {
            edges.push(PlanEdge {
                from: producer.node_id.clone(),
                to: NORMALIZE_NODE_ID.to_string(),
                facet: goal.clone(),
            });
            input_facets.push(goal.clone());
        } else if plan.supplied_facets.contains(goal) {
            input_facets.push(goal.clone());
        }
    }
    let input_contract = compile_contract(
        &registry.facets,
        &input_facets,
        ContractDirection::Input,
        &|_| None,
    )?;
    let output_schema = normalized_output_schema(envelope, registry);
    let output_contract = CompiledContract {
        schema_key: schema_key_of(&output_schema),
        schema: Arc::new(output_schema),
        provenance: Default::default(),
    };
    plan.nodes.push(PlanNode {
        node_id: NORMALIZE_NODE_ID.to_string(),
        capability_id: NORMALIZE_CAPABILITY.to_string(),
        label: "Normalise to the output contract".to_string(),
        kind: NodeKind::Transformation,
        executor: crate::planning::plan::NodeExecutor::Model,
        derived: false,
        input_facets,
        output_facets: envelope.output_contract.top_level_properties(),
        input_contract,
        output_contract,
        instructions: normalization_instructions(&reasons).into(),
        variant: None,
        allows_clarify: false,
        guard: None,
        task_surface: None,
        quality_score: None,
        remember: Vec::new(),
        // A model node of the orchestrator's own: the envelope's preference,
        // else the default.
        model: envelope
            .constraints
            .preferred_models
            .first()
            .and_then(|name| crate::planning::model_choice::target_of(registry.models(), name)),
    });
    plan.edges.extend(edges);
    plan.metadata
        .insert("normalizationReasons".into(), Value::from(reasons));
    Ok(plan)
}

/// Whether `node` is an injected normalization node (checked by the
/// validator instead of a registry lookup).
pub fn is_normalization_node(node: &PlanNode) -> bool {
    node.capability_id == NORMALIZE_CAPABILITY
        && node.kind == NodeKind::Transformation
        && node.executor == crate::planning::plan::NodeExecutor::Model
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nothing_is_injected_without_a_goal_facet_to_read() {
        let envelope = TaskEnvelope::parse_value(&json!({
            "objective": "o",
            "outputContract": {"schema": {"type": "object", "required": ["summary"], "properties": {"summary": {"type": "string"}}}}
        }))
        .unwrap_or_else(|error| unreachable!("{error}"));
        let registry = Registry::default();
        assert_eq!(
            reasons_for_normalization(&envelope, &registry),
            vec!["property `summary` is not a facet".to_string()]
        );
        let empty = PlanGraph {
            plan_version: 1,
            planner_runtime: "llm".into(),
            planner_model: None,
            nodes: Vec::new(),
            edges: Vec::new(),
            supplied_facets: Vec::new(),
            goal_facets: Vec::new(),
            metadata: serde_json::Map::new(),
        };
        let plan = inject_normalization(empty, &envelope, &registry)
            .unwrap_or_else(|error| unreachable!("{error}"));
        assert!(plan.nodes.is_empty());
        assert_eq!(plan.metadata["normalizationInjected"], false);
    }
}
