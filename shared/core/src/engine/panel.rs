//! Panel nodes: a judge panel run as steps. The node's step opens round 0
//! (one `AskJudge` step per judge, and a round timer); each judge's step is
//! one model call and one commit; the round closes when every judge has
//! answered, or when its timer fires (the silent are left out with a
//! `warning`). Closing a round either opens a discussion round or ends the
//! panel: its `OrchestratorOutput` becomes the node's one output facet and
//! is judged against the node's contract like any answer. The panel itself
//! (`baton_judge::panel::Panel`) lives in the run state between steps;
//! what each judge is asked in a round is a run entry (`crate::records::entries`),
//! loaded by that judge's step only.

use baton_judge::panel::{JudgeAnswer, JudgeCall, JudgeOutcome, Panel, PanelAdvance};
use serde_json::{Map, Value};
use std::collections::BTreeSet;

use crate::basics::claims::ClaimKey;
use crate::basics::codes::{FailureCode, WarningCode};
use crate::basics::error::CoreError;
use crate::basics::instant::Instant;
use crate::contracts::panels::{PanelExecutor, PanelProgress, round_timer_id};
use crate::planning::plan::PlanNode;
use crate::records::entries::{EntryBody, EntryKey};
use crate::records::governance::TimerPurpose;
use crate::state::run::{NodeStatus, RunState, StepCommand};
use crate::wire::frames::{self, ExecutorType};

use super::decision::EngineContext;
use super::effects::{Effect, JudgeModelCall, ModelFailure, ModelOutcome, StepAdvance};
use super::plan_lookup::{plan_node_in, plan_of};
use super::step_context::StepContext;

/// Whether an `AskJudge` command no longer applies.
pub(super) fn judge_is_stale(
    state: &RunState,
    node_id: &str,
    attempt: u32,
    round: u32,
    judge_id: &str,
) -> bool {
    let deliberating = state.nodes.get(node_id).is_some_and(|record| {
        record.status() == NodeStatus::Deliberating && record.current_attempt == attempt
    });
    !deliberating || !judge_is_awaited(state, node_id, attempt, round, judge_id)
}

/// The node's step: start the panel and open its first round.
pub(super) fn begin_panel(
    step: &mut StepContext<'_, '_>,
    node: &PlanNode,
    executor: &PanelExecutor,
    attempt: u32,
    inputs: &Map<String, Value>,
) -> Result<(), CoreError> {
    let started = frames::node_start(
        &step.stamp(),
        node,
        &super::plan_lookup::start_payload(node, attempt, ExecutorType::Panel),
    );
    step.emit(started);
    let evaluation_id = format!("{}:{}:{attempt}", step.state().run_id, node.node_id);
    let criteria = step
        .state()
        .envelope
        .constraints
        .acceptance_criteria
        .clone();
    let request = match executor.request_for(&evaluation_id, inputs, &criteria) {
        Ok(request) => request,
        Err(reason) => {
            fail_panel(
                step,
                node,
                attempt,
                FailureCode::InputContractViolated,
                reason.into(),
            );
            return Ok(());
        }
    };
    let (panel, calls) = Panel::start(request, &evaluation_id, step.now().unix_millis());
    if let Some(record) = step.state_mut().node_mut(&node.node_id) {
        super::lifecycle::move_node(record, super::lifecycle::NodeTransition::Deliberate);
    }
    // The specification's statuses: `initializing` as the panel opens,
    // `scoring`, `discussing` per round, `converging` as the consensus is
    // computed, then `completed` or `failed`.
    emit_progress(step, &node.node_id, &panel.progress("initializing"));
    let progress = panel.progress("scoring");
    emit_progress(step, &node.node_id, &progress);
    open_round(step, node, attempt, panel, calls)?;
    Ok(())
}

/// Puts the round's calls in the state, one step per judge in the outbox,
/// and the round's timer.
fn open_round(
    step: &mut StepContext<'_, '_>,
    node: &PlanNode,
    attempt: u32,
    mut panel: Panel,
    calls: Vec<JudgeCall>,
) -> Result<(), CoreError> {
    let round = panel.round();
    // A judge whose request would not fit its model's context window is
    // left out now, not sent to be refused.
    let (calls, too_long): (Vec<JudgeCall>, Vec<JudgeCall>) = calls
        .into_iter()
        .partition(|call| over_window(call, step).is_none());
    for call in &too_long {
        let reason = over_window(call, step).unwrap_or_default();
        panel.take(
            &call.judge_id,
            round,
            JudgeOutcome::Failed(reason.clone()),
            step.now().unix_millis(),
        );
        left_out(
            step,
            &node.node_id,
            &format!(
                "judge {} left out of round {round}: {reason}",
                call.judge_id
            ),
        );
    }
    let timeout = std::time::Duration::from_millis(panel.request().config.round_timeout);
    for call in &calls {
        step.enqueue(StepCommand::AskJudge {
            node_id: node.node_id.clone(),
            attempt,
            round,
            judge_id: call.judge_id.clone(),
        });
    }
    step.start_timer(
        round_timer_id(&node.node_id, attempt, round),
        step.now().plus(timeout),
        TimerPurpose::PanelRound {
            node_id: node.node_id.clone(),
            attempt,
            round,
        },
    );
    let pending: BTreeSet<String> = calls.iter().map(|call| call.judge_id.clone()).collect();
    let nobody_asked = pending.is_empty();
    let key = EntryKey::PanelRound {
        node_id: node.node_id.clone(),
        attempt,
        round,
    };
    step.put_entry(&key, EntryBody::PanelRound(calls));
    step.state_mut().panels.insert(
        node.node_id.clone(),
        PanelProgress {
            attempt,
            panel,
            pending,
        },
    );
    // Every judge was left out: the round is over already.
    if nobody_asked {
        close_round(step, node, attempt)?;
    }
    Ok(())
}

/// Why `call` would not fit its model's context window, if it would not
/// (`state::context_budget`: tokens reckoned, the answer's room kept).
fn over_window(call: &JudgeCall, step: &StepContext<'_, '_>) -> Option<String> {
    use crate::state::context_budget::{estimated_tokens, prompt_budget};
    let catalog = step.engine().registry.models();
    let model = crate::planning::model_choice::model_for_judge(
        catalog,
        call.model_name.as_deref(),
        call.model_provider.as_deref(),
    );
    let budget = prompt_budget(catalog, model.as_ref().map(|target| target.name.as_str()));
    let tokens = estimated_tokens(&call.system_prompt)
        + estimated_tokens(&call.user_message)
        + estimated_tokens(&baton_judge::panel::judge_answer_schema().to_string());
    (tokens > budget).then(|| {
        format!("its request is about {tokens} tokens, over the {budget} its model's context window leaves for a prompt")
    })
}

/// A judge's step: its model call (under its own lease).
pub(super) fn begin_judge(
    state: &RunState,
    node_id: &str,
    attempt: u32,
    round: u32,
    judge_id: &str,
) -> Result<StepAdvance, CoreError> {
    if !judge_is_awaited(state, node_id, attempt, round, judge_id) {
        return Err(CoreError::StepDoesNotApply(format!(
            "node {node_id} does not wait for {judge_id}"
        )));
    }
    let round_entry = EntryKey::PanelRound {
        node_id: node_id.to_string(),
        attempt,
        round,
    }
    .storage_key();
    Ok(StepAdvance::Perform(Effect::AskJudge(Box::new(
        JudgeModelCall {
            node_id: node_id.to_string(),
            attempt,
            round,
            judge_id: judge_id.to_string(),
            claim_key: ClaimKey::Judge {
                node_id: node_id.to_string(),
                judge_id: judge_id.to_string(),
                round,
            },
            round_entry,
        },
    ))))
}

fn judge_is_awaited(
    state: &RunState,
    node_id: &str,
    attempt: u32,
    round: u32,
    judge_id: &str,
) -> bool {
    state
        .panels
        .get(node_id)
        .is_some_and(|progress| progress.awaits(attempt, round, judge_id))
}

/// A judge answered (or its model failed): take it, close the round when
/// nobody else is awaited.
pub(super) fn resume_judge(
    state: RunState,
    call: &JudgeModelCall,
    outcome: &ModelOutcome,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Result<StepAdvance, CoreError> {
    let plan = plan_of(&state)?;
    let node = plan_node_in(&plan, &state, &call.node_id)?;
    let mut step = StepContext::new(state, now, engine);
    let mut said = frames::JudgeCallSummary {
        judge_id: call.judge_id.clone(),
        round: call.round,
        attempt: call.attempt,
        response: outcome
            .as_ref()
            .ok()
            .map(|answer| frames::ModelResponseSummary {
                model: answer.model.clone(),
                usage: frames::TokenTotals::of(&answer.usage),
            }),
        score: None,
        error: None,
    };
    let judged = match outcome {
        Ok(answer) => {
            super::usage_recording::record_model_usage(
                &mut step,
                &call.node_id,
                &answer.model,
                &answer.usage,
                crate::state::run::UsageOperation::Judge,
            );
            match serde_json::from_str::<JudgeAnswer>(&answer.content) {
                Ok(mut parsed) if (0.0..=10.0).contains(&parsed.score) => {
                    parsed.model = Some(answer.model.clone());
                    JudgeOutcome::Answered(parsed)
                }
                Ok(parsed) => {
                    JudgeOutcome::Failed(format!("score {} is off the 0-10 scale", parsed.score))
                }
                Err(error) => {
                    JudgeOutcome::Failed(format!("the answer is not a judgement: {error}"))
                }
            }
        }
        Err(ModelFailure { message, .. }) => {
            JudgeOutcome::Failed(format!("the model failed: {message}"))
        }
    };
    match &judged {
        JudgeOutcome::Answered(answer) => said.score = Some(answer.score),
        JudgeOutcome::Failed(reason) => said.error = Some(reason.clone()),
        JudgeOutcome::TimedOut => {}
    }
    if let JudgeOutcome::Failed(reason) = &judged {
        left_out(
            &mut step,
            &call.node_id,
            &format!(
                "judge {} left out of round {}: {reason}",
                call.judge_id, call.round
            ),
        );
    }
    let Some(progress) = step.state_mut().panels.get_mut(&call.node_id) else {
        return Err(CoreError::StepDoesNotApply(format!(
            "node {} has no panel at work",
            call.node_id
        )));
    };
    progress
        .panel
        .take(&call.judge_id, call.round, judged, now.unix_millis());
    progress.pending.remove(&call.judge_id);
    let report = progress.panel.progress(if call.round == 0 {
        "scoring"
    } else {
        "discussing"
    });
    let round_over = progress.pending.is_empty();
    let frame = frames::progress(
        &step.stamp(),
        &call.node_id,
        &frames::ProgressPayload {
            judge_call: Some(said),
            ..frames::ProgressPayload::from(&report)
        },
    );
    step.emit(frame);
    if round_over {
        close_round(&mut step, node, call.attempt)?;
    }
    Ok(step.into_advance())
}

/// The round's timer fired: whoever has not answered is left out.
pub(super) fn round_timed_out(
    step: &mut StepContext<'_, '_>,
    node_id: &str,
    attempt: u32,
    round: u32,
) -> Result<(), CoreError> {
    let now_millis = step.now().unix_millis();
    let Some(progress) = step.state_mut().panels.get_mut(node_id) else {
        return Ok(());
    };
    if progress.attempt != attempt || progress.panel.round() != round {
        return Ok(());
    }
    let silent: Vec<String> = std::mem::take(&mut progress.pending).into_iter().collect();
    let timeout = progress.panel.request().config.round_timeout;
    for judge_id in &silent {
        progress
            .panel
            .take(judge_id, round, JudgeOutcome::TimedOut, now_millis);
    }
    for judge_id in &silent {
        left_out(
            step,
            node_id,
            &format!(
                "judge {judge_id} did not answer round {round} within {timeout} ms; left out of the round"
            ),
        );
    }
    let plan = plan_of(step.state())?;
    let node = plan_node_in(&plan, step.state(), node_id)?;
    close_round(step, node, attempt)
}

/// Every judge of the round was heard (or left out): discuss again, or
/// conclude and judge the panel's output as the node's answer.
fn close_round(
    step: &mut StepContext<'_, '_>,
    node: &PlanNode,
    attempt: u32,
) -> Result<(), CoreError> {
    let Some(mut progress) = step.state_mut().panels.remove(&node.node_id) else {
        return Ok(());
    };
    step.state_mut().governance.timers.remove(&round_timer_id(
        &node.node_id,
        attempt,
        progress.panel.round(),
    ));
    let converging = progress.panel.progress("converging");
    match progress.panel.advance(step.now().unix_millis()) {
        PanelAdvance::Ask(calls) => {
            let report = progress.panel.progress("discussing");
            emit_progress(step, &node.node_id, &report);
            open_round(step, node, attempt, progress.panel, calls)
        }
        PanelAdvance::Done(output) => {
            emit_progress(step, &node.node_id, &converging);
            emit_progress(step, &node.node_id, &output.progress);
            let transcript = crate::contracts::panels::TranscriptPublication {
                idempotency_key: format!("{}:{}:{attempt}", step.state().run_id, node.node_id),
                node_id: node.node_id.clone(),
                transcript: output.transcript.clone(),
            };
            step.publish_transcript(transcript);
            let facet = node.output_facets.first().cloned().unwrap_or_default();
            let evaluation = serde_json::to_value(&*output).map_err(|error| {
                CoreError::StepDoesNotApply(format!(
                    "the panel's output cannot be encoded: {error}"
                ))
            })?;
            let mut answer = Map::new();
            answer.insert(facet, evaluation);
            if let Some(record) = step.state_mut().node_mut(&node.node_id) {
                super::lifecycle::move_node(record, super::lifecycle::NodeTransition::Schedule);
            }
            super::node_answers::take_answer(step, node, attempt, Ok(Value::Object(answer)))
        }
        PanelAdvance::Failed(reason) => {
            let mut failed = converging;
            failed.status = "failed".to_string();
            emit_progress(step, &node.node_id, &failed);
            fail_panel(
                step,
                node,
                attempt,
                FailureCode::PanelNoVerdict,
                format!("the panel reached no verdict: {reason}"),
            );
            Ok(())
        }
    }
}

fn emit_progress(
    step: &mut StepContext<'_, '_>,
    node_id: &str,
    progress: &baton_judge::panel::EvaluationProgress,
) {
    let frame = frames::progress(
        &step.stamp(),
        node_id,
        &frames::ProgressPayload::from(progress),
    );
    step.emit(frame);
}

fn left_out(step: &mut StepContext<'_, '_>, node_id: &str, message: &str) {
    let frame = frames::warning(
        &step.stamp(),
        Some(node_id),
        message,
        &frames::WarningPayload::of(WarningCode::JudgeLeftOut),
    );
    step.emit(frame);
}

fn fail_panel(
    step: &mut StepContext<'_, '_>,
    node: &PlanNode,
    attempt: u32,
    code: FailureCode,
    reason: String,
) {
    step.state_mut().panels.remove(&node.node_id);
    let run_message = format!("node {} failed: {reason}", node.node_id);
    step.fail_node(node, attempt, code, &reason, &run_message);
}
