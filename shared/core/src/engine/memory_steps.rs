//! Memory in a run's steps.
//!
//! - **Recall.** A model node of a run whose envelope has
//!   `memory.recall` asks the shell to search first
//!   ([`Effect::RecallMemory`]); with what it found, the engine fits the
//!   best items into the node's request within the model's context budget
//!   (lowest ranked dropped first), quotes them under the
//!   `RECALLED_MEMORY_RULE` fence, and names them in a `memory_recalled`
//!   frame committed with the node's claim. A search that fails leaves the
//!   node to run without them, and the frame says why.
//! - **Remember.** The commit that completes a run (and only that one)
//!   records what it will remember and sends a `Remember` step; that step
//!   asks the shell to write the facets its capabilities mark `remember`
//!   ([`Effect::Remember`]) to `memory.rememberTo`, and records what was
//!   written, refused or failed, retrying a failing store on the
//!   notifications' schedule. No frame: `complete` stays the run's last.

use baton_memory::item::Provenance;

use crate::basics::error::CoreError;
use crate::basics::instant::Instant;
use crate::contracts::memory_use::{RecalledSnippet, recall_query};
use crate::planning::plan::PlanNode;
use crate::records::remembered::{MAX_REMEMBER_ATTEMPTS, RememberRecord};
use crate::state::context::{ContextBundle, build_model_request};
use crate::state::context_budget::{estimated_tokens, prompt_budget};
use crate::state::run::{NodeStatus, RunState, RunStatus, StepCommand, StepMessage};
use crate::wire::frames::{self, ExecutorType, MemoryRecalledPayload, RunPhase};

use super::decision::EngineContext;
use super::effects::{Effect, ModelCall, StepAdvance};
use super::memory_effects::{
    MemoryRecallCall, MemoryRemembering, RecallOutcome, RememberOutcome, RememberedFacet,
};
use super::plan_lookup::{claim_frames, plan_node_in, plan_of};
use super::step_context::StepContext;

/// Characters of a node's recall query at most (its instructions first).
const MAX_QUERY_CHARS: usize = 4_000;

/// The recall a model node makes before it runs, when the envelope asks
/// for one (boxed: the effect it becomes holds it so).
pub(super) fn recall_for(
    state: &RunState,
    node: &PlanNode,
    attempt: u32,
    bundle: &ContextBundle,
) -> Option<Box<MemoryRecallCall>> {
    let recall = state.envelope.memory.as_ref()?.recall.as_ref()?;
    Some(Box::new(MemoryRecallCall {
        node_id: node.node_id.clone(),
        attempt,
        namespaces: recall.namespaces.clone(),
        query: recall_query(&node.instructions, &bundle.inputs, MAX_QUERY_CHARS),
        limit: recall.per_node,
    }))
}

/// The model call a node makes with `bundle`, its claim's frames
/// followed by `more_frames`.
pub(super) fn model_call(
    state: &RunState,
    node: &PlanNode,
    attempt: u32,
    bundle: &ContextBundle,
    now: Instant,
    more_frames: Vec<crate::wire::event::EventDraft>,
) -> StepAdvance {
    // Claimed, not committed: the frames go with the claim; the state
    // learns the phase and the start time when the answer is committed.
    let phase = RunPhase::of_node(node.kind);
    let mut start_frames = claim_frames(state, node, attempt, ExecutorType::Ai, now);
    start_frames.extend(more_frames);
    StepAdvance::Perform(Effect::CallModel(ModelCall {
        node_id: node.node_id.clone(),
        attempt,
        request: build_model_request(node, bundle),
        start_frames,
        started_at_millis: now.unix_millis(),
        stream_deltas: phase.streams_text(),
    }))
}

/// The node's model call with what its recall found.
pub(super) fn resume_recall(
    state: RunState,
    call: &MemoryRecallCall,
    outcome: &RecallOutcome,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Result<StepAdvance, CoreError> {
    let plan = plan_of(&state)?;
    let node = plan_node_in(&plan, &state, &call.node_id)?;
    let mut bundle = crate::state::context::build_context_bundle(&state, node, engine.registry);
    let (found, unavailable) = match outcome {
        Ok(found) => (found.as_slice(), None),
        Err(failure) => (&[][..], Some(failure.message.clone())),
    };
    let kept = fitting(node, &bundle, found, engine);
    let trimmed = (found.len() - kept) as u32;
    bundle.recalled_memory = found[..kept].to_vec();
    let stamp = frames::FrameStamp::for_run(&state, now);
    let frame = frames::memory_recalled(
        &stamp,
        &node.node_id,
        &MemoryRecalledPayload::naming(
            call.attempt,
            call.namespaces.clone(),
            &bundle.recalled_memory,
            trimmed,
            unavailable,
        ),
    );
    Ok(model_call(
        &state,
        node,
        call.attempt,
        &bundle,
        now,
        vec![frame],
    ))
}

/// How many of `found` (best first) fit the node's request inside its
/// model's prompt budget.
fn fitting(
    node: &PlanNode,
    bundle: &ContextBundle,
    found: &[RecalledSnippet],
    engine: &EngineContext<'_>,
) -> usize {
    let request = build_model_request(node, bundle);
    let budget = prompt_budget(
        engine.registry.models(),
        request.model.as_ref().map(|target| target.name.as_str()),
    );
    let mut used = estimated_tokens(&request.system_instruction)
        + estimated_tokens(&request.user_message)
        + estimated_tokens(&request.output_schema.to_string())
        + estimated_tokens(crate::state::context::RECALLED_MEMORY_RULE);
    let mut kept = 0;
    for snippet in found {
        let cost = estimated_tokens(&serde_json::to_string(snippet).unwrap_or_default());
        if used + cost > budget {
            break;
        }
        used += cost;
        kept += 1;
    }
    kept
}

/// In the commit that completes the run: records what it will remember
/// and sends the first `Remember` step, when its envelope names where and
/// its capabilities mark facets to remember.
pub(super) fn ask_to_remember(step: &mut StepContext<'_, '_>) {
    if step.state().status() != RunStatus::Completed
        || step.initial_status() == RunStatus::Completed
        || step.state().remembering.is_some()
    {
        return;
    }
    let Some(namespace) = step
        .state()
        .envelope
        .memory
        .as_ref()
        .and_then(|memory| memory.remember_to.clone())
    else {
        return;
    };
    if remembered_facets(step.state(), step.engine()).is_empty() {
        return;
    }
    step.state_mut().remembering = Some(Box::new(RememberRecord {
        namespace,
        ..RememberRecord::default()
    }));
    step.send(StepMessage::new(
        &step.state().tenant_id,
        &step.state().run_id,
        StepCommand::Remember { attempt: 1 },
    ));
}

/// The facets the run's completed nodes remember, by key (a facet two
/// nodes remember is the later one's in plan order).
fn remembered_facets(state: &RunState, engine: &EngineContext<'_>) -> Vec<RememberedFacet> {
    // The plan says what each node remembers; the registry gives facets' merge rules.
    let Some(plan) = state.plan.as_deref() else {
        return Vec::new();
    };
    let mut items: Vec<RememberedFacet> = Vec::new();
    for node_id in plan.topological_order().unwrap_or_default() {
        let (Some(node), Some(record)) = (plan.node(&node_id), state.nodes.get(&node_id)) else {
            continue;
        };
        if record.status() != NodeStatus::Completed {
            continue;
        }
        for facet in &node.remember {
            let made = record
                .output
                .as_ref()
                .and_then(|output| output.get(facet))
                .cloned();
            let value = made.or_else(|| {
                node.input_facets
                    .contains(facet)
                    .then(|| {
                        crate::state::context::facet_value_for_node(
                            state,
                            node,
                            facet,
                            &engine.registry.facets,
                        )
                    })
                    .flatten()
            });
            let Some(value) = value else { continue };
            items.retain(|item| item.key != *facet);
            items.push(RememberedFacet {
                key: facet.clone(),
                value,
                provenance: Provenance {
                    run_id: Some(state.run_id.clone()),
                    node_id: Some(node_id.clone()),
                    attempt: Some(record.current_attempt),
                    person: None,
                },
            });
        }
    }
    items
}

/// Whether a `Remember` step no longer applies (done, given up, or not
/// the attempt due).
pub(super) fn remember_is_stale(state: &RunState, attempt: u32) -> bool {
    !state
        .remembering
        .as_deref()
        .is_some_and(|record| !record.done && !record.gave_up && record.attempts + 1 == attempt)
}

pub(super) fn begin_remember(
    state: &RunState,
    attempt: u32,
    engine: &EngineContext<'_>,
) -> Result<StepAdvance, CoreError> {
    let record = state
        .remembering
        .as_deref()
        .ok_or_else(|| CoreError::StepDoesNotApply("the run remembers nothing".into()))?;
    Ok(StepAdvance::Perform(Effect::Remember(Box::new(
        MemoryRemembering {
            attempt,
            namespace: record.namespace.clone(),
            items: remembered_facets(state, engine),
        },
    ))))
}

/// Records the attempt: written (and refused), retried later, or given up.
pub(super) fn resume_remember(
    mut state: RunState,
    remembering: &MemoryRemembering,
    outcome: &RememberOutcome,
    now: Instant,
) -> Result<StepAdvance, CoreError> {
    let mut outbox = Vec::new();
    let Some(record) = state.remembering.as_deref_mut() else {
        return Err(CoreError::StepDoesNotApply(
            "the run remembers nothing".into(),
        ));
    };
    record.attempts = remembering.attempt;
    record.written = outcome.written.clone();
    record.refused = outcome.refused.clone();
    match &outcome.failure {
        None => {
            record.done = true;
            record.last_error = None;
        }
        Some(message) if remembering.attempt < MAX_REMEMBER_ATTEMPTS => {
            record.last_error = Some(message.clone());
            let next = remembering.attempt + 1;
            let message = super::notify::retried_later(
                &state,
                StepCommand::Remember { attempt: next },
                next,
                now,
            );
            outbox.push(message);
        }
        Some(message) => {
            record.last_error = Some(message.clone());
            record.gave_up = true;
        }
    }
    Ok(super::notify::recorded_after_the_end(state, outbox, now))
}

/// What the run's memory tools may touch (`MemoryToolScope::of`): its
/// envelope's `memory` block, and a chat's person when the chat settings
/// remember preferences.
pub(in crate::engine) fn memory_tool_scope(
    state: &RunState,
    engine: &EngineContext<'_>,
) -> crate::contracts::memory_use::MemoryToolScope {
    let chat = state.chat.as_deref();
    crate::contracts::memory_use::MemoryToolScope::of(
        state.envelope.memory.as_deref(),
        chat.and_then(|turn| turn.user.as_deref()),
        chat.is_some()
            && engine
                .registry
                .chat_settings()
                .is_some_and(|settings| settings.remember_preferences),
    )
}

/// Whether `tool` reads or writes the tenant's memory.
pub(in crate::engine) fn is_memory_tool(tool: &crate::catalog::tools::ToolDefinition) -> bool {
    matches!(
        tool.executor,
        crate::catalog::tools::ToolExecutor::Builtin { operation } if operation.is_memory()
    )
}
