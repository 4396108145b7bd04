//! The `agent_create_plan` meta-tool: an agent's call becomes a task
//! envelope (the objective; each requested output a registry facet of the
//! output contract, named exactly or resolved from free text through the
//! registry's words, or, when the call names none, the output facet the
//! objective names best; the priority entities as a special instruction; the
//! session's inputs and context type), run as a child run of the session
//! (`auto_execute`), planned and kept for a person's approval
//! (`draft_only`), or critiqued by a reviewer before it runs
//! (`agent_review`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::basics::error::Refusal;
use crate::catalog::registry::Registry;
use crate::contracts::envelope::TaskEnvelope;
use crate::state::run::RunState;

/// How the call wants its plan used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionMode {
    /// Plan and run it now; the run's summary is the result.
    AutoExecute,
    /// Plan it and keep it for a person's approval.
    DraftOnly,
    /// Have a reviewer critique it; run it when approved.
    AgentReview,
}

/// A parsed `agent_create_plan` call.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanToolCall {
    pub objective: String,
    pub mode: ExecutionMode,
    pub envelope: TaskEnvelope,
    /// How each output became a facet (the tool's result says so when one
    /// was not named exactly).
    pub resolved: Vec<ResolvedOutput>,
}

/// A requested output and the facet it became.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedOutput {
    /// What the call asked for (the objective, when it named no output).
    pub requested: String,
    pub facet: String,
    /// `name` (the facet's name or title), `words` (the registry's facet
    /// sharing the most words with it) or `objective`.
    pub by: &'static str,
}

impl PlanToolCall {
    /// The resolutions to tell the model: none when every output was named.
    pub fn resolutions_to_tell(&self) -> Option<Value> {
        self.resolved
            .iter()
            .any(|resolved| resolved.by != "name")
            .then(|| serde_json::to_value(&self.resolved).unwrap_or(Value::Null))
    }
}

pub use crate::records::chat::PlanDraft;

/// Reads a call's arguments (already checked against the tool's schema):
/// an error is a message the model reads.
pub fn parse_plan_call(
    arguments: &Value,
    state: &RunState,
    registry: &Registry,
) -> Result<PlanToolCall, Refusal> {
    let objective = arguments["objective"]
        .as_str()
        .map(str::trim)
        .filter(|objective| !objective.is_empty())
        .ok_or("`objective` must say what to accomplish")?
        .to_string();
    let mode = match (
        arguments["execution_mode"].as_str(),
        arguments["auto_execute"].as_bool(),
    ) {
        (Some("draft_only"), _) => ExecutionMode::DraftOnly,
        (Some("agent_review"), _) => ExecutionMode::AgentReview,
        (Some(_), _) | (None, Some(true) | None) => ExecutionMode::AutoExecute,
        // The legacy flag: `auto_execute: false` asks for a draft.
        (None, Some(false)) => ExecutionMode::DraftOnly,
    };
    let requested: Vec<String> = arguments["requested_outputs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    let resolved = resolve_outputs(&objective, &requested, registry)?;
    let envelope = child_envelope(&objective, &resolved, arguments, state, registry)?;
    Ok(PlanToolCall {
        objective,
        mode,
        envelope: TaskEnvelope::parse_value(&envelope)
            .map_err(|error| format!("the plan's envelope is invalid: {error}"))?,
        resolved,
    })
}

/// Each requested output as a facet: by name or title, else the output
/// facet sharing the most words with it; with none requested, the output
/// facet the objective names best. An output that resolves to nothing is
/// an error the model reads (with the facets there are).
fn resolve_outputs(
    objective: &str,
    requested: &[String],
    registry: &Registry,
) -> Result<Vec<ResolvedOutput>, Refusal> {
    if requested.is_empty() {
        let Some(facet) = output_facet_by_words(registry, objective) else {
            return Err(format!(
                "name the deliverables in `requested_outputs` (facets of the registry; registry_search lists them): the objective names none of them, e.g. {}",
                output_facet_names(registry)
            )
            .into());
        };
        return Ok(vec![ResolvedOutput {
            requested: objective.to_string(),
            facet,
            by: "objective",
        }]);
    }
    let mut resolved: Vec<ResolvedOutput> = Vec::new();
    for output in requested {
        let (facet, by) = match facet_named(registry, output) {
            Some(facet) => (facet, "name"),
            None => match output_facet_by_words(registry, output) {
                Some(facet) => (facet, "words"),
                None => {
                    return Err(format!(
                        "`{output}` is not a facet of the registry; requested outputs are facets such as {}",
                        output_facet_names(registry)
                    )
                    .into());
                }
            },
        };
        if resolved.iter().all(|earlier| earlier.facet != facet) {
            resolved.push(ResolvedOutput {
                requested: output.clone(),
                facet,
                by,
            });
        }
    }
    Ok(resolved)
}

/// The output facet (not an input-only one) sharing the most words with
/// `text`, as `registry_search` ranks them.
fn output_facet_by_words(registry: &Registry, text: &str) -> Option<String> {
    crate::catalog::registry_search::facets_by_words(registry, text)
        .into_iter()
        .map(|(_, facet)| facet)
        .find(|facet| facet.direction != crate::contracts::facet::FacetDirection::Input)
        .map(|facet| facet.name.clone())
}

/// The facet a requested output names: its name, or its title, in any case.
fn facet_named(registry: &Registry, requested: &str) -> Option<String> {
    let wanted = requested.trim().to_lowercase();
    registry
        .facets
        .list()
        .find(|facet| facet.name.to_lowercase() == wanted || facet.title.to_lowercase() == wanted)
        .map(|facet| facet.name.clone())
}

fn child_envelope(
    objective: &str,
    resolved: &[ResolvedOutput],
    arguments: &Value,
    state: &RunState,
    registry: &Registry,
) -> Result<Value, Refusal> {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for output in resolved {
        if let Some(facet) = registry.facets.get(&output.facet) {
            properties.insert(output.facet.clone(), facet.schema.clone());
            required.push(Value::String(output.facet.clone()));
        }
    }
    let mut special_instructions: Vec<Value> = state
        .envelope
        .special_instructions
        .iter()
        .cloned()
        .map(Value::String)
        .collect();
    let entities: Vec<&str> = arguments["priority_entities"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if !entities.is_empty() {
        special_instructions.push(Value::String(format!(
            "Focus on these first: {}.",
            entities.join(", ")
        )));
    }
    let mut metadata = Map::new();
    if let Some(entity_id) = state
        .envelope
        .metadata
        .as_ref()
        .and_then(|parent| parent.get("entityId"))
    {
        metadata.insert("entityId".into(), entity_id.clone());
    }
    if let Some(context_type) = state
        .chat
        .as_ref()
        .and_then(|chat| chat.context_type.clone())
    {
        // The context's intent and required behaviours reach every node of
        // the child plan, as the caller's instructions do.
        if let Some(guidance) = registry.context_guidance(&context_type) {
            special_instructions.push(Value::String(guidance.prompt_section()));
        }
        metadata.insert("contextType".into(), Value::String(context_type));
    }
    Ok(json!({
        "objective": objective,
        "inputs": state.envelope.inputs,
        "specialInstructions": special_instructions,
        "outputContract": {"schema": {"type": "object", "required": required, "properties": properties}},
        "correlationId": state.correlation_id,
        "metadata": metadata,
    }))
}

fn output_facet_names(registry: &Registry) -> String {
    let names: Vec<String> = registry
        .facets
        .list()
        .filter(|facet| facet.direction != crate::contracts::facet::FacetDirection::Input)
        .map(|facet| format!("`{}`", facet.name))
        .take(12)
        .collect();
    names.join(", ")
}

/// What the reviewer of a plan (`agent_review`) answers.
pub fn plan_review_schema() -> Value {
    json!({
        "type": "object",
        "required": ["verdict", "notes"],
        "properties": {
            "verdict": {"type": "string", "enum": ["approved", "rejected", "needs_changes"]},
            "notes": {"type": "string"}
        },
        "additionalProperties": false
    })
}
