//! Typed frames: one payload struct per frame type and one constructor each.
//! Every frame the engine or the shell writes is built here, so a frame's
//! shape is defined once. `frame_schema` renders the JSON Schema of a whole
//! frame (envelope fields and payload) from these types; the checked-in
//! `events/schemas/frames/<type>.schema.json` files are that output, and a
//! test keeps them equal.

mod agent_frames;
mod branch_frames;
mod chat_frames;
mod frame_schemas;
mod governance_frames;
mod memory_frames;
mod metrics_frames;
mod narrative_frames;
mod panel_frames;

pub use governance_frames::{
    ContractSummary, HitlDecision, HitlRequestPayload, HitlResolvedPayload, PlanUpdatedPayload,
    PolicyEventPayload, PolicyTriggeredPayload, TriggerDetails, UpdatedNodeSummary, hitl_request,
    hitl_resolved, plan_updated, policy_event, policy_triggered,
};

pub use agent_frames::{
    AgentActivity, AgentStatePayload, ContextTrim, MessagePayload, ModelResponseSummary,
    PlanReadyForReviewPayload, PlanReviewPayload, ToolCallPayload, ToolResultPayload, agent_state,
    context_trimmed, message, plan_ready_for_review, plan_review, tool_call, tool_result,
};
pub use branch_frames::{NodeSkippedPayload, SkipReason, node_skipped};
pub use chat_frames::{
    LastTurnContextPayload, OntologyLoadedPayload, SessionPayload, last_turn_context,
    ontology_loaded, session,
};
#[cfg(test)]
pub(crate) use frame_schemas::test_support;
pub use frame_schemas::{FRAME_SCHEMA_DIRECTORY, frame_schema};
pub use memory_frames::{MemoryRecalledPayload, RecalledItem, memory_recalled};
pub use metrics_frames::{MetricsPayload, RunTotals, TokenTotals, metrics, node_metrics};
pub use narrative_frames::{HandoffPayload, HandoffStatus, PhasePayload, RunPhase, handoff, phase};
pub use panel_frames::{JudgeCallSummary, ProgressPayload, progress};

use std::borrow::Cow;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::basics::codes::{FailureCode, WarningCode};
use crate::basics::instant::Instant;
use crate::basics::schema::SchemaViolation;
use crate::basics::status::RunStatus;
use crate::contracts::capability::{AgentType, NodeKind};
use crate::contracts::compiler::FacetProvenance;
use crate::contracts::diagnostics::DiagnosticsBundle;
use crate::planning::plan::{PlanEdge, PlanNode};
use crate::wire::event::{EventDraft, EventType, FrameProvenance};
use crate::wire::frame_payload::FramePayload;

/// When a frame is written and under which plan version (0: no plan yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameStamp<'a> {
    /// Borrowed from the step that writes the frames (formatted once per
    /// step), or formatted for this stamp alone.
    timestamp: Cow<'a, str>,
    plan_version: u32,
    /// A child run's frames name their parent run.
    parent_run_id: Option<&'a str>,
}

impl<'a> FrameStamp<'a> {
    pub fn new(now: Instant, plan_version: u32) -> Self {
        FrameStamp {
            timestamp: Cow::Owned(now.rfc3339()),
            plan_version,
            parent_run_id: None,
        }
    }

    /// A stamp from an already formatted timestamp.
    pub(crate) fn from_parts(
        timestamp: Cow<'a, str>,
        plan_version: u32,
        parent_run_id: Option<&'a str>,
    ) -> Self {
        FrameStamp {
            timestamp,
            plan_version,
            parent_run_id,
        }
    }

    pub fn timestamp(&self) -> &str {
        &self.timestamp
    }

    fn draft(&self, event_type: EventType) -> EventDraft {
        let mut draft = EventDraft::new(event_type, &self.timestamp, self.plan_version);
        draft.parent_run_id = self.parent_run_id.map(str::to_string);
        draft
    }
}

fn to_payload<T: Serialize>(payload: &T) -> FramePayload {
    FramePayload::render(payload)
}

fn node_scoped(draft: EventDraft, node: &PlanNode) -> EventDraft {
    draft.node(&node.node_id).provenance(FrameProvenance {
        input: node.input_contract.provenance.clone(),
        output: node.output_contract.provenance.clone(),
    })
}

/// `start`: the run was accepted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StartPayload {
    pub run_id: String,
    pub thread_id: String,
    pub correlation_id: String,
    pub objective: String,
}

pub fn start(stamp: &FrameStamp, payload: &StartPayload) -> EventDraft {
    stamp
        .draft(EventType::Start)
        .message("run accepted")
        .payload(to_payload(payload))
}

/// Which planner drafted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlannerKind {
    Deterministic,
    Llm,
}

/// The capabilities a planning attempt could choose from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CapabilitySnapshotSummary {
    pub count: usize,
    pub capability_ids: Vec<String>,
}

/// `plan_requested`: a planning attempt starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanRequestedPayload {
    /// 1 for the first draft; an LLM planner's re-prompts count on.
    pub attempt: u32,
    pub planner: PlannerKind,
    /// The envelope's policy keys the planner honours.
    pub policy_keys: Vec<String>,
    pub capability_snapshot: CapabilitySnapshotSummary,
}

pub fn plan_requested(stamp: &FrameStamp, payload: &PlanRequestedPayload) -> EventDraft {
    stamp
        .draft(EventType::PlanRequested)
        .message("planning")
        .payload(to_payload(payload))
}

/// `plan_rejected`: a draft failed validation (and, when `willRetry` is
/// false, no plan satisfies the contract).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanRejectedPayload {
    pub attempt: u32,
    /// True when the planner re-plans with these diagnostics.
    pub will_retry: bool,
    /// The planner model's answer this draft was (its model and usage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<ModelResponseSummary>,
    #[serde(flatten)]
    pub diagnostics: DiagnosticsBundle,
}

pub fn plan_rejected(stamp: &FrameStamp, payload: &PlanRejectedPayload) -> EventDraft {
    let message = if payload.will_retry {
        format!(
            "draft {} rejected; re-planning with its diagnostics",
            payload.attempt
        )
    } else {
        "no plan satisfies the contract".to_string()
    };
    stamp
        .draft(EventType::PlanRejected)
        .message(message)
        .payload(to_payload(payload))
}

/// One node as `plan_generated` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlannedNodeSummary {
    pub node_id: String,
    pub capability_id: String,
    pub label: String,
    pub kind: NodeKind,
    pub agent_type: AgentType,
    pub derived: bool,
    pub provides: Vec<String>,
    pub enforces: Vec<String>,
    /// The catalog model serving the node, the deployment's default
    /// included (absent: no model runs the node, or the deployment names
    /// no default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// `plan_generated`: the validated plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanGeneratedPayload {
    pub plan_version: u32,
    pub planner_runtime: String,
    pub planner_model: Option<String>,
    pub nodes: Vec<PlannedNodeSummary>,
    pub edges: Vec<PlanEdge>,
    pub derived_capabilities: Vec<String>,
    pub branch_count: usize,
    pub normalization_injected: bool,
    pub metadata: Map<String, Value>,
    /// The planner model's answer this plan was drafted from (its model and
    /// usage); absent for a plan no model drafted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<ModelResponseSummary>,
    #[serde(flatten)]
    pub diagnostics: DiagnosticsBundle,
}

pub fn plan_generated(stamp: &FrameStamp, payload: &PlanGeneratedPayload) -> EventDraft {
    stamp
        .draft(EventType::PlanGenerated)
        .payload(to_payload(payload))
}

/// Who performs a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExecutorType {
    Ai,
    Human,
    /// Orchestrator-managed: computed by the engine, no capability called.
    Builtin,
    /// A judge panel: each judge is a model call of its own step.
    Panel,
    /// An agent session: model turns and tool calls, each a step.
    Agent,
}

/// What a human performer of a node needs: its contract, instructions and inputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeContractSummary {
    pub input_schema: Value,
    pub output_schema: Value,
    pub provenance: Vec<FacetProvenance>,
}

/// `node_start`: a node attempt begins (for a human node: the run parks on it).
// Borrows from the plan node: written at every node step, copied never.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeStartPayload<'a> {
    pub capability_id: Cow<'a, str>,
    pub kind: NodeKind,
    pub executor_type: ExecutorType,
    pub attempt: u32,
    pub input_facets: Cow<'a, [String]>,
    pub output_facets: Cow<'a, [String]>,
    /// Human nodes: the contract the answer must meet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<NodeContractSummary>,
    /// Human nodes: the capability's instructions. (The hooks rendering
    /// fills in an AI or agent node's from the plan.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Human nodes: the node's input facets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Map<String, Value>>,
    /// Human nodes: why the plan hands this work to a person (what it
    /// makes, for whom, or whose failed facets it takes over).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
    /// Human nodes: when the task's SLA passes (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due_at: Option<String>,
    /// The catalog model the node calls (the deployment's default model
    /// when nothing else is preferred); absent when no model runs the node
    /// (people, builtins, panels) or the deployment names no default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<Cow<'a, str>>,
    /// Human nodes that take over an escalated node's facets: that node
    /// and its failure (the task carries it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalated_from: Option<crate::records::governance::EscalationRecord>,
}

pub fn node_start(
    stamp: &FrameStamp,
    node: &PlanNode,
    payload: &NodeStartPayload<'_>,
) -> EventDraft {
    node_scoped(stamp.draft(EventType::NodeStart), node)
        .message(node.label.clone())
        .payload(to_payload(payload))
}

/// `node_complete`: a node's answer met its output contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeCompletePayload<'a> {
    pub attempt: u32,
    pub output_facets: Cow<'a, [String]>,
    // Shared with the node's ledger entry: not copied to build the frame.
    pub output: std::sync::Arc<Value>,
    /// Tokens over the node's attempts (zero for built-in and human nodes).
    pub usage: TokenTotals,
    /// The model that answered last, as the provider names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// From the node's start to its completion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// What its model calls cost (`registry/models.json`); absent when no
    /// call was priced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// A forked run's node whose output was reused from the run it was
    /// forked from (no call made here).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reused: bool,
    /// Human nodes: the signed-in user who answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<String>,
}

pub fn node_complete(
    stamp: &FrameStamp,
    node: &PlanNode,
    payload: &NodeCompletePayload<'_>,
) -> EventDraft {
    node_scoped(stamp.draft(EventType::NodeComplete), node).payload(to_payload(payload))
}

/// `node_error`: a node failed for good.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeErrorPayload {
    pub code: FailureCode,
    pub attempt: u32,
}

pub fn node_error(
    stamp: &FrameStamp,
    node: &PlanNode,
    message: impl Into<String>,
    payload: &NodeErrorPayload,
) -> EventDraft {
    node_scoped(stamp.draft(EventType::NodeError), node)
        .message(message)
        .payload(to_payload(payload))
}

/// What a `validation_error` is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ValidationScope {
    /// A node's input against its compiled input contract.
    NodeInput,
    /// A node's answer against its compiled output contract.
    NodeOutput,
    /// The assembled output against the caller's schema.
    Output,
    /// The output against the contract's hard JSONLogic constraints.
    Constraints,
}

/// A hard constraint that does not hold on the output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BrokenConstraint {
    pub constraint_id: String,
    /// The JSONLogic expression.
    pub constraint: Value,
}

/// The errors of a `validation_error`: schema violations, or broken constraints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ValidationErrors {
    Schema(Vec<SchemaViolation>),
    Constraints(Vec<BrokenConstraint>),
}

/// `validation_error`: something failed its contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ValidationErrorPayload {
    pub scope: ValidationScope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    pub errors: ValidationErrors,
}

/// A node-scoped `validation_error` (input or output of `node`).
pub fn node_validation_error(
    stamp: &FrameStamp,
    node: &PlanNode,
    message: impl Into<String>,
    payload: &ValidationErrorPayload,
) -> EventDraft {
    node_scoped(stamp.draft(EventType::ValidationError), node)
        .message(message)
        .payload(to_payload(payload))
}

/// A run-level `validation_error` (the assembled output, the constraints).
pub fn run_validation_error(
    stamp: &FrameStamp,
    message: impl Into<String>,
    payload: &ValidationErrorPayload,
) -> EventDraft {
    stamp
        .draft(EventType::ValidationError)
        .message(message)
        .payload(to_payload(payload))
}

/// `warning`: something a reader should know; the run goes on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WarningPayload {
    pub code: WarningCode,
    /// `planner_fallback`: the planner that took over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<PlannerKind>,
    /// `planner_fallback`: how many drafts were rejected before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected_drafts: Option<u32>,
    /// `model_price_unknown`: the model the price table does not name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `legacy_policy_normalized`: the JSON path of the key it is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// `budget_nearly_spent`: the budget, its limit and what is spent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetReport>,
    /// `context_trimmed`: what was left out of the request, and the tokens
    /// reckoned against the model's budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<ContextTrim>,
}

impl WarningPayload {
    pub fn of(code: WarningCode) -> Self {
        WarningPayload {
            code,
            fallback: None,
            rejected_drafts: None,
            model: None,
            field: None,
            budget: None,
            context: None,
        }
    }
}

/// A run budget against what the run spent of it (`warning`
/// `budget_nearly_spent`, `error` `budget_exceeded`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BudgetReport {
    /// The envelope field that sets it (`$.constraints.maxCostUsd`,
    /// `$.constraints.maxDurationSeconds`).
    pub field: String,
    /// `usd` or `seconds`.
    pub unit: String,
    pub limit: f64,
    pub spent: f64,
    /// The node whose model call the budget stopped, or the node that ran
    /// last when a deadline passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
}

/// A `warning`, about `node_id` when given.
pub fn warning(
    stamp: &FrameStamp,
    node_id: Option<&str>,
    message: impl Into<String>,
    payload: &WarningPayload,
) -> EventDraft {
    let draft = stamp.draft(EventType::Warning);
    let draft = match node_id {
        Some(node_id) => draft.node(node_id),
        None => draft,
    };
    draft.message(message).payload(to_payload(payload))
}

/// `delta`: streamed answer text of a node (`message`); no payload.
pub fn delta(stamp: &FrameStamp, node_id: &str, text: String) -> EventDraft {
    stamp.draft(EventType::Delta).node(node_id).message(text)
}

/// `error`: the run ended without output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ErrorPayload {
    pub code: FailureCode,
    pub status: RunStatus,
    /// Which part of the orchestrator the failure comes from (the code's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<crate::basics::codes::FailureComponent>,
    /// The run's phase when it failed (`planning`, `generation`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<RunPhase>,
    /// The tool the failing node's agent called last, when it called one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// `budget_exceeded`: the budget, its limit and the spend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetReport>,
}

pub fn error(stamp: &FrameStamp, message: impl Into<String>, payload: &ErrorPayload) -> EventDraft {
    stamp
        .draft(EventType::Error)
        .message(message)
        .payload(to_payload(payload))
}

/// `complete`: the run's output, valid for the caller's contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompletePayload {
    pub output: Value,
    pub status: RunStatus,
    /// The plan's symbolic satisfaction score.
    pub satisfaction_score: Option<f64>,
    /// The constraints' weighted score on the real output.
    pub observed_satisfaction: f64,
    /// From the run's creation to this frame (milliseconds). Every
    /// `complete` written since 2026-11-29 has it; a stored frame written
    /// before does not (history is served as it was written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// How the delivered output scored, and by whom: a reviewer's score of
    /// the delivered draft, else the constraints' on the output. Every
    /// `complete` written since 2026-11-29 has it; a stored frame written
    /// before does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<QualityReport>,
    /// The reviewer's verdict on each acceptance criterion of the delivered
    /// draft (`[{criterion, pass, evidence}]`), when it gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acceptance_report: Option<Value>,
}

pub use crate::state::delivered_quality::{QualityReport, QualitySource};

pub fn complete(stamp: &FrameStamp, payload: &CompletePayload) -> EventDraft {
    stamp
        .draft(EventType::Complete)
        .payload(to_payload(payload))
}

/// `log`: free text for operators (stores' conformance suite writes these).
pub fn log(stamp: &FrameStamp, message: impl Into<String>) -> EventDraft {
    stamp.draft(EventType::Log).message(message)
}
