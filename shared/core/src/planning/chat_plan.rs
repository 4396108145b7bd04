//! What a chat message needs of the registry: whether it may be asked
//! (the agent and context type it names), and its one-node plan (the
//! orchestrator's chat agent with the context type's guidance, or the
//! specialist it names).

use std::sync::Arc;

use serde_json::json;

use crate::basics::schema::schema_key_of;
use crate::catalog::registry::Registry;
use crate::contracts::capability::{AgentType, NodeKind};
use crate::contracts::compiler::CompiledContract;
use crate::planning::plan::{PlanGraph, PlanNode};
use crate::records::agents::{
    AgentLoopSettings, DEFAULT_MAX_ITERATIONS, DEFAULT_MAX_TOOL_CALLS_PER_TURN,
};
use crate::records::chat::{ChatTurn, ORCHESTRATOR_CHAT_AGENT, chat_output_schema};

/// What a chat message asked for that cannot be: `(JSON path, message)`.
pub fn check_chat_request(
    registry: &Registry,
    agent: Option<&str>,
    context_type: Option<&str>,
) -> Result<(), (String, String)> {
    if registry.chat_settings().is_none() {
        return Err((
            "$".into(),
            "this registry has no chat agent (`registry/chat.json`)".into(),
        ));
    }
    if let Some(agent) = agent {
        let usable = registry.capability(agent).is_some_and(|capability| {
            capability.agent_type == AgentType::Ai && capability.panel.is_none()
        });
        if !usable {
            return Err((
                "$.agent".into(),
                format!("`{agent}` is not a registered AI capability"),
            ));
        }
    }
    if let Some(context_type) = context_type
        && registry.context_guidance(context_type).is_none()
    {
        return Err((
            "$.contextType".into(),
            format!("`{context_type}` is not a context type of this registry"),
        ));
    }
    Ok(())
}

/// The one-node plan of a chat run: the orchestrator's agent (with the
/// context type's guidance) or the specialist (its own instructions only).
pub fn chat_plan(
    turn: &ChatTurn,
    registry: &Registry,
) -> Result<PlanGraph, crate::basics::error::Refusal> {
    let settings = registry
        .chat_settings()
        .ok_or("this registry has no chat agent (`registry/chat.json`)")?;
    let (capability_id, label, instructions, agent) = match &turn.agent {
        Some(agent) => {
            let capability = registry
                .capability(agent)
                .ok_or_else(|| format!("`{agent}` is not a registered capability"))?;
            let instructions = capability
                .instructions
                .clone()
                .unwrap_or_else(|| capability.summary.clone());
            let loop_settings = AgentLoopSettings::of(capability).unwrap_or(AgentLoopSettings {
                tools: Vec::new(),
                max_iterations: DEFAULT_MAX_ITERATIONS,
                max_tool_calls_per_turn: DEFAULT_MAX_TOOL_CALLS_PER_TURN,
                parallel_tools: false,
            });
            (
                agent.clone(),
                capability.display_name.clone(),
                instructions,
                loop_settings,
            )
        }
        None => {
            let mut instructions = settings.instructions.clone();
            if !turn.pending_drafts.is_empty() {
                instructions.push_str("\n\nPlans drafted earlier in this conversation await the person's approval (nothing has run):");
                for draft in &turn.pending_drafts {
                    instructions.push_str(&format!("\n- {}: {}", draft.draft_id, draft.objective));
                }
                instructions.push_str("\nWhen the person approves one, call agent_create_plan with execution_mode auto_execute and exactly that objective: the drafted plan runs.");
            }
            if let Some(entity_id) = &turn.entity_id {
                instructions.push_str(&format!(
                    "\n\nThe conversation is about the entity `{entity_id}`: it is the default scope of the plans you create."
                ));
            }
            if !turn.inputs.is_empty() {
                let names: Vec<&str> = turn.inputs.keys().map(String::as_str).collect();
                instructions.push_str(&format!(
                    "\n\nThe person gave these inputs, which the plans you create receive: {}.",
                    names.join(", ")
                ));
            }
            if let Some(guidance) = turn
                .context_type
                .as_deref()
                .and_then(|context_type| registry.context_guidance(context_type))
            {
                instructions.push_str("\n\n");
                instructions.push_str(&guidance.prompt_section());
            }
            (
                ORCHESTRATOR_CHAT_AGENT.to_string(),
                "Chat".to_string(),
                instructions,
                AgentLoopSettings {
                    tools: settings.tools.clone(),
                    max_iterations: settings
                        .max_iterations
                        .unwrap_or(DEFAULT_MAX_ITERATIONS)
                        .max(1),
                    max_tool_calls_per_turn: settings
                        .max_tool_calls_per_turn
                        .unwrap_or(DEFAULT_MAX_TOOL_CALLS_PER_TURN)
                        .max(1),
                    parallel_tools: settings.parallel_tools,
                },
            )
        }
    };
    let open = json!({"type": "object"});
    let output = chat_output_schema();
    Ok(PlanGraph {
        plan_version: 1,
        planner_runtime: "chat".to_string(),
        planner_model: None,
        nodes: vec![PlanNode {
            node_id: "node_1".to_string(),
            capability_id,
            label,
            kind: NodeKind::Execution,
            executor: crate::planning::plan::NodeExecutor::Chat(agent),
            derived: false,
            input_facets: Vec::new(),
            output_facets: vec!["message".to_string(), "threadId".to_string()],
            input_contract: CompiledContract {
                schema_key: schema_key_of(&open),
                schema: Arc::new(open),
                provenance: Default::default(),
            },
            output_contract: CompiledContract {
                schema_key: schema_key_of(&output),
                schema: Arc::new(output),
                provenance: Default::default(),
            },
            instructions: instructions.into(),
            variant: None,
            allows_clarify: false,
            guard: None,
            task_surface: None,
            quality_score: None,
            remember: Vec::new(),
            model: crate::planning::model_choice::model_for_chat(
                turn.agent
                    .as_deref()
                    .and_then(|agent| registry.capability(agent)),
                settings,
                turn.context_type
                    .as_deref()
                    .and_then(|context_type| registry.context_guidance(context_type))
                    .and_then(|guidance| guidance.profile.as_deref()),
                registry.models(),
            ),
        }],
        edges: Vec::new(),
        supplied_facets: Vec::new(),
        goal_facets: vec!["message".to_string(), "threadId".to_string()],
        metadata: serde_json::Map::new(),
    })
}
