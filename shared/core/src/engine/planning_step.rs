//! The planning step: draft (deterministically, or by the planner model),
//! judge each draft once with the validator, accept or reject, and schedule
//! the first nodes.

use std::sync::Arc;

use crate::basics::codes::FailureCode;
use crate::basics::error::CoreError;
use crate::basics::instant::Instant;
use crate::planning::llm_planner::{plan_from_draft, planner_request};
use crate::planning::planner::plan_deterministically_ordered;
use crate::state::run::{NodeRecord, RunState, RunStatus};
use crate::wire::frames::{self, PlannerKind};

use super::decision::{EngineContext, PlannerChoice};
use super::effects::{ModelFailure, ModelOutcome, PlanDraftCall, StepAdvance};
use super::lifecycle::RunTransition;
use super::plan_drafts::{
    Judged, draft_response, judge, over_window, plan_generated_payload, plan_requested_payload,
    rejected_draft_frames, warn_planner_fallback,
};
use super::step_context::StepContext;

pub(super) fn begin_planning(
    state: &RunState,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Result<StepAdvance, CoreError> {
    if state.chat.is_some() {
        let mut step = StepContext::new(state.clone(), now, engine);
        super::chat_runs::plan_chat(&mut step)?;
        return Ok(step.into_advance());
    }
    // Turn by turn: the orchestrator model's first decision is the plan.
    if super::orchestrator_turns::max_turns(state).is_some() {
        return Ok(super::orchestrator_turns::first_turn(state, engine));
    }
    match engine.planner {
        PlannerChoice::Deterministic => {
            let mut step = StepContext::new(state.clone(), now, engine);
            let drafted = plan_deterministically_ordered(
                &step.state().envelope,
                engine.registry,
                engine.fresh_plan_orders(),
            );
            let judged = judge(drafted, &step.state().envelope, engine);
            settle_plan(&mut step, judged, 1, PlannerKind::Deterministic, None)?;
            Ok(step.into_advance())
        }
        PlannerChoice::Llm => {
            let call = PlanDraftCall {
                attempt: 1,
                request: planner_request(&state.envelope, engine.registry, &[]),
                rejected: Vec::new(),
                frames_before: Vec::new(),
                spent: Vec::new(),
            };
            // A request its model's window cannot hold is not sent: the
            // deterministic planner plans, as when the model fails.
            if let Some(refusal) = over_window(&call.request, engine) {
                return resume_planning(state.clone(), &call, &Err(refusal), now, engine);
            }
            Ok(StepAdvance::Perform(super::effects::Effect::DraftPlan(
                call,
            )))
        }
    }
}

pub(super) fn resume_planning(
    state: RunState,
    call: &PlanDraftCall,
    outcome: &ModelOutcome,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Result<StepAdvance, CoreError> {
    if super::orchestrator_turns::max_turns(&state).is_some() {
        return resume_first_turn(state, call, outcome, now, engine);
    }
    let mut step = StepContext::new(state, now, engine);
    // The frames of the drafts rejected before this one are committed with
    // this step's decision, first (nothing is written outside a commit).
    step.emit_all(call.frames_before.iter().cloned());
    // Every draft's tokens count, the rejected ones' too: a retry carries
    // them, and the step that decides records them.
    let spent = super::usage_recording::drafts_spent(call, outcome);
    let attempts = engine.max_planner_attempts.max(1);
    let drafts_rejected_before = u32::try_from(call.rejected.len()).unwrap_or(u32::MAX);
    let (fallback_reason, rejected_drafts) = match outcome {
        Err(ModelFailure { message, .. }) => (
            format!("the planner model is unavailable ({message})"),
            drafts_rejected_before,
        ),
        Ok(answer) => {
            let drafted = plan_from_draft(
                &answer.content,
                &step.state().envelope,
                engine.registry,
                &answer.model,
            );
            let judged = judge(drafted, &step.state().envelope, engine);
            let response = Some(draft_response(answer));
            if judged.0.is_some() {
                super::usage_recording::record_planner_spend(&mut step, &spent);
                settle_plan(&mut step, judged, call.attempt, PlannerKind::Llm, response)?;
                return Ok(step.into_advance());
            }
            let bundle = judged.1;
            let rejection = rejected_draft_frames(&step, call.attempt, &bundle, response);
            let mut rejected = call.rejected.clone();
            rejected.push(bundle);
            let retry = planner_request(&step.state().envelope, engine.registry, &rejected);
            if call.attempt < attempts && over_window(&retry, engine).is_none() {
                let mut frames_before = step.take_frames();
                frames_before.extend(rejection);
                return Ok(StepAdvance::Perform(super::effects::Effect::DraftPlan(
                    PlanDraftCall {
                        attempt: call.attempt + 1,
                        request: retry,
                        rejected,
                        frames_before,
                        spent,
                    },
                )));
            }
            step.emit_all(rejection);
            (
                format!("the planner model produced no valid plan in {attempts} attempts"),
                drafts_rejected_before.saturating_add(1),
            )
        }
    };
    // The model is unavailable or never drafted a valid plan: say so, and
    // let the deterministic planner plan.
    super::usage_recording::record_planner_spend(&mut step, &spent);
    warn_planner_fallback(&mut step, &fallback_reason, rejected_drafts);
    let drafted = plan_deterministically_ordered(
        &step.state().envelope,
        engine.registry,
        engine.fresh_plan_orders(),
    );
    let judged = judge(drafted, &step.state().envelope, engine);
    settle_plan(
        &mut step,
        judged,
        rejected_drafts.saturating_add(1),
        PlannerKind::Deterministic,
        None,
    )?;
    Ok(step.into_advance())
}

/// The orchestrator's first decision (turn by turn): a `handoff` or
/// `plan_update` is the first plan; with no usable decision the
/// deterministic planner plans the whole run and no turn follows.
fn resume_first_turn(
    state: RunState,
    call: &PlanDraftCall,
    outcome: &ModelOutcome,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Result<StepAdvance, CoreError> {
    use super::orchestrator_turns::TurnStep;
    let mut step = StepContext::new(state, now, engine);
    match super::orchestrator_turns::read_turn(&mut step, call, outcome)? {
        TurnStep::Again(advance) => return Ok(advance),
        TurnStep::Plan {
            plan,
            bundle,
            attempt,
            response,
            ..
        } => settle_plan(
            &mut step,
            (Some(*plan), bundle),
            attempt,
            PlannerKind::Llm,
            response,
        )?,
        TurnStep::Final => {
            step.move_run(RunTransition::Work)?;
            super::finish::finish_run(&mut step)?;
        }
        TurnStep::GiveUp { reason, refused } => {
            warn_planner_fallback(&mut step, &reason, refused);
            let no_more_turns = super::orchestrator_turns::max_turns(step.state()).unwrap_or(0);
            step.state_mut().orchestrator_turns = no_more_turns;
            let drafted = plan_deterministically_ordered(
                &step.state().envelope,
                engine.registry,
                engine.fresh_plan_orders(),
            );
            let judged = judge(drafted, &step.state().envelope, engine);
            settle_plan(
                &mut step,
                judged,
                refused.saturating_add(1),
                PlannerKind::Deterministic,
                None,
            )?;
        }
    }
    Ok(step.into_advance())
}

/// Accepts a judged draft (`plan_generated`, first nodes scheduled) or
/// rejects the run (`plan_rejected`, `error`).
fn settle_plan(
    step: &mut StepContext<'_, '_>,
    (plan, bundle): Judged,
    attempt: u32,
    planner: PlannerKind,
    response: Option<frames::ModelResponseSummary>,
) -> Result<(), CoreError> {
    let requested = frames::plan_requested(
        &step.stamp(),
        &plan_requested_payload(step.state(), step.engine(), attempt, planner),
    );
    step.emit(requested);
    step.state_mut().plan_diagnostics = Some(Arc::new(bundle.clone()));
    let Some(plan) = plan else {
        let summary = bundle
            .failures
            .iter()
            .filter_map(|failure| {
                failure
                    .suggestion
                    .clone()
                    .or_else(|| failure.constraint.clone())
            })
            .collect::<Vec<_>>()
            .join(" ");
        let rejected = frames::plan_rejected(
            &step.stamp(),
            &frames::PlanRejectedPayload {
                attempt,
                will_retry: false,
                response,
                diagnostics: bundle,
            },
        );
        step.emit(rejected);
        step.end_run(
            RunStatus::PlanRejected,
            FailureCode::PlanRejected,
            &summary,
            &format!("plan rejected: {summary}"),
        );
        return Ok(());
    };
    let generated = frames::plan_generated(
        &frames::FrameStamp::new(step.now(), plan.plan_version),
        &frames::PlanGeneratedPayload {
            response,
            ..plan_generated_payload(&plan, &bundle)
        },
    );
    step.state_mut().nodes = plan
        .nodes
        .iter()
        .map(|node| (node.node_id.clone(), Arc::new(NodeRecord::pending())))
        .collect();
    let mut plan = plan;
    plan.share_contract_schemas(step.engine().validators);
    step.state_mut().plan = Some(Arc::new(plan));
    step.record_plan_version("initial", None, None, None);
    let generated = super::frame_provenance::with_provenance(step.state(), generated, None);
    step.emit(generated);
    step.move_run(RunTransition::Work)?;
    start_policy_timers(step);
    super::policy::fire(step, &super::policy_matching::Occurrence::Start)?;
    super::progress::continue_run(step)
}

/// One durable timer per enabled `onTimeout` policy, from the first plan,
/// and the `maxDurationSeconds` deadline's.
fn start_policy_timers(step: &mut StepContext<'_, '_>) {
    super::budget::start_deadline_timers(step);
    let envelope = step.state().envelope.clone();
    for policy in envelope.policies.runtime.iter().filter(|p| p.enabled) {
        if let crate::contracts::policies::PolicyTrigger::OnTimeout { ms } = policy.trigger {
            let due = step.now().plus(std::time::Duration::from_millis(ms));
            step.start_timer(
                crate::records::governance::policy_timer_id(&policy.id),
                due,
                crate::records::governance::TimerPurpose::PolicyTimeout {
                    policy_id: policy.id.clone(),
                },
            );
        }
    }
}
