//! The turn-by-turn orchestrator's sans-IO half
//! (`policies.planner.turnByTurn`): the request that asks an orchestrator
//! model for one decision, the union it must answer with (`handoff` to one
//! capability, `plan_update` with nodes to add, or `final`), the reading of
//! that answer (each fault a diagnostic naming its field, for the
//! re-prompt), and the plan draft a decision makes of the plan in force.
//!
//! The union is one flat object (`action` says which branch), so that
//! providers whose structured output takes no `oneOf` can still be asked
//! for it; each branch's own fields are checked here.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::catalog::registry::Registry;
use crate::contracts::diagnostics::{DiagnosticCause, DiagnosticsBundle, PlanDiagnostic};
use crate::contracts::envelope::TaskEnvelope;
use crate::contracts::model_request::ModelRequest;
use crate::planning::plan::PlanGraph;

/// The request's schema name: the shell and the test doubles tell a turn
/// from a plan draft by it.
pub const TURN_SCHEMA_NAME: &str = "orchestrator_turn";

const ORCHESTRATOR_INSTRUCTIONS: &str = "You are an orchestrator. You never write the work yourself \
and you call no tools: each turn you decide exactly one action. `handoff`: give the next piece of work \
to one capability of the catalogue (`capabilityId`; `to` names it for people; `payload` is what you want \
it to know, as an object). `plan_update`: add several nodes at once (`planPatch.nodes`, each with a new \
`nodeId`, a `capabilityId` and `dependsOn` naming earlier nodes). `final`: the work is done; the output \
contract is assembled from what the nodes produced (`bundle.summary` says what was done, \
`bundle.artifacts` names the facets delivered). Hand off only to a capability whose required input \
facets are supplied or already produced. Decide `final` only when every top-level property of the \
output contract has been produced. If previous answers were refused, fix what each refusal names.";

/// The JSON Schema of one decision.
pub fn turn_decision_schema() -> Value {
    json!({
        "type": "object",
        "required": ["action"],
        "properties": {
            "action": {"type": "string", "enum": ["handoff", "plan_update", "final"]},
            "to": {"type": "string"},
            "capabilityId": {"type": "string"},
            "payload": {"type": "object"},
            "planPatch": {
                "type": "object",
                "required": ["nodes"],
                "properties": {"nodes": crate::planning::llm_planner::draft_nodes_schema()},
                "additionalProperties": false
            },
            "bundle": {
                "type": "object",
                "properties": {
                    "summary": {"type": "string"},
                    "artifacts": {"type": "array", "items": {"type": "string"}}
                },
                "additionalProperties": false
            },
            "note": {"type": "string"}
        },
        "additionalProperties": false
    })
}

/// One decision of the orchestrator, read and checked.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnDecision {
    /// Work for one capability, with what the orchestrator hands it.
    Handoff {
        capability_id: String,
        payload: Option<Value>,
        note: Option<String>,
    },
    /// Nodes to add: `(nodeId, capabilityId, dependsOn)`.
    PlanUpdate {
        nodes: Vec<(String, String, Vec<String>)>,
        note: Option<String>,
    },
    /// The work is done.
    Final { summary: Option<String> },
}

impl TurnDecision {
    /// `handoff`, `plan_update` or `final`.
    pub fn action(&self) -> &'static str {
        match self {
            TurnDecision::Handoff { .. } => "handoff",
            TurnDecision::PlanUpdate { .. } => "plan_update",
            TurnDecision::Final { .. } => "final",
        }
    }

    /// The orchestrator's own words about the decision.
    pub fn note(&self) -> Option<&str> {
        match self {
            TurnDecision::Handoff { note, .. } | TurnDecision::PlanUpdate { note, .. } => {
                note.as_deref()
            }
            TurnDecision::Final { summary } => summary.as_deref(),
        }
    }
}

/// The request for turn `turn` of `max_turns`: the envelope, the catalogue,
/// `progress` (the plan so far, each node's status, the facets produced and
/// their values) and the refusals of this turn's earlier answers.
pub fn turn_request(
    envelope: &TaskEnvelope,
    registry: &Registry,
    (turn, max_turns): (u32, u32),
    progress: Value,
    refused: &[DiagnosticsBundle],
) -> ModelRequest {
    let capabilities = crate::planning::llm_planner::planner_catalogue(registry);
    let refusals: Vec<Value> = refused
        .iter()
        .map(|bundle| json!({"failures": bundle.failures}))
        .collect();
    let user = json!({
        "objective": envelope.objective,
        "outputContract": envelope.output_contract,
        "constraints": crate::basics::redaction::redact(
            &serde_json::to_value(&envelope.constraints).unwrap_or_default()
        ),
        "specialInstructions": envelope.special_instructions,
        "turn": turn,
        "maxTurns": max_turns,
        "progress": progress,
        "capabilities": capabilities,
        "refusedAnswers": refusals,
    });
    ModelRequest {
        system_instruction: ORCHESTRATOR_INSTRUCTIONS.to_string(),
        user_message: user.to_string(),
        schema_name: TURN_SCHEMA_NAME.to_string(),
        output_schema: Arc::new(turn_decision_schema()),
        model: crate::planning::llm_planner::planner_model(registry),
    }
}

fn refused(field: &str, suggestion: String) -> PlanDiagnostic {
    PlanDiagnostic::hard(
        format!("turn.{field}"),
        DiagnosticCause::SchemaIncompatible,
        "the decision is one of handoff, plan_update or final, with that action's fields",
    )
    .with_suggestion(suggestion)
}

fn text(value: &Value, field: &str) -> Option<String> {
    value[field]
        .as_str()
        .map(str::trim)
        .filter(|text| !text.is_empty())
        .map(str::to_string)
}

/// Reads the model's answer as a decision; what is wrong is said per field.
pub fn read_decision(
    answer: &str,
    registry: &Registry,
) -> Result<TurnDecision, Vec<PlanDiagnostic>> {
    let value: Value = serde_json::from_str(answer).map_err(|error| {
        vec![refused(
            "shape",
            format!("The answer is not JSON: {error}."),
        )]
    })?;
    let note = text(&value, "note");
    let usable = |capability_id: &str| {
        registry
            .capability(capability_id)
            .is_some_and(|capability| !capability.catch_all)
    };
    match value["action"].as_str() {
        Some("handoff") => {
            let Some(capability_id) = text(&value, "capabilityId") else {
                return Err(vec![refused(
                    "capabilityId",
                    "A handoff names `capabilityId`.".into(),
                )]);
            };
            if !usable(&capability_id) {
                return Err(vec![refused(
                    "capabilityId",
                    format!("`{capability_id}` is not a capability of the catalogue; hand off to one of its capabilityIds."),
                )
                .with_capability(&capability_id)]);
            }
            let payload = value
                .get("payload")
                .filter(|payload| !payload.is_null())
                .cloned();
            if payload.as_ref().is_some_and(|payload| !payload.is_object()) {
                return Err(vec![refused("payload", "`payload` is an object.".into())]);
            }
            Ok(TurnDecision::Handoff {
                capability_id,
                payload,
                note,
            })
        }
        Some("plan_update") => {
            let Some(listed) = value["planPatch"]["nodes"]
                .as_array()
                .filter(|nodes| !nodes.is_empty())
            else {
                return Err(vec![refused(
                    "planPatch",
                    "A plan_update lists `planPatch.nodes`.".into(),
                )]);
            };
            let mut nodes = Vec::new();
            let mut problems = Vec::new();
            for (index, node) in listed.iter().enumerate() {
                let (Some(node_id), Some(capability_id)) =
                    (text(node, "nodeId"), text(node, "capabilityId"))
                else {
                    problems.push(refused(
                        "planPatch.nodes",
                        format!("planPatch.nodes[{index}] needs `nodeId` and `capabilityId`."),
                    ));
                    continue;
                };
                if !usable(&capability_id) {
                    problems.push(
                        refused(
                            "planPatch.nodes",
                            format!("planPatch.nodes[{index}]: `{capability_id}` is not a capability of the catalogue."),
                        )
                        .with_capability(&capability_id),
                    );
                    continue;
                }
                let depends_on = node["dependsOn"]
                    .as_array()
                    .map(|ids| {
                        ids.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default();
                nodes.push((node_id, capability_id, depends_on));
            }
            if problems.is_empty() {
                Ok(TurnDecision::PlanUpdate { nodes, note })
            } else {
                Err(problems)
            }
        }
        Some("final") => Ok(TurnDecision::Final {
            summary: text(&value["bundle"], "summary").or(note),
        }),
        _ => Err(vec![refused(
            "action",
            "`action` is `handoff`, `plan_update` or `final`.".into(),
        )]),
    }
}

/// The plan draft a `handoff` or `plan_update` makes of the plan in force
/// (none before the first turn): its nodes (built-in ones are assembled
/// again), then the decision's. `turn` names a handoff's node
/// (`turn_{turn}`). None for `final`.
pub fn draft_after(
    decision: &TurnDecision,
    in_force: Option<&PlanGraph>,
    turn: u32,
) -> Option<String> {
    let mut nodes: Vec<Value> = in_force
        .map(|plan| {
            plan.nodes
                .iter()
                .filter(|node| node.builtin().is_none())
                .map(|node| {
                    let depends_on: Vec<&str> = plan.upstream_of(&node.node_id).into_iter().collect();
                    json!({"nodeId": node.node_id, "capabilityId": node.capability_id, "dependsOn": depends_on})
                })
                .collect()
        })
        .unwrap_or_default();
    let kept: Vec<String> = nodes
        .iter()
        .filter_map(|node| node["nodeId"].as_str().map(str::to_string))
        .collect();
    match decision {
        TurnDecision::Handoff { capability_id, .. } => {
            nodes.push(json!({"nodeId": format!("turn_{turn}"), "capabilityId": capability_id, "dependsOn": kept}));
        }
        TurnDecision::PlanUpdate { nodes: added, .. } => {
            for (node_id, capability_id, depends_on) in added {
                nodes.push(json!({"nodeId": node_id, "capabilityId": capability_id, "dependsOn": depends_on}));
            }
        }
        TurnDecision::Final { .. } => return None,
    }
    Some(json!({"nodes": nodes}).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::basics::schema::compile_schema;

    #[test]
    fn the_decision_schema_compiles_and_takes_each_branch() {
        let validator = compile_schema(&turn_decision_schema(), "$")
            .unwrap_or_else(|error| unreachable!("{error}"));
        for decision in [
            json!({"action": "handoff", "capabilityId": "a.b", "payload": {"x": 1}}),
            json!({"action": "plan_update", "planPatch": {"nodes": [{"nodeId": "n", "capabilityId": "a.b"}]}}),
            json!({"action": "final", "bundle": {"summary": "done"}}),
        ] {
            assert!(validator.is_valid(&decision), "{decision}");
        }
        assert!(!validator.is_valid(&json!({"action": "goto"})));
    }

    #[test]
    fn a_decision_missing_its_fields_is_refused_naming_them() {
        let registry = Registry::default();
        for (answer, field) in [
            (r#"{"action": "handoff"}"#, "turn.capabilityId"),
            (
                r#"{"action": "handoff", "capabilityId": "nobody.here"}"#,
                "turn.capabilityId",
            ),
            (
                r#"{"action": "plan_update", "planPatch": {"nodes": []}}"#,
                "turn.planPatch",
            ),
            (r#"{"action": "sleep"}"#, "turn.action"),
            ("not json", "turn.shape"),
        ] {
            let refused = read_decision(answer, &registry).err().unwrap_or_default();
            assert_eq!(refused[0].constraint_id.as_deref(), Some(field), "{answer}");
        }
        assert_eq!(
            read_decision(r#"{"action": "final", "note": "all there"}"#, &registry),
            Ok(TurnDecision::Final {
                summary: Some("all there".into())
            })
        );
    }

    #[test]
    fn max_turns_outside_one_to_fifty_is_refused_naming_its_path() {
        for turns in [0, 51] {
            let error = TaskEnvelope::parse_value(&json!({
                "objective": "x", "outputContract": {"schema": {}},
                "policies": {"planner": {"turnByTurn": {"maxTurns": turns}}}
            }))
            .err()
            .unwrap_or_else(|| unreachable!("{turns} was taken"));
            assert_eq!(
                error.path(),
                Some("$.policies.planner.turnByTurn.maxTurns"),
                "{error}"
            );
        }
        let taken = TaskEnvelope::parse_value(&json!({
            "objective": "x", "outputContract": {"schema": {}},
            "policies": {"planner": {"turnByTurn": {}}}
        }))
        .unwrap_or_else(|error| unreachable!("{error}"));
        assert_eq!(
            taken
                .policies
                .turn_by_turn()
                .map(|policy| policy.max_turns()),
            Some(8)
        );
    }
}
