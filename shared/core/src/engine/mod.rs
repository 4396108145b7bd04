//! The step engine: it owns the whole step. The shell calls two functions
//! and performs what they ask, nothing else:
//!
//! ```text
//! begin_step(&state, command, now, engine)             -> Stale | Perform(effect) | Decided(decision)
//! resume_step(state, command, performed, now, engine)  -> Stale | Perform(effect) | Decided(decision)
//! ```
//!
//! `begin_step` borrows the state (the shell keeps it while it performs the
//! effect); `resume_step` takes it (the decision is built from it, no copy).
//! `engine` ([`EngineContext`]) is what a step reads besides the run: the
//! registry, the settings, the validator cache. `resume_step` may ask for
//! another effect (an agent's next turn, a tool, a judge), so a step is a
//! loop until it is decided.
//!
//! A run's and a node's status change only through the named transitions
//! of `lifecycle` (a run: work, park for a person, hold for a decision,
//! pause, complete, fail, reject its plan, cancel; a node: reset, schedule,
//! deliberate, park for a person, complete, fail), each checked against the
//! status it leaves.
//!
//! An [`Effect`] is data: call this model with this request (after claiming
//! the node and appending these frames), or ask the planner model for a
//! draft. The shell performs it and hands it back as [`Performed`], the
//! effect with its own outcome type (a model call's answer or failure, a
//! tool's result, a delivery's refusal: a mismatch does not compile); the
//! engine decides what it means. Built-in nodes, human parking and rejected
//! inputs are decided without an effect. A [`Decision`] (new state, frames,
//! outbox) is committed by the shell in one transaction. On a version
//! conflict the shell reloads and calls `resume_step` again with the same
//! outcome: the capability is never called twice for one attempt.
//!
//! Nothing in here performs I/O, reads a clock or draws randomness: time
//! comes in as an [`Instant`](crate::basics::instant::Instant), so every step replays in a test.

mod agent;
mod branches;
mod budget;
mod chat_opening;
mod chat_runs;
mod fork;
pub use fork::{CompletedNode, ForkBase, ForkChanges, ForkPoint, ForkRefused, fork_base, fork_run};
mod answer_verdict;
mod decision;
mod effects;
mod escalation;
mod feedback;
mod finish;
mod frame_provenance;
pub mod history_summary;
mod hitl;
mod human;
mod lane_release;
mod lifecycle;
mod memory_effects;
mod memory_steps;
mod narration;
mod node;
mod node_answers;
mod notify;
mod orchestrator_turns;
mod panel;
mod plan_drafts;
mod plan_lookup;
mod planning_step;
mod policy;
mod policy_matching;
mod progress;
mod quality;
mod quality_report;
mod replan;
mod replan_warnings;
mod starts;
mod step_context;
mod step_endings;
mod steps;
#[cfg(test)]
mod tests;
mod timers;
mod usage_recording;

pub use agent::NO_TOOLS_REMINDER;
pub use chat_runs::{queue_chat_run, start_queued_chat_run};
pub use decision::{
    DEFAULT_HUMAN_TASK_TIMEOUT, DEFAULT_MAX_NODE_ATTEMPTS, DEFAULT_MAX_PLANNER_ATTEMPTS, Decision,
    EngineContext, NO_CAPABILITY_UNAVAILABLE, NewRunIdentity, PlannerChoice, ThreadExchange,
};
pub use effects::{
    ChildRunStart, ConverseCall, DeliveryFailure, DeliveryOutcome, Effect, JudgeModelCall,
    LaneRelease, ModelAnswer, ModelCall, ModelFailure, ModelOutcome, NotificationDelivery,
    Performed, PlanDraftCall, PlanReviewCall, StepAdvance, ToolExecution, TurnOutcome,
};
pub use hitl::{
    ApprovalDecision, ApprovalResolution, ClarificationAnswer, answer_clarification,
    resolve_approval, resume_paused_run, trigger_manual_policy,
};
pub use human::{
    HumanAnswer, HumanDecline, HumanInputRefused, answer_human_node, decline_human_node,
};
pub use memory_effects::{
    MemoryRecallCall, MemoryRemembering, RecallFailure, RecallOutcome, RememberOutcome,
    RememberedFacet,
};
pub use policy_matching::run_metrics;
pub use starts::{advisory_field_warnings, legacy_policy_warnings, start_chat_run, start_run};
pub use steps::{begin_step, cancel_run, fail_run, is_stale, resume_step};
