//! The LLM planner's sans-IO half: the request that
//! asks a model for a plan draft (constrained by a JSON Schema), and the
//! translation of its answer into a `PlanGraph` that the validator then
//! proves. Diagnostics of a rejected attempt go into the next request.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::catalog::registry::Registry;
use crate::contracts::diagnostics::{DiagnosticCause, DiagnosticsBundle, PlanDiagnostic};
use crate::contracts::envelope::TaskEnvelope;
use crate::contracts::model_request::ModelRequest;
use crate::planning::plan::PlanGraph;
use crate::planning::planner::{assemble_plan, supplied_facets};

/// `PlanGraph.plannerRuntime` of plans this planner drafted.
pub const LLM_PLANNER_RUNTIME: &str = "llm";

const PLANNER_INSTRUCTIONS: &str = "You plan work for an orchestrator. Choose capabilities from the catalogue so that \
every top-level property of the output contract is produced, every required input facet of every chosen capability \
is produced by a node it depends on (or is supplied by the envelope's inputs), and the planner policies hold. \
Answer with nodes in execution order; `dependsOn` lists the nodes whose outputs a node needs. If previous attempts \
were rejected, fix every listed failure (by constraintId, cause and suggestion). When `replan` is present, the plan \
in force is being replaced: read its trigger, rationale and failed nodes, keep the nodes whose outputs still hold \
(same nodeId, capability and dependencies keep their outputs), replace or correct what failed, and add corrective \
nodes (a reviewer, a person) where the rationale asks for them.";

/// The JSON Schema the model's answer must satisfy.
pub fn plan_draft_schema() -> Value {
    json!({
        "type": "object",
        "required": ["nodes"],
        "properties": {
            "nodes": draft_nodes_schema(),
            "rationale": {"type": "string"}
        },
        "additionalProperties": false
    })
}

/// A draft's `nodes`: each a `nodeId`, a `capabilityId` and the nodes it
/// depends on (a plan draft's, and a turn's `planPatch`).
pub fn draft_nodes_schema() -> Value {
    json!({
        "type": "array",
        "minItems": 1,
        "items": {
            "type": "object",
            "required": ["nodeId", "capabilityId"],
            "properties": {
                "nodeId": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
                "capabilityId": {"type": "string"},
                "dependsOn": {"type": "array", "items": {"type": "string"}}
            },
            "additionalProperties": false
        }
    })
}

/// The planning request: the normalized envelope, the capability snapshot
/// with facet contracts, and the feedback of rejected attempts.
pub fn planner_request(
    envelope: &TaskEnvelope,
    registry: &Registry,
    rejected_attempts: &[DiagnosticsBundle],
) -> ModelRequest {
    planner_request_with_context(envelope, registry, rejected_attempts, None)
}

/// The planning request for a replan: the same as the first plan's, with
/// `replan` saying what is replaced and why (the plan in force with each
/// node's status and error, the trigger, the rationale, the policy).
pub fn replan_request(
    envelope: &TaskEnvelope,
    registry: &Registry,
    rejected_attempts: &[DiagnosticsBundle],
    replan: Value,
) -> ModelRequest {
    planner_request_with_context(envelope, registry, rejected_attempts, Some(replan))
}

fn planner_request_with_context(
    envelope: &TaskEnvelope,
    registry: &Registry,
    rejected_attempts: &[DiagnosticsBundle],
    replan: Option<Value>,
) -> ModelRequest {
    let capabilities = planner_catalogue(registry);
    let mut used_facets = BTreeSet::new();
    for capability in registry.capabilities() {
        used_facets.extend(
            capability
                .input_contract
                .iter()
                .chain(&capability.output_contract)
                .cloned(),
        );
    }
    let facets: Vec<Value> = used_facets
        .iter()
        .filter_map(|name| registry.facets.get(name))
        .map(|facet| json!({"name": facet.name, "direction": facet.direction, "requiredByDefault": facet.required_by_default, "description": facet.description, "schema": facet.schema}))
        .collect();
    let previous: Vec<Value> = rejected_attempts
        .iter()
        .map(|bundle| json!({"failures": bundle.failures, "warnings": bundle.warnings}))
        .collect();
    let mut user = json!({
        "objective": envelope.objective,
        "outputContract": envelope.output_contract,
        "suppliedFacets": supplied_facets(envelope, registry),
        "otherInputs": envelope.inputs.keys().filter(|key| !registry.facets.contains(key)).collect::<Vec<_>>(),
        "policies": envelope.policies,
        // The whole envelope is the planner's to read: the caller's
        // constraints (secret-looking keys redacted, as the nodes get them),
        // its special instructions, and how a plan is scored.
        "constraints": crate::basics::redaction::redact(
            &serde_json::to_value(&envelope.constraints).unwrap_or_default()
        ),
        "specialInstructions": envelope.special_instructions,
        "scoring": planner_scoring(envelope),
        "capabilities": capabilities,
        "facets": facets,
        "previousAttempts": previous,
    });
    if let Some(replan) = replan {
        user["replan"] = replan;
    }
    ModelRequest {
        system_instruction: PLANNER_INSTRUCTIONS.to_string(),
        user_message: user.to_string(),
        schema_name: "plan_draft".to_string(),
        output_schema: Arc::new(plan_draft_schema()),
        model: planner_model(registry),
    }
}

/// The catalogue a planning model reads: every capability but the
/// catch-alls (a catch-all is never planned: only a failed node reaches it).
pub fn planner_catalogue(registry: &Registry) -> Vec<Value> {
    registry
        .capabilities()
        .filter(|capability| !capability.catch_all)
        .map(|capability| {
            json!({
                "capabilityId": capability.capability_id,
                "agentType": capability.agent_type,
                "kind": capability.kind,
                "summary": capability.summary,
                "inputContract": capability.input_contract,
                "outputContract": capability.output_contract,
                "cost": capability.cost,
            })
        })
        .collect()
}

/// The catalog's planner model, when it names one the catalog has.
pub fn planner_model(
    registry: &Registry,
) -> Option<Box<crate::contracts::model_request::ModelTarget>> {
    registry
        .models()
        .planner_model
        .as_deref()
        .and_then(|name| crate::planning::model_choice::target_of(registry.models(), name))
        .map(Box::new)
}

/// How the planner's plan is judged: the optimisation objective (what it
/// asks of the plan, in words) and the weights of the satisfaction score
/// (`diagnostics::satisfaction_score`).
fn planner_scoring(envelope: &TaskEnvelope) -> Value {
    use crate::contracts::policies::OptimisationObjective;
    let objective = envelope
        .policies
        .planner_optimisation()
        .and_then(|optimisation| optimisation.objective);
    let asks = match objective {
        Some(OptimisationObjective::Speed) => {
            "the fewest nodes and the shortest chain of dependencies"
        }
        Some(OptimisationObjective::Quality) => {
            "the most capable (higher cost tier) capabilities, and a reviewer where one fits"
        }
        Some(OptimisationObjective::Diversity) => {
            "several variants of each goal facet that is a list, from different capabilities where the catalogue has them"
        }
        Some(OptimisationObjective::TokenEfficiency) => {
            "the capabilities with the lowest declared token estimates"
        }
        None => "the cheapest plan that covers the contract",
    };
    json!({
        "objective": objective,
        "objectiveAsks": asks,
        "hardConstraintWeight": crate::contracts::diagnostics::HARD_WEIGHT,
        "softConstraintWeight": crate::contracts::diagnostics::SOFT_WEIGHT,
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DraftNode {
    node_id: String,
    capability_id: String,
    #[serde(default)]
    depends_on: Vec<String>,
}

#[derive(Deserialize)]
struct Draft {
    nodes: Vec<DraftNode>,
}

/// Turns a model's draft into a plan (ordered by `dependsOn`), or the
/// diagnostics that make it unusable before validation even starts.
pub fn plan_from_draft(
    answer: &str,
    envelope: &TaskEnvelope,
    registry: &Registry,
    model: &str,
) -> Result<PlanGraph, Vec<PlanDiagnostic>> {
    let draft: Draft = serde_json::from_str(answer).map_err(|error| {
        vec![PlanDiagnostic::structural(
            "draft.shape",
            "the draft matches the plan draft schema",
            format!("The answer is not a plan draft: {error}."),
        )]
    })?;
    let mut diagnostics = Vec::new();
    let mut seen = BTreeSet::new();
    for node in &draft.nodes {
        if !seen.insert(node.node_id.as_str()) {
            diagnostics.push(
                PlanDiagnostic::structural(
                    "structure.unique_node_ids",
                    "node ids are unique",
                    format!("Rename the second `{}`.", node.node_id),
                )
                .with_node(&node.node_id),
            );
        }
        if registry.capability(&node.capability_id).is_none() {
            diagnostics.push(
                PlanDiagnostic::hard(
                    "structure.capability_exists",
                    DiagnosticCause::MissingProducer,
                    "every node names a registered capability",
                )
                .with_node(&node.node_id)
                .with_capability(&node.capability_id)
                .with_suggestion(format!(
                    "`{}` is not in the catalogue; pick one of its capabilityIds.",
                    node.capability_id
                )),
            );
        }
        for dependency in &node.depends_on {
            if !draft.nodes.iter().any(|other| &other.node_id == dependency) {
                diagnostics.push(
                    PlanDiagnostic::structural(
                        "structure.edges_reference_nodes",
                        "dependsOn names nodes of the draft",
                        format!("`{}` depends on unknown node `{dependency}`.", node.node_id),
                    )
                    .with_node(&node.node_id),
                );
            }
        }
    }
    if !diagnostics.is_empty() {
        return Err(diagnostics);
    }
    // Kahn's algorithm over dependsOn, keeping the draft's order among ready nodes.
    let mut remaining: BTreeMap<&str, usize> = draft
        .nodes
        .iter()
        .map(|node| (node.node_id.as_str(), node.depends_on.len()))
        .collect();
    let mut ordered: Vec<(String, String)> = Vec::new();
    while ordered.len() < draft.nodes.len() {
        let Some(next) = draft
            .nodes
            .iter()
            .find(|node| remaining.get(node.node_id.as_str()) == Some(&0))
        else {
            let cyclic: Vec<&str> = remaining.keys().copied().collect();
            return Err(vec![PlanDiagnostic::structural(
                "structure.acyclic",
                "the plan is a directed acyclic graph",
                format!(
                    "dependsOn forms a cycle among {}; a facet must be produced before it is consumed.",
                    cyclic.join(", ")
                ),
            )]);
        };
        remaining.remove(next.node_id.as_str());
        for node in &draft.nodes {
            if node
                .depends_on
                .iter()
                .any(|dependency| dependency == &next.node_id)
                && let Some(count) = remaining.get_mut(node.node_id.as_str())
            {
                *count -= 1;
            }
        }
        ordered.push((next.node_id.clone(), next.capability_id.clone()));
    }
    assemble_plan(
        envelope,
        registry,
        &ordered,
        LLM_PLANNER_RUNTIME,
        Some(model.to_string()),
    )
    .map_err(|error| {
        vec![PlanDiagnostic::structural(
            "structure.contracts",
            "node contracts compile",
            error.to_string(),
        )]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::basics::schema::compile_schema;

    #[test]
    fn the_request_carries_the_constraints_special_instructions_and_scoring() {
        let envelope = TaskEnvelope::parse_value(&json!({
            "objective": "o",
            "inputs": {},
            "constraints": {"qualityThreshold": 0.8, "maxTurns": 4, "apiKey": "hidden-value"},
            "specialInstructions": ["Keep it short."],
            "policies": {"planner": {"optimisation": {"objective": "token_efficiency"}}},
            "outputContract": {"schema": {"type": "object"}}
        }))
        .unwrap();
        let request = planner_request(&envelope, &Registry::default(), &[]);
        let user: Value = serde_json::from_str(&request.user_message).unwrap();
        assert_eq!(user["constraints"]["qualityThreshold"], 0.8);
        assert_eq!(user["constraints"]["maxTurns"], 4);
        assert!(
            !request.user_message.contains("hidden-value"),
            "a secret-looking constraint is redacted: {}",
            user["constraints"]
        );
        assert_eq!(user["specialInstructions"], json!(["Keep it short."]));
        assert_eq!(user["scoring"]["objective"], "token_efficiency");
        assert_eq!(user["scoring"]["hardConstraintWeight"], 1.0);
        assert_eq!(user["scoring"]["softConstraintWeight"], 0.5);
        assert!(
            user["scoring"]["objectiveAsks"]
                .as_str()
                .unwrap()
                .contains("token"),
            "{}",
            user["scoring"]
        );
    }

    #[test]
    fn the_draft_schema_compiles() {
        compile_schema(&plan_draft_schema(), "plan draft").unwrap();
    }
}
