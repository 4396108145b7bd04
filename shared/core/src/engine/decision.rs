//! What the engine's transitions produce and read: a step's [`Decision`]
//! (new state, frames, outbox, transcripts, exchanges, entries), what a
//! step advanced to ([`StepAdvance`]), the identity of a new run, the
//! planner chosen, and the read-only [`EngineContext`]. Types only: every
//! transition stands on them.

use crate::basics::schema::SchemaViolation;
use crate::basics::schema::ValidatorCache;
use crate::catalog::registry::Registry;
use crate::state::run::{NodeStatus, RunState, RunStatus, StepMessage};
use crate::wire::event::EventDraft;

/// Default bound on attempts per node: the first try plus two re-prompts.
pub const DEFAULT_MAX_NODE_ATTEMPTS: u32 = 3;

/// Default bound on LLM planner drafts before the deterministic planner takes over.
pub const DEFAULT_MAX_PLANNER_ATTEMPTS: u32 = 3;

/// Default SLA of a human task: unanswered after this, the run fails.
pub const DEFAULT_HUMAN_TASK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(900);

/// What one step decided: committed in one transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub state: RunState,
    pub events: Vec<EventDraft>,
    pub outbox: Vec<StepMessage>,
    /// Judge panel transcripts concluded in this step: the shell hands each
    /// to its transcript publisher before it commits (at least once; a
    /// re-applied step publishes again under the same idempotency key).
    pub transcripts: Vec<crate::contracts::panels::TranscriptPublication>,
    /// Chat exchanges answered in this step: the shell records each in its
    /// thread before it commits (recording one twice changes nothing).
    pub exchanges: Vec<ThreadExchange>,
    /// Entries written beside the run in the same commit (conversation
    /// turns, judge calls: `crate::records::entries`).
    pub entries: Vec<crate::records::entries::RunEntry>,
}

/// A chat exchange for the thread it belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadExchange {
    pub thread_id: String,
    pub exchange: crate::records::chat::ChatExchange,
}

/// Identity of a new run, chosen by the shell.
#[derive(Debug, Clone)]
pub struct NewRunIdentity {
    pub run_id: String,
    pub tenant_id: String,
    pub correlation_id: String,
    pub thread_id: String,
    /// The run's trace (`trace_context::RunTrace`).
    pub trace: Option<crate::basics::trace_context::RunTrace>,
    /// The user the submitting request named, when it named one.
    pub submitted_by: Option<String>,
}

/// Which planner drafts plans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PlannerChoice {
    /// Backward chaining over facet coverage; no model call.
    #[default]
    Deterministic,
    /// A model drafts, the validator proves, rejected drafts are re-prompted
    /// with their diagnostics; the deterministic planner is the fallback.
    Llm,
}

/// Read-only collaborators of the engine.
#[derive(Clone, Copy)]
pub struct EngineContext<'a> {
    /// For planning: the registry files plus the tenant's active
    /// registrations. Planned nodes carry their own compiled contracts.
    pub registry: &'a Registry,
    pub validators: &'a ValidatorCache,
    pub planner: PlannerChoice,
    pub max_planner_attempts: u32,
    /// A human task's SLA (`BATON_HUMAN_TASK_TIMEOUT_SECONDS`).
    pub human_task_timeout: std::time::Duration,
    /// How long an agent session may last across its steps
    /// (`BATON_SESSION_MAX_SECONDS`).
    pub agent_session_limit: std::time::Duration,
    /// Runs that end or park are announced on the event bus
    /// (`BATON_EVENT_BUS` is set).
    pub announce_to_event_bus: bool,
    /// Registered capabilities that are not active now (heartbeat lapsed,
    /// or deregistered), as the shell found them before a node step: a
    /// node of one is escalated, never called. Usually
    /// [`NO_CAPABILITY_UNAVAILABLE`].
    pub unavailable_capabilities: &'a std::collections::BTreeSet<String>,
    /// The tenant's recent calls per capability, as the shell kept them:
    /// an escalation orders the capabilities that could take a node over
    /// by it. Usually [`NO_HEALTH`](crate::catalog::capability_health::NO_HEALTH) in tests.
    pub capability_health: &'a crate::catalog::capability_health::HealthTable,
    /// The registry ranked for the run's objective by words fused with the
    /// deployment's embeddings, best first, as the shell found it before a
    /// plan or replan step. `None` (no embedding model, another step): the
    /// planner ranks by words itself.
    pub capability_relevance: Option<&'a [String]>,
}

impl<'a> EngineContext<'a> {
    /// The orders a plan drafted afresh ranks candidates by: relevance,
    /// no health (only an escalation has one).
    pub fn fresh_plan_orders(&self) -> crate::planning::planner::CandidateOrders<'a> {
        crate::planning::planner::CandidateOrders {
            health: &[],
            relevance: self.capability_relevance,
        }
    }
}

/// No capability is unavailable (the registry files' are always active).
pub static NO_CAPABILITY_UNAVAILABLE: std::collections::BTreeSet<String> =
    std::collections::BTreeSet::new();

/// Why a human's answer or decline changes nothing.
#[derive(Debug, Clone, PartialEq)]
pub enum HumanInputRefused {
    /// The node is not waiting for a person (no such node, answered
    /// already, or the run ended).
    NotAwaiting {
        run_status: RunStatus,
        node_status: Option<NodeStatus>,
    },
    /// The plan changed since the task was handed out.
    StalePlanVersion { current: u32 },
    /// The answer breaks the node's output contract (paths into the answer).
    OutputContractViolated(Vec<SchemaViolation>),
    /// No approval request or question of that kind is pending.
    NoPendingRequest { run_status: RunStatus },
    /// Another request is pending than the one named.
    UnknownRequest { pending: String },
    /// The run is not paused.
    NotPaused { run_status: RunStatus },
    /// A clarifying question needs a non-empty textual answer.
    AnswerRequired,
    /// The envelope has no enabled `manual` policy of that id (or the run ended).
    NoManualPolicy {
        policy_id: String,
        run_status: RunStatus,
    },
    /// The task is assigned to others than the one answering.
    NotAssignee {
        assigned_to: crate::state::tasks::Assignment,
    },
}

impl Decision {
    /// Writes a ledger's receipt for `publication` into everything this
    /// step commits that carries its transcript (the node's answer, the
    /// run's output, the frames), before the commit: what is stored and
    /// streamed names the ledger's topic and each message's transaction.
    pub fn stamp_ledger_receipt(
        &mut self,
        publication: &crate::contracts::panels::TranscriptPublication,
        receipt: &crate::contracts::panels::LedgerReceipt,
    ) {
        use crate::contracts::panels::stamp_ledger_receipt;
        let topic = publication.transcript.topic_id.as_str();
        let quoted_topic = format!("\"{topic}\"");
        for record in self.state.nodes.values_mut() {
            let carries = record
                .output
                .as_ref()
                .is_some_and(|output| output.to_string().contains(&quoted_topic));
            if carries {
                let record = std::sync::Arc::make_mut(record);
                if let Some(output) = record.output.as_mut() {
                    stamp_ledger_receipt(std::sync::Arc::make_mut(output), topic, receipt);
                }
            }
        }
        if let Some(output) = self.state.output.as_mut() {
            stamp_ledger_receipt(output, topic, receipt);
        }
        for event in &mut self.events {
            if let Some(payload) = event.payload.as_mut()
                && payload.json().contains(&quoted_topic)
            {
                payload.edit(|value| stamp_ledger_receipt(value, topic, receipt));
            }
        }
    }
}
