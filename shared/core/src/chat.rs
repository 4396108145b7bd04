//! Chat mode: one message of a conversation thread is a run whose plan is
//! one agent node. The orchestrator's own chat agent is registry data
//! (`registry/chat.json`: its instructions, tools and limits, the question a
//! blank message gets, how many earlier exchanges a turn sees); a caller
//! may instead talk to a registered specialist (`agent`), whose own
//! instructions are then the whole system prompt. The thread's earlier
//! exchanges travel in the run (`ChatTurn.history`) and are replayed before
//! the new message; the answer is free text, delivered as
//! `{message, threadId}`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::agents::{AgentLoopSettings, DEFAULT_MAX_ITERATIONS, DEFAULT_MAX_TOOL_CALLS_PER_TURN};
use crate::capability::{AgentType, NodeKind};
use crate::compiler::CompiledContract;
use crate::compiler::schema_key_of;
use crate::envelope::TaskEnvelope;
use crate::plan::{PlanGraph, PlanNode};
use crate::registry::Registry;

/// The capability id a plan records for the orchestrator's own chat agent.
pub const ORCHESTRATOR_CHAT_AGENT: &str = "baton.chat";

/// The orchestrator's chat agent and chat defaults (`registry/chat.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChatSettings {
    /// The orchestrator agent's system prompt.
    pub instructions: String,
    /// The tools it may call (registry names).
    #[serde(default)]
    pub tools: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tool_calls_per_turn: Option<u32>,
    #[serde(default)]
    pub parallel_tools: bool,
    /// What a blank message is answered with (no model call).
    pub clarifying_question: String,
    /// Earlier exchanges a turn sees (the most recent ones).
    #[serde(default = "default_history_limit")]
    pub history_limit: usize,
    /// The reviewer's system prompt for `agent_create_plan`'s
    /// `agent_review` mode.
    #[serde(default = "default_plan_review_instructions")]
    pub plan_review_instructions: String,
}

fn default_plan_review_instructions() -> String {
    "You review an execution plan before it runs. Approve it when its steps can produce what the objective asks for; otherwise reject it or say what must change, in one or two sentences.".into()
}

fn default_history_limit() -> usize {
    20
}

impl ChatSettings {
    /// Checks the settings against the registry's tools; an error is
    /// `(JSON path, message)`.
    pub fn check(&self, registry: &Registry) -> Result<(), (String, String)> {
        if self.instructions.trim().is_empty() {
            return Err((
                "$.instructions".into(),
                "the agent needs instructions".into(),
            ));
        }
        if self.clarifying_question.trim().is_empty() {
            return Err((
                "$.clarifyingQuestion".into(),
                "a blank message needs a question to answer it with".into(),
            ));
        }
        for (index, tool) in self.tools.iter().enumerate() {
            if registry.tool(tool).is_none() {
                return Err((
                    format!("$.tools[{index}]"),
                    format!("no tool `{tool}` in the registry"),
                ));
            }
        }
        Ok(())
    }
}

/// One earlier exchange of a thread: what the person said and the answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatExchange {
    /// The run that answered (exchanges are recorded once per run).
    pub run_id: String,
    /// When it was answered (Unix ms): a thread is ordered by it.
    pub at_millis: u64,
    pub user: String,
    pub assistant: String,
    /// The specialist that answered, when not the orchestrator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Plans drafted for approval and not run yet, after this exchange.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drafts: Vec<crate::plan_tool::PlanDraft>,
}

/// A chat run's message and what it needs of its thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatTurn {
    pub thread_id: String,
    pub message: String,
    /// The specialist to talk to (a registered capability), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_type: Option<String>,
    /// The thread's most recent exchanges, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<ChatExchange>,
    /// Drafted plans awaiting the person's approval (an `auto_execute`
    /// call with the same objective runs one and takes it off the list).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_drafts: Vec<crate::plan_tool::PlanDraft>,
    /// Plans drafted during this message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub new_drafts: Vec<crate::plan_tool::PlanDraft>,
}

impl ChatTurn {
    /// Whether there is nothing to answer but a question back.
    pub fn is_blank(&self) -> bool {
        self.message.trim().is_empty()
    }
}

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

/// The output every chat run delivers.
pub fn chat_output_schema() -> Value {
    json!({
        "type": "object",
        "required": ["message", "threadId"],
        "properties": {"message": {"type": "string"}, "threadId": {"type": "string"}},
        "additionalProperties": false
    })
}

/// The envelope of a chat run (its objective is the message).
pub fn chat_envelope(turn: &ChatTurn) -> Result<TaskEnvelope, crate::CoreError> {
    let objective = if turn.is_blank() {
        "(a blank chat message)".to_string()
    } else {
        turn.message.clone()
    };
    TaskEnvelope::parse_value(&json!({
        "objective": objective,
        "outputContract": {"schema": chat_output_schema()},
        "threadId": turn.thread_id,
    }))
}

/// The one-node plan of a chat run: the orchestrator's agent (with the
/// context type's guidance) or the specialist (its own instructions only).
pub fn chat_plan(turn: &ChatTurn, registry: &Registry) -> Result<PlanGraph, String> {
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
            executor: crate::plan::NodeExecutor::Chat(agent),
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
            instructions,
            variant: None,
            allows_clarify: false,
            task_surface: None,
            quality_score: None,
        }],
        edges: Vec::new(),
        supplied_facets: Vec::new(),
        goal_facets: vec!["message".to_string(), "threadId".to_string()],
        metadata: serde_json::Map::new(),
    })
}
