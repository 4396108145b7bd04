//! An `agent_create_plan` call's steps. `auto_execute`: one effect starts
//! the child run (its id and first decision chosen here, so a retried step
//! finds the run it created); the session then waits until the child's last
//! step tells it how it ended (`ChildRunEnded`), whose summary is the
//! call's result. `draft_only`: planned here, shown (`plan_ready_for_review`)
//! and kept for approval; a chat thread carries it to the next message, and
//! an `auto_execute` call with the same objective runs it. `agent_review`:
//! a reviewer's model call (`plan_review`) decides between running it and
//! returning the critique.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::basics::claims::ClaimKey;
use crate::basics::error::CoreError;
use crate::basics::instant::Instant;
use crate::contracts::envelope::TaskEnvelope;
use crate::engine::decision::NewRunIdentity;
use crate::engine::starts::start_run;
use crate::planning::plan::{PlanGraph, PlanNode};
use crate::planning::planner::plan_deterministically;
use crate::records::agents::{ParentLink, PendingToolCall, child_run_id, tool_idempotency_key};
use crate::records::conversation::ToolOutcome;
use crate::state::plan_tool::{ExecutionMode, PlanDraft, parse_plan_call, plan_review_schema};
use crate::state::run::RunState;
use crate::wire::frames::{self, AgentActivity};

use super::super::decision::EngineContext;
use super::super::effects::{Effect, ModelOutcome, StepAdvance};
use super::super::plan_lookup::{plan_node_in, plan_of};
use super::super::step_context::StepContext;
use super::calls::finish_call;
use crate::engine::effects::{ChildRunStart, PlanReviewCall};

/// The tool's registry name (its executor is the builtin operation).
const TOOL_NAME: &str = "agent_create_plan";

/// Where a call is: its session's node, turn and pending entry.
pub(super) struct CallSite<'s> {
    pub state: &'s RunState,
    pub node: &'s PlanNode,
    pub attempt: u32,
    pub turn: u32,
    pub pending: &'s PendingToolCall,
    pub now: Instant,
}

impl CallSite<'_> {
    /// Decides the call with `outcome` at once.
    fn answer(&self, engine: &EngineContext<'_>, outcome: ToolOutcome) -> StepAdvance {
        let mut step = StepContext::new(self.state.clone(), self.now, engine);
        self.finish(&mut step, outcome);
        step.into_advance()
    }

    fn finish(&self, step: &mut StepContext<'_, '_>, outcome: ToolOutcome) {
        let call_id = &self.pending.call_id;
        finish_call(
            step,
            self.node,
            self.attempt,
            self.turn,
            call_id,
            TOOL_NAME,
            outcome,
        );
    }

    fn child_start(&self, envelope: TaskEnvelope) -> ChildRunStart {
        // A re-applied step derives the same ids: the child's root span id
        // comes from its (deterministic) run id.
        fn derived_span_id(run_id: &str) -> u64 {
            use sha2::Digest;
            let digest = sha2::Sha256::digest(run_id.as_bytes());
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(&digest[..8]);
            u64::from_be_bytes(bytes)
        }
        let (node_id, call_id) = (&self.node.node_id, &self.pending.call_id);
        let run_id = child_run_id(&self.state.run_id, node_id, self.turn, call_id);
        let child_root_span_id = derived_span_id(&run_id);
        let mut child = start_run(
            NewRunIdentity {
                run_id,
                tenant_id: self.state.tenant_id.clone(),
                correlation_id: self.state.correlation_id.clone(),
                thread_id: self.state.thread_id.clone(),
                // The same trace: its root under this run's (the shell
                // moves it under the step's span when it exports spans).
                trace: self
                    .state
                    .trace
                    .map(|trace| trace.child(None, child_root_span_id)),
                // The same user as the run whose agent starts it.
                submitted_by: self.state.submitted_by.clone(),
            },
            envelope,
            self.now,
            self.state.max_node_attempts,
        );
        child.state.parent = Some(Box::new(ParentLink {
            run_id: self.state.run_id.clone(),
            node_id: node_id.clone(),
            attempt: self.attempt,
            turn: self.turn,
            call_id: call_id.clone(),
        }));
        for event in &mut child.events {
            event.parent_run_id = Some(self.state.run_id.clone());
        }
        ChildRunStart {
            node_id: node_id.clone(),
            attempt: self.attempt,
            turn: self.turn,
            call_id: call_id.clone(),
            claim_key: ClaimKey::ChildRunStart {
                node_id: node_id.clone(),
                turn: self.turn,
                call_id: call_id.clone(),
            },
            child: Box::new(child),
            idempotency_key: tool_idempotency_key(&self.state.run_id, node_id, self.turn, call_id),
            frames_before: Vec::new(),
        }
    }
}

/// The call's step: refuse it (the model reads why), draft, review or run.
pub(super) fn begin_plan_call(
    site: &CallSite<'_>,
    engine: &EngineContext<'_>,
) -> Result<StepAdvance, CoreError> {
    let mut call = match parse_plan_call(&site.pending.arguments, site.state, engine.registry) {
        Ok(call) => call,
        Err(message) => return Ok(site.answer(engine, ToolOutcome::failed(message))),
    };
    // Outputs not named exactly: the envelope keeps how they were resolved,
    // and every result of the call says it (the child run's summary too).
    let resolutions = call.resolutions_to_tell();
    if let Some(resolutions) = &resolutions {
        call.envelope
            .metadata
            .get_or_insert_with(Default::default)
            .insert("resolvedOutputs".into(), resolutions.clone());
    }
    // An approved draft runs as it was planned.
    let approved = pending_draft(site.state, &call.objective);
    if call.mode == ExecutionMode::AutoExecute
        && let Some(envelope) = approved
            .as_ref()
            .and_then(|draft| TaskEnvelope::parse_value(&draft.envelope).ok())
    {
        call.envelope = envelope;
    }
    // The run the call starts (an approved draft's too) is attributed to the mode that started it.
    if let Ok(serde_json::Value::String(mode)) = serde_json::to_value(call.mode) {
        call.envelope
            .metadata
            .get_or_insert_with(Default::default)
            .insert("executionMode".into(), serde_json::Value::String(mode));
    }
    if let Some(correction) = required_steps_missing(site.state, &call.envelope, engine) {
        return Ok(site.answer(engine, ToolOutcome::failed(correction)));
    }
    match call.mode {
        ExecutionMode::AutoExecute => Ok(StepAdvance::Perform(Effect::StartChildRun(Box::new(
            site.child_start(call.envelope),
        )))),
        ExecutionMode::DraftOnly => {
            let mut step = StepContext::new(site.state.clone(), site.now, engine);
            let mut outcome = keep_draft(&mut step, site, &call.objective, &call.envelope);
            if let (ToolOutcome::Succeeded(result), Some(resolutions)) =
                (&mut outcome, &resolutions)
            {
                result["resolvedOutputs"] = resolutions.clone();
            }
            site.finish(&mut step, outcome);
            Ok(step.into_advance())
        }
        ExecutionMode::AgentReview => {
            let Ok(plan) = plan_deterministically(&call.envelope, engine.registry) else {
                return Ok(site.answer(engine, ToolOutcome::Succeeded(unplannable())));
            };
            let settings = engine.registry.chat_settings();
            let reviewer = settings
                .map(|settings| settings.plan_review_instructions.clone())
                .unwrap_or_default();
            // The reviewer's profile's model (chat.json), else the default.
            let review_model = settings
                .and_then(|settings| {
                    crate::planning::model_choice::model_for_plan_review(
                        settings,
                        engine.registry.models(),
                    )
                })
                .map(Box::new);
            let mut draft = plan_summary(&plan);
            if let Some(resolutions) = &resolutions {
                draft["resolvedOutputs"] = resolutions.clone();
            }
            let request = crate::state::context::ModelRequest {
                system_instruction: reviewer,
                user_message: json!({"objective": call.objective, "plan": draft}).to_string(),
                schema_name: "plan_review".into(),
                output_schema: Arc::new(plan_review_schema()),
                model: review_model,
            };
            let then = site.child_start(call.envelope);
            Ok(StepAdvance::Perform(Effect::ReviewPlan(Box::new(
                PlanReviewCall {
                    claim_key: ClaimKey::PlanReview {
                        node_id: site.node.node_id.clone(),
                        turn: site.turn,
                        call_id: site.pending.call_id.clone(),
                    },
                    request,
                    draft,
                    then,
                },
            ))))
        }
    }
}

/// The conversation's context type requires steps in its plans
/// (`requiredPlanSteps`): what the plan `envelope` would run lacks, as
/// the correction the agent reads; `None` when nothing is required, or the
/// plan has them all in order (an envelope no plan covers is answered as
/// unplannable later).
fn required_steps_missing(
    state: &RunState,
    envelope: &TaskEnvelope,
    engine: &EngineContext<'_>,
) -> Option<String> {
    let guidance = state
        .chat
        .as_ref()
        .and_then(|chat| chat.context_type.as_deref())
        .and_then(|context_type| engine.registry.context_guidance(context_type))
        .filter(|guidance| !guidance.required_plan_steps.is_empty())?;
    let plan = plan_deterministically(envelope, engine.registry).ok()?;
    guidance.required_steps_missing(plan.nodes.iter().map(|node| node.capability_id.as_str()))
}

fn unplannable() -> Value {
    json!({
        "status": "plan_rejected",
        "message": "no plan covers the requested outputs with the registry's capabilities and the session's inputs",
    })
}

/// The nodes of a plan as the model and the reviewer read them.
fn plan_summary(plan: &PlanGraph) -> Value {
    let nodes: Vec<Value> = plan
        .nodes
        .iter()
        .map(|node| {
            json!({"nodeId": node.node_id, "capabilityId": node.capability_id, "label": node.label,
                   "consumes": node.input_facets, "produces": node.output_facets})
        })
        .collect();
    json!({"nodes": nodes, "goalFacets": plan.goal_facets})
}

/// A draft the thread keeps whose objective is `objective`.
fn pending_draft(state: &RunState, objective: &str) -> Option<PlanDraft> {
    let wanted = objective.trim().to_lowercase();
    state.chat.as_ref().and_then(|chat| {
        chat.pending_drafts
            .iter()
            .find(|draft| draft.objective.trim().to_lowercase() == wanted)
            .cloned()
    })
}

/// `draft_only`: plan now, show it, keep it for approval.
fn keep_draft(
    step: &mut StepContext<'_, '_>,
    site: &CallSite<'_>,
    objective: &str,
    envelope: &TaskEnvelope,
) -> ToolOutcome {
    let plan = match plan_deterministically(envelope, step.engine().registry) {
        Ok(plan) => plan,
        Err(_) => return ToolOutcome::Succeeded(unplannable()),
    };
    let draft_id = child_run_id(
        &site.state.run_id,
        &site.node.node_id,
        site.turn,
        &site.pending.call_id,
    );
    let summary = plan_summary(&plan);
    let reasoning = format!(
        "{} node(s) over the registry's capabilities produce {}; nothing runs until it is approved.",
        plan.nodes.len(),
        plan.goal_facets.join(", ")
    );
    let shown = frames::plan_ready_for_review(
        &step.stamp(),
        &site.node.node_id,
        &frames::PlanReadyForReviewPayload {
            draft_id: draft_id.clone(),
            objective: objective.to_string(),
            plan: summary.clone(),
            reasoning,
        },
    );
    step.emit(shown);
    if let Some(chat) = step.state_mut().chat.as_mut() {
        chat.new_drafts.push(PlanDraft {
            draft_id: draft_id.clone(),
            objective: objective.to_string(),
            envelope: serde_json::to_value(envelope).unwrap_or(Value::Null),
        });
    }
    ToolOutcome::Succeeded(json!({
        "status": "pending_review",
        "draftId": draft_id,
        "plan": summary,
        "message": "The plan is drafted and paused: nothing runs until the user approves it. If they approve, call agent_create_plan again with execution_mode auto_execute and the same objective.",
    }))
}

/// The child run was created (or found, on a retry): the session waits.
pub(in crate::engine) fn resume_child_started(
    state: RunState,
    start: &ChildRunStart,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Result<StepAdvance, CoreError> {
    let child_run_id = start.child.state.run_id.clone();
    let mut step = StepContext::new(state, now, engine);
    step.emit_all(start.frames_before.iter().cloned());
    if let Some(session) = step.state_mut().sessions.get_mut(&start.node_id)
        && let Some(call) = session
            .pending
            .iter_mut()
            .find(|call| call.call_id == start.call_id)
    {
        call.child_run_id = Some(child_run_id.clone());
    }
    if let Some(chat) = step.state_mut().chat.as_mut() {
        let objective = start.child.state.envelope.objective.trim().to_lowercase();
        chat.pending_drafts
            .retain(|draft| draft.objective.trim().to_lowercase() != objective);
    }
    let executing = frames::agent_state(
        &step.stamp(),
        &start.node_id,
        &frames::AgentStatePayload {
            state: AgentActivity::ExecutingPlan,
            turn: start.turn,
            context_type: super::session_frames::context_type(step.state()),
            child_run_id: Some(child_run_id),
            model: None,
        },
    );
    step.emit(executing);
    Ok(step.into_advance())
}

/// The child run ended: its summary is the call's result.
pub(in crate::engine) fn child_ended(
    state: &RunState,
    link: &ParentLink,
    summary: &Value,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Result<StepAdvance, CoreError> {
    let plan = plan_of(state)?;
    let node = plan_node_in(&plan, state, &link.node_id)?;
    let mut step = StepContext::new(state.clone(), now, engine);
    finish_call(
        &mut step,
        node,
        link.attempt,
        link.turn,
        &link.call_id,
        TOOL_NAME,
        ToolOutcome::Succeeded(summary.clone()),
    );
    Ok(step.into_advance())
}

/// The reviewer answered: run the plan when approved, else the critique is
/// the call's result.
pub(in crate::engine) fn resume_review(
    state: RunState,
    review: &PlanReviewCall,
    outcome: &ModelOutcome,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Result<StepAdvance, CoreError> {
    let start = &review.then;
    let verdict = match outcome {
        Ok(answer) => serde_json::from_str::<Value>(&answer.content)
            .ok()
            .filter(|verdict| verdict["verdict"].is_string()),
        _ => None,
    };
    let (decision, notes) = match &verdict {
        Some(verdict) => (
            verdict["verdict"].as_str().unwrap_or_default().to_string(),
            verdict["notes"].as_str().unwrap_or_default().to_string(),
        ),
        None => (
            "needs_changes".to_string(),
            "the reviewer gave no usable verdict; the plan did not run".to_string(),
        ),
    };
    let plan = plan_of(&state)?;
    let node = plan_node_in(&plan, &state, &start.node_id)?;
    let mut step = StepContext::new(state.clone(), now, engine);
    let reviewed = frames::plan_review(
        &step.stamp(),
        &start.node_id,
        &frames::PlanReviewPayload {
            verdict: decision.clone(),
            notes: notes.clone(),
            plan: review.draft.clone(),
        },
    );
    step.emit(reviewed);
    if decision == "approved" {
        // The review is said with the child's start, in the same commit.
        let mut start = start.clone();
        start.frames_before = step.take_frames();
        return Ok(StepAdvance::Perform(Effect::StartChildRun(Box::new(start))));
    }
    let outcome = ToolOutcome::Succeeded(json!({
        "status": decision, "notes": notes, "plan": review.draft,
        "message": "The reviewer did not approve the plan; it did not run.",
    }));
    finish_call(
        &mut step,
        node,
        start.attempt,
        start.turn,
        &start.call_id,
        TOOL_NAME,
        outcome,
    );
    Ok(step.into_advance())
}
