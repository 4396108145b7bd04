//! The effects the engine asks the shell to perform, and what performing
//! them produced: data only, so every step replays in a test.

use crate::basics::codes::FailureCode;
use crate::contracts::diagnostics::DiagnosticsBundle;
use crate::state::context::ModelRequest;
use crate::state::run::TokenUsage;
use crate::wire::event::EventDraft;

use super::{ChildRunStart, ConverseCall, PlanReviewCall, ToolExecution};

/// A model's structured answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelAnswer {
    pub content: String,
    pub usage: TokenUsage,
    pub model: String,
}

/// A node attempt's model call.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCall {
    pub node_id: String,
    pub attempt: u32,
    pub request: ModelRequest,
    /// Appended atomically with the node's claim (`node_start`).
    pub start_frames: Vec<EventDraft>,
    /// When the attempt began (Unix ms), for the node's `metrics`.
    pub started_at_millis: u64,
    /// Whether the model's text is streamed as `delta` frames (only in the
    /// generation and qa phases).
    pub stream_deltas: bool,
}

/// A request to the planner model for a plan draft.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanDraftCall {
    pub attempt: u32,
    pub request: ModelRequest,
    /// Diagnostics of the drafts rejected so far (fed into `request`).
    pub rejected: Vec<DiagnosticsBundle>,
    /// The rejected drafts' frames so far (each one's request and
    /// rejection), carried to the step's decision and committed with it.
    pub frames_before: Vec<EventDraft>,
    /// What the rejected drafts so far used, recorded with the decision
    /// (the run's `planner_spend`).
    pub spent: Vec<DraftSpend>,
}

/// One planner draft's model and tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct DraftSpend {
    pub model: String,
    pub usage: crate::state::run::TokenUsage,
}

/// One judge's model call in one round of a panel node.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgeModelCall {
    pub node_id: String,
    pub attempt: u32,
    pub round: u32,
    pub judge_id: String,
    /// The lease this call is claimed under (one per judge and round).
    pub claim_key: crate::basics::claims::ClaimKey,
    /// The entry holding what the round's judges are asked
    /// (`EntryKey::PanelRound`), which the shell loads and turns into this
    /// judge's model request (`JudgeModelCall::request_from`).
    pub round_entry: String,
}

impl JudgeModelCall {
    /// The model request of the judge's call, read from its entry.
    pub fn request_from(
        &self,
        entry: Option<&crate::records::entries::RunEntry>,
        catalog: &crate::catalog::model_catalog::ModelCatalog,
    ) -> Result<ModelRequest, crate::basics::error::CoreError> {
        let call = match entry.map(|entry| &entry.body) {
            Some(crate::records::entries::EntryBody::PanelRound(calls)) => {
                calls.iter().find(|call| call.judge_id == self.judge_id)
            }
            Some(
                crate::records::entries::EntryBody::Turn(_)
                | crate::records::entries::EntryBody::PlanVersion(_),
            ) => {
                return Err(crate::basics::error::CoreError::StepDoesNotApply(format!(
                    "entry {} is not a panel round",
                    self.round_entry
                )));
            }
            None => None,
        };
        let call = call.ok_or_else(|| {
            crate::basics::error::CoreError::StepDoesNotApply(format!(
                "the call of judge {} is not stored (entry {})",
                self.judge_id, self.round_entry
            ))
        })?;
        Ok(ModelRequest {
            system_instruction: call.system_prompt.clone(),
            user_message: call.user_message.clone(),
            schema_name: "judge_answer".to_string(),
            output_schema: std::sync::Arc::new(baton_judge::panel::judge_answer_schema()),
            // The judge's own model, when the catalog names it; else its
            // provider's first model with structured output.
            model: crate::planning::model_choice::model_for_judge(
                catalog,
                call.model_name.as_deref(),
                call.model_provider.as_deref(),
            )
            .map(Box::new),
        })
    }
}

/// What the shell must perform before the engine can decide.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Claim the node attempt (lease), append `start_frames`, call the model
    /// streaming its deltas into the event log.
    CallModel(ModelCall),
    /// Ask the model for a plan draft (no claim: the planning step is
    /// guarded by the run's version; nothing is appended before the commit).
    DraftPlan(PlanDraftCall),
    /// Claim the judge's lease and call the model (no deltas: a panel
    /// reports `progress`, not text).
    AskJudge(Box<JudgeModelCall>),
    /// Claim the turn's lease, append its start frames, take one model turn
    /// of an agent session with its tools offered.
    Converse(Box<ConverseCall>),
    /// Claim the call's lease and perform one tool call.
    RunTool(Box<ToolExecution>),
    /// Claim the call's lease, create the child run (once: its id and
    /// idempotency key are the call's) and send its first step.
    StartChildRun(Box<ChildRunStart>),
    /// Claim the review's lease and ask the reviewer model about a plan.
    ReviewPlan(Box<PlanReviewCall>),
    /// Deliver a completion notification (no claim: the run's version
    /// guards the record of the attempt).
    Notify(Box<super::notify::NotificationDelivery>),
    /// Release the thread's lane a settled chat run held (no claim: the
    /// release is conditional on the lane's version, and idempotent).
    ReleaseThreadLane(super::lane_release::LaneRelease),
}

impl Effect {
    /// What the shell must claim before performing (and for which node
    /// attempt), if anything.
    pub fn claim(&self) -> Option<(crate::basics::claims::ClaimKey, u32)> {
        use crate::basics::claims::ClaimKey;
        match self {
            Effect::CallModel(call) => Some((
                ClaimKey::Node {
                    node_id: call.node_id.clone(),
                },
                call.attempt,
            )),
            Effect::AskJudge(call) => Some((call.claim_key.clone(), call.attempt)),
            Effect::Converse(call) => Some((call.claim_key.clone(), call.attempt)),
            Effect::RunTool(call) => Some((call.claim_key.clone(), call.attempt)),
            Effect::StartChildRun(start) => Some((start.claim_key.clone(), start.attempt)),
            Effect::ReviewPlan(review) => Some((review.claim_key.clone(), review.then.attempt)),
            Effect::DraftPlan(_) | Effect::Notify(_) | Effect::ReleaseThreadLane(_) => None,
        }
    }

    /// The frames to append with the claim, taken out of the effect (they
    /// are written once; what stays is what `resume_step` needs).
    pub fn take_claim_frames(&mut self) -> Vec<EventDraft> {
        match self {
            Effect::CallModel(call) => std::mem::take(&mut call.start_frames),
            Effect::Converse(call) => std::mem::take(&mut call.start_frames),
            Effect::DraftPlan(_)
            | Effect::AskJudge(_)
            | Effect::RunTool(_)
            | Effect::StartChildRun(_)
            | Effect::ReviewPlan(_)
            | Effect::Notify(_)
            | Effect::ReleaseThreadLane(_) => Vec::new(),
        }
    }
}

/// Why a model call gave up (after the provider's own retries).
#[derive(Debug, Clone, PartialEq)]
pub struct ModelFailure {
    pub code: FailureCode,
    pub message: String,
}

/// What a model call produced: its answer, or why it gave up.
pub type ModelOutcome = Result<ModelAnswer, ModelFailure>;

/// What a model turn of an agent session produced (text, tool calls or
/// both), or why it gave up.
pub type TurnOutcome = Result<Box<crate::records::conversation::SessionAnswer>, ModelFailure>;

/// A notification that was not accepted: a destination refused it or could
/// not be reached.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryFailure {
    pub message: String,
}

/// What delivering a notification produced.
pub type DeliveryOutcome = Result<(), DeliveryFailure>;

/// An effect the shell performed, with what performing it produced: each
/// effect carries its own outcome type, so an outcome an effect cannot
/// produce (a tool result for a model call) does not compile.
#[derive(Debug, Clone, PartialEq)]
pub enum Performed {
    CallModel(ModelCall, ModelOutcome),
    DraftPlan(PlanDraftCall, ModelOutcome),
    AskJudge(Box<JudgeModelCall>, ModelOutcome),
    Converse(Box<ConverseCall>, TurnOutcome),
    /// A tool call finished (its failure is an outcome the model reads).
    RunTool(
        Box<ToolExecution>,
        crate::records::conversation::ToolOutcome,
    ),
    /// The child run exists (created now, or by an earlier try).
    StartChildRun(Box<ChildRunStart>),
    ReviewPlan(Box<PlanReviewCall>, ModelOutcome),
    Notify(Box<super::notify::NotificationDelivery>, DeliveryOutcome),
    /// The lane was released (or had been already).
    ReleaseThreadLane(super::lane_release::LaneRelease),
}

impl Performed {
    /// Whether the engine may ask for another effect after this one in the
    /// same step (a rejected plan draft, a reviewed plan).
    pub fn may_ask_again(&self) -> bool {
        matches!(self, Performed::DraftPlan(..) | Performed::ReviewPlan(..))
    }
}
