//! Run state, node ledger and step messages: what the run store persists and
//! what the step queue carries.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::basics::codes::FailureCode;
use crate::basics::schema::SchemaViolation;
pub use crate::basics::status::{NodeStatus, RunStatus};
pub use crate::basics::usage::TokenUsage;
use crate::contracts::diagnostics::DiagnosticsBundle;
use crate::contracts::envelope::TaskEnvelope;
use crate::planning::plan::PlanGraph;
use crate::records::governance::Governance;
pub use crate::state::step_message::{StepCommand, StepMessage};

/// One node's ledger entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeRecord {
    /// Private: read with [`NodeRecord::status`]; only the engine's life
    /// cycle changes it, through named transitions.
    status: NodeStatus,
    /// The attempt the current step message is for (0 before scheduling).
    pub current_attempt: u32,
    /// Shared, so loading a run does not copy every node's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Arc<Value>>,
    /// Violations of the previous attempt, fed back to the next one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub feedback: Vec<SchemaViolation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default)]
    pub usage: TokenUsage,
    /// The model that answered last (as the provider names it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// What the node's model calls cost (`registry/models.json`); None when
    /// no call was priced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Attempts made before this round (a replan's re-run, a clarified
    /// re-run): the attempt bound counts from here.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub attempt_base: u32,
    /// When the current attempt started (Unix ms), for its `metrics`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at_millis: Option<u64>,
    /// Agent nodes: model turns taken over all attempts (turn numbers
    /// continue across attempts, so tool calls' keys never repeat).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub agent_turns: u32,
    /// Human nodes: who answered (the signed-in user), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<String>,
}

fn has_no_usage(usage: &Arc<BTreeMap<UsageOperation, Spend>>) -> bool {
    usage.is_empty()
}

fn has_no_stamps(stamps: &Arc<BTreeMap<String, crate::records::audit::FacetStamp>>) -> bool {
    stamps.is_empty()
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}

impl NodeRecord {
    /// Where the node is in its life cycle.
    pub fn status(&self) -> NodeStatus {
        self.status
    }

    /// The one write of a node's status: the engine's life cycle calls it
    /// for a transition it has checked (an architecture test refuses a
    /// call anywhere else).
    pub(crate) fn set_status_by_life_cycle(&mut self, status: NodeStatus) {
        self.status = status;
    }

    /// Test fixtures only (feature `test-fixtures`): the record as a step
    /// would have left it in `status`.
    #[cfg(feature = "test-fixtures")]
    pub fn set_status_for_fixtures(&mut self, status: NodeStatus) {
        self.status = status;
    }

    pub fn pending() -> Self {
        NodeRecord {
            status: NodeStatus::Pending,
            current_attempt: 0,
            output: None,
            feedback: Vec::new(),
            error: None,
            usage: TokenUsage::default(),
            model: None,
            cost_usd: None,
            attempt_base: 0,
            started_at_millis: None,
            agent_turns: 0,
            answered_by: None,
        }
    }
}

/// The largest child outputs (as JSON) a `ChildRunEnded` message carries
/// itself; larger ones go by reference to the child run.
pub const CHILD_OUTPUTS_INLINE_BYTES: usize = 64 * 1024;

/// `summary` with its `outputs` left out (and `outputsByReference: true`)
/// when they are over [`CHILD_OUTPUTS_INLINE_BYTES`] as JSON.
pub fn summary_for_message(mut summary: Value) -> Value {
    let large = summary
        .get("outputs")
        .and_then(|outputs| serde_json::to_vec(outputs).ok())
        .is_some_and(|json| json.len() > CHILD_OUTPUTS_INLINE_BYTES);
    if large && let Some(fields) = summary.as_object_mut() {
        fields.remove("outputs");
        fields.insert("outputsByReference".into(), Value::Bool(true));
    }
    summary
}

/// The child run whose outputs `summary` names by reference, if it does.
pub fn summary_outputs_by_reference(summary: &Value) -> Option<&str> {
    if summary.get("outputsByReference") != Some(&Value::Bool(true)) {
        return None;
    }
    summary.get("runId").and_then(Value::as_str)
}

/// Why a run ended without output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunFailure {
    pub code: FailureCode,
    pub message: String,
}

/// The four ids a run is known by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunIds {
    pub run_id: String,
    pub tenant_id: String,
    pub correlation_id: String,
    pub thread_id: String,
}

/// Everything the engine knows about a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunState {
    pub run_id: String,
    pub tenant_id: String,
    pub correlation_id: String,
    pub thread_id: String,
    /// Immutable for the run's life; shared so loading a run is cheap.
    pub envelope: Arc<TaskEnvelope>,
    /// Private: read with [`RunState::status`]; only the engine's life
    /// cycle changes it, through named transitions.
    status: RunStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Immutable once generated (a replan stores a new version).
    pub plan: Option<Arc<PlanGraph>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Shared: loading or stepping a run does not copy the diagnostics.
    pub plan_diagnostics: Option<Arc<DiagnosticsBundle>>,
    /// Each record shared until a step changes it (`Arc::make_mut`):
    /// loading a run for a step copies pointers, not every node's record.
    #[serde(default)]
    pub nodes: BTreeMap<String, Arc<NodeRecord>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_satisfaction: Option<f64>,
    /// The delivered output's quality, as `complete` reported it (boxed:
    /// a step moves the state several times, and most steps have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<Box<crate::state::delivered_quality::QualityReport>>,
    /// The reviewer's verdict per acceptance criterion of the delivered
    /// draft, as `complete` reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acceptance_report: Option<Box<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<RunFailure>,
    #[serde(with = "crate::basics::instant::rfc3339")]
    pub created_at: crate::basics::instant::Instant,
    #[serde(with = "crate::basics::instant::rfc3339")]
    pub updated_at: crate::basics::instant::Instant,
    /// Bound on attempts per node (first try plus re-prompts).
    pub max_node_attempts: u32,
    /// Policy firings, holds, clarifications and timers.
    #[serde(default, skip_serializing_if = "Governance::is_empty")]
    pub governance: Governance,
    /// The phase last announced (`phase` frames are written on each change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<crate::wire::frames::RunPhase>,
    /// Panel nodes at work, by node id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub panels: BTreeMap<String, crate::contracts::panels::PanelProgress>,
    /// Agent sessions at work, by node id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sessions: BTreeMap<String, crate::records::agents::AgentSession>,
    /// Chat runs: the message and the thread it continues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<Box<crate::records::chat::ChatTurn>>,
    /// A child run: the agent session's tool call that started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<Box<crate::records::agents::ParentLink>>,
    /// Completion notifications due or delivered, by id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub notifications: BTreeMap<String, crate::records::notifications::NotificationRecord>,
    /// What the completed run remembered (its `Remember` steps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remembering: Option<Box<crate::records::remembered::RememberRecord>>,
    /// Models that answered but have no price (each is warned about once).
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub unpriced_models: std::collections::BTreeSet<String>,
    /// Model answers the run's nodes received (node attempts, judges, agent
    /// turns): what `constraints.maxTurns` bounds.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub model_turns: u32,
    /// What the planner model's drafts used (every draft of every plan
    /// version, rejected ones too): no node's, but the run's, so counted in
    /// its usage, cost and budgets.
    #[serde(default, skip_serializing_if = "Spend::is_empty")]
    pub planner_spend: Spend,
    /// What nodes a newer plan version dropped had used: theirs no more,
    /// still the run's.
    #[serde(default, skip_serializing_if = "Spend::is_empty")]
    pub retired_spend: Spend,
    /// A replan the planner model is drafting (`StepCommand::Replan`):
    /// nothing new is scheduled until its version replaces the plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_replan: Option<Box<crate::state::replan_cause::PendingReplan>>,
    /// Decisions the turn-by-turn orchestrator made
    /// (`policies.planner.turnByTurn`), its final one included.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub orchestrator_turns: u32,
    /// The run this one was forked from (`engine::fork_run`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<Box<ForkOrigin>>,
    /// The run's trace (`trace_context`): chosen at creation, from the
    /// caller's `traceparent` when there was one. Runs stored before traces
    /// existed have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::basics::trace_context::RunTrace>,
    /// The user the submitting request named (`X-Baton-User`), for usage
    /// attribution; absent when it named none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitted_by: Option<String>,
    /// Each plan version: when it was put in force and why (runs stored
    /// before this was kept have none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plan_history: Vec<crate::records::audit::PlanVersionRecord>,
    /// What the run's model calls used, by what they were for (planning,
    /// execution, review, judge, summary): the audit's split of the totals.
    /// Shared: loading a run for a step copies a pointer; a step that
    /// records usage copies it then (`Arc::make_mut`).
    #[serde(default, skip_serializing_if = "has_no_usage")]
    pub usage_by_operation: Arc<BTreeMap<UsageOperation, Spend>>,
    /// The registry facets the run's plans used, as they were when planned.
    /// Shared: loading a run for a step copies a pointer, not the stamps.
    #[serde(default, skip_serializing_if = "has_no_stamps")]
    pub facet_snapshot: Arc<BTreeMap<String, crate::records::audit::FacetStamp>>,
    /// The stored format this state was written in (states written before
    /// the field existed are format 1). A store reads a stored state with
    /// `stored_format::decode_stored_run_state`, which migrates an older
    /// format first.
    #[serde(default = "crate::state::run_format::first_format")]
    pub format_version: u32,
}

/// Where a forked run came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkOrigin {
    pub run_id: String,
    /// The fork point, as said (`planVersion 1`, `eventId 42`).
    pub at: String,
    /// The nodes whose outputs were reused (not run again).
    pub reused_nodes: Vec<String>,
}

impl RunState {
    /// A run as admission creates it: queued, nothing planned, nothing
    /// spent. The only place a run's first status is set.
    pub(crate) fn queued(
        ids: RunIds,
        envelope: Arc<TaskEnvelope>,
        now: crate::basics::instant::Instant,
        max_node_attempts: u32,
    ) -> Self {
        RunState {
            run_id: ids.run_id,
            tenant_id: ids.tenant_id,
            correlation_id: ids.correlation_id,
            thread_id: ids.thread_id,
            envelope,
            status: RunStatus::Queued,
            plan: None,
            plan_diagnostics: None,
            nodes: Default::default(),
            output: None,
            observed_satisfaction: None,
            quality: None,
            acceptance_report: None,
            failure: None,
            created_at: now,
            updated_at: now,
            max_node_attempts: max_node_attempts.max(1),
            governance: Default::default(),
            phase: None,
            panels: Default::default(),
            sessions: Default::default(),
            chat: None,
            parent: None,
            notifications: Default::default(),
            remembering: None,
            unpriced_models: Default::default(),
            model_turns: 0,
            planner_spend: Default::default(),
            retired_spend: Default::default(),
            pending_replan: None,
            orchestrator_turns: 0,
            forked_from: None,
            trace: None,
            plan_history: Vec::new(),
            usage_by_operation: Default::default(),
            facet_snapshot: Default::default(),
            submitted_by: None,
            format_version: crate::state::run_format::RUN_STATE_FORMAT_VERSION,
        }
    }

    /// Where the run is in its life cycle.
    pub fn status(&self) -> RunStatus {
        self.status
    }

    /// The one write of the status after admission: the engine's life
    /// cycle calls it for a transition it has checked (an architecture
    /// test refuses a call anywhere else).
    pub(crate) fn set_status_by_life_cycle(&mut self, status: RunStatus) {
        self.status = status;
    }

    /// Test fixtures only (feature `test-fixtures`): the state as a step
    /// would have left it in `status`, for a store's conformance suite.
    #[cfg(feature = "test-fixtures")]
    pub fn set_status_for_fixtures(&mut self, status: RunStatus) {
        self.status = status;
    }

    /// Where this run lives (its tenant and id), as the stores address it.
    pub fn key(&self) -> crate::basics::ids::RunKey<'_> {
        crate::basics::ids::RunKey::new(&self.tenant_id, &self.run_id)
    }

    /// The node's record, to change: copied first if a loaded copy of the
    /// run still shares it.
    pub fn node_mut(&mut self, node_id: &str) -> Option<&mut NodeRecord> {
        self.nodes.get_mut(node_id).map(Arc::make_mut)
    }

    /// How a child run ended, as its parent's tool call result: status, output
    /// (when it completed), the failure (when not), tokens.
    pub fn child_summary(&self) -> Value {
        let state = self;
        let usage = state.total_usage();
        let mut summary = serde_json::json!({
            "runId": state.run_id,
            "status": state.status.as_str(),
            "usage": {"promptTokens": usage.prompt_tokens, "completionTokens": usage.completion_tokens},
        });
        if let Some(output) = &state.output {
            summary["outputs"] = output.clone();
        }
        if let Some(failure) = &state.failure {
            summary["failure"] =
                serde_json::json!({"code": failure.code, "message": failure.message});
        }
        // How the parent's free-text outputs became facets
        // (`agent_create_plan`), when they were not named exactly.
        if let Some(resolved) = state
            .envelope
            .metadata
            .as_ref()
            .and_then(|metadata| metadata.get("resolvedOutputs"))
        {
            summary["resolvedOutputs"] = resolved.clone();
        }
        summary
    }

    /// The child runs this run's agent sessions wait for: started by a tool
    /// call and not yet reported ended. Cancelling the run cancels them.
    pub fn awaited_child_runs(&self) -> Vec<String> {
        self.sessions
            .values()
            .flat_map(|session| &session.pending)
            .filter_map(|call| call.child_run_id.clone())
            .collect()
    }

    /// The tool an agent session of the run asked for last and has not had
    /// answered yet (an `error` frame's `tool`): the call the run was
    /// waiting on when it failed.
    pub fn last_tool_called(&self) -> Option<String> {
        self.sessions
            .values()
            .flat_map(|session| &session.pending)
            .max_by_key(|call| call.requested_at_millis)
            .map(|call| call.tool_name.clone())
    }

    /// The current plan's version; 0 before a plan exists.
    pub fn plan_version(&self) -> u32 {
        self.plan.as_ref().map_or(0, |plan| plan.plan_version)
    }

    /// Token use summed over every node.
    pub fn total_usage(&self) -> TokenUsage {
        let mut usage = self
            .nodes
            .values()
            .fold(self.planner_spend.usage, |mut total, record| {
                total.add(&record.usage);
                total
            });
        usage.add(&self.retired_spend.usage);
        usage
    }

    /// What the priced model calls of every node and of the planner cost;
    /// None when none was priced.
    pub fn total_cost_usd(&self) -> Option<f64> {
        self.nodes
            .values()
            .filter_map(|record| record.cost_usd)
            .chain(self.planner_spend.cost_usd)
            .chain(self.retired_spend.cost_usd)
            .reduce(|total, cost| total + cost)
            .map(crate::catalog::model_catalog::round_cost)
    }
}

/// What a model call was for.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum UsageOperation {
    /// The planner model drafting a plan version.
    Planning,
    /// A node doing the work: a model node, an agent's turns.
    Execution,
    /// A reviewer node (kind `validation`, or a capability with a
    /// `qualityScore`).
    Review,
    /// A judge of a panel.
    Judge,
    /// A chat thread's history summarised.
    Summary,
}

impl UsageOperation {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Model tokens and their cost (None: no priced call) outside the plan's
/// nodes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spend {
    #[serde(default)]
    pub usage: TokenUsage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl Spend {
    pub fn is_empty(&self) -> bool {
        self.usage == TokenUsage::default() && self.cost_usd.is_none()
    }

    pub fn add(&mut self, usage: &TokenUsage, cost_usd: Option<f64>) {
        self.usage.add(usage);
        if let Some(cost) = cost_usd {
            self.cost_usd = Some(self.cost_usd.unwrap_or(0.0) + cost);
        }
    }
}

impl<'a> crate::wire::frames::FrameStamp<'a> {
    /// Stamp for `state` at `now`: its current plan version (and parent).
    pub fn for_run(state: &'a RunState, now: crate::basics::instant::Instant) -> Self {
        Self::from_parts(
            std::borrow::Cow::Owned(now.rfc3339()),
            state.plan_version(),
            state.parent.as_ref().map(|parent| parent.run_id.as_str()),
        )
    }
}
