//! The narrow, object-safe ports the use cases drive. Adapters: `memory`
//! (embedded default), `baton-llm` (model providers), the AWS adapters.

use std::time::Duration;

use async_trait::async_trait;
use baton_core::basics::ids::RunKey;
use baton_core::basics::instant::Instant;
use baton_core::contracts::capability::RegisteredCapability;
use baton_core::records::entries::RunEntry;
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunState, StepMessage};
use baton_core::state::tasks::{HumanTask, PendingRequest, human_tasks, pending_request};
use baton_core::wire::event::{EventDraft, EventFrame};
use tokio::sync::mpsc::UnboundedSender;

use crate::error::{LlmError, QueueError, StoreError};

mod audit_ports;
mod embedding_ports;
#[cfg(feature = "evaluations")]
pub mod evaluation_ports;
mod memory_ports;
mod outbox_ports;
mod request_key_ports;
mod schedule_ports;
mod secret_ports;
mod store_upkeep;
mod thread_ports;
pub use audit_ports::{AuditAppend, AuditLog, AuditOutcome, AuditPage, AuditQuery, AuditRecord};
pub use embedding_ports::TextEmbedder;
pub use memory_ports::{MemoryPut, MemoryStore};
pub use outbox_ports::{OutboxQuiet, OutboxStore, QuietOutboxEntry};
pub use request_key_ports::{ClaimTimes, RequestKeyClaim, RequestKeyRecord, RequestKeys};
pub use schedule_ports::{ScheduleBook, ScheduleTriggers, ScheduleWrite, StoreKeepsSchedules};
pub use secret_ports::{
    CachedSecrets, EnvironmentLookup, HeaderResolutionError, NoSecrets, ResolvedHeaders,
    SECRET_CACHE_TIME, SecretError, SecretStore, SecretValue, resolve_headers,
};
pub use store_upkeep::{
    ExpiredRunsBatch, RetentionUpkeep, StreamCaps, StreamLeases, StreamOpening,
};
pub use thread_ports::{ThreadPage, ThreadStore};

/// A run as stored, with the version commits are conditional on.
#[derive(Debug, Clone)]
pub struct StoredRun {
    pub state: RunState,
    pub version: u64,
}

/// Result of creating a run.
#[derive(Debug, Clone, PartialEq)]
pub enum CreateOutcome {
    Created,
    /// The idempotency key was already used: this is that run's id.
    AlreadyExists {
        run_id: String,
    },
    /// The tenant already has `live_runs` runs at work, its limit: nothing
    /// was written (see [`RunLog::create_run_within`]).
    LiveRunLimitReached {
        live_runs: u64,
    },
}

/// Result of claiming a node attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimOutcome {
    Claimed,
    /// Another worker holds an unexpired lease on the attempt.
    HeldByOther {
        lease_expires_at: Instant,
    },
}

/// A node-attempt claim request.
#[derive(Debug, Clone)]
pub struct NodeClaim<'a> {
    /// What the lease protects, in the form the store keeps it under
    /// (`baton_core::basics::claims::ClaimKey::storage_key`).
    pub claim_key: &'a str,
    pub attempt: u32,
    pub worker_id: &'a str,
    pub now: Instant,
    pub lease_expires_at: Instant,
}

/// What one step commits, in one conditional write.
#[derive(Debug, Clone)]
pub struct StepCommit {
    /// The commit applies only if the run is still at this version.
    pub expected_version: u64,
    /// The run's status at `expected_version` (what the caller loaded):
    /// a commit that moves the run into or out of work (queued, running)
    /// moves the tenant's live-run counter in the same write. A store may
    /// make the write conditional on it too.
    pub previous_status: baton_core::state::run::RunStatus,
    /// When the run's records may be deleted: set by the commit that ends
    /// the run (now + the tenant's retention), `None` while it is at work
    /// or parked (a run that waits never expires).
    pub retain_until: Option<Instant>,
    pub state: RunState,
    /// Appended with contiguous sequence numbers.
    pub events: Vec<EventDraft>,
    /// Step messages to send once committed.
    pub outbox: Vec<StepMessage>,
    /// The handled message's outbox entry, consumed by this write.
    pub consumed_message_id: Option<String>,
    /// Entries written beside the run (`baton_core::records::entries`): put under
    /// their keys in the same transaction.
    pub entries: Vec<RunEntry>,
}

/// A run's log and its commits: the run created, loaded, committed step by
/// step (state, frames, outbox, entries in one conditional write), its
/// entries and frames read, frames streamed outside a commit. What a step,
/// a person's input, a follower of a stream and an admission use.
#[async_trait]
pub trait RunLog: Send + Sync {
    /// Persists a new run with its first events and outbox, atomically, with
    /// no live-run limit (see [`RunLog::create_run_within`]).
    async fn create_run(
        &self,
        state: &RunState,
        events: Vec<EventDraft>,
        outbox: Vec<StepMessage>,
        idempotency_key: Option<&str>,
    ) -> Result<CreateOutcome, StoreError> {
        self.create_run_within(state, events, outbox, idempotency_key, None)
            .await
    }

    /// Persists a new run with its first events and outbox, atomically. A
    /// run created at work (queued, running) counts in its tenant's
    /// live-run counter in the same write; with `live_run_limit`, the write
    /// is conditional on the counter being below it
    /// ([`CreateOutcome::LiveRunLimitReached`] otherwise, nothing written).
    async fn create_run_within(
        &self,
        state: &RunState,
        events: Vec<EventDraft>,
        outbox: Vec<StepMessage>,
        idempotency_key: Option<&str>,
        live_run_limit: Option<u64>,
    ) -> Result<CreateOutcome, StoreError>;

    /// Strongly consistent read.
    async fn load_run(&self, key: RunKey<'_>) -> Result<Option<StoredRun>, StoreError>;

    /// One transaction: new state, events (contiguous sequence numbers),
    /// version + 1 (conditional on `commit.expected_version`), outbox
    /// entries, the consumed entry removed, and the run entries put.
    /// Returns the new version.
    async fn commit_step(&self, key: RunKey<'_>, commit: StepCommit) -> Result<u64, StoreError>;

    /// The run entries whose keys start with `prefix`, in key order
    /// (strongly consistent: a step reads what the commit before it wrote).
    async fn read_entries(
        &self,
        key: RunKey<'_>,
        prefix: &str,
    ) -> Result<Vec<RunEntry>, StoreError>;

    /// Appends events outside a commit (streamed deltas); returns the last sequence.
    async fn append_events(
        &self,
        key: RunKey<'_>,
        events: Vec<EventDraft>,
    ) -> Result<u64, StoreError>;

    /// Frames with `id > after_sequence`, oldest first, at most `limit`.
    async fn read_events(
        &self,
        key: RunKey<'_>,
        after_sequence: u64,
        limit: usize,
    ) -> Result<Vec<EventFrame>, StoreError>;

    /// The run's last frame's sequence (0: none yet), strongly consistent;
    /// `None`: no such run. The stores read the one number they keep; this
    /// default (for wrappers that do not pass it through) pages the log.
    async fn last_sequence(&self, key: RunKey<'_>) -> Result<Option<u64>, StoreError> {
        let mut last = 0;
        loop {
            match self.read_events(key, last, 1_000).await {
                Ok(page) => match page.last() {
                    Some(frame) => last = frame.id,
                    None => return Ok(Some(last)),
                },
                Err(StoreError::RunNotFound) => return Ok(None),
                Err(error) => return Err(error),
            }
        }
    }
}

/// Leases on node attempts: claimed before a capability runs (so a twin
/// delivery does not call the model again), renewed while it runs, released
/// after a failure that loses the attempt's result. The step's only.
#[async_trait]
pub trait NodeLeases: Send + Sync {
    /// Claims an attempt with a lease; on success appends `events_on_claim`.
    /// A lease held by another claimant is taken over once it has expired,
    /// or at once when the store can prove its claimant is gone (SQLite: the
    /// claimant's process no longer holds its lock file).
    async fn claim_node(
        &self,
        key: RunKey<'_>,
        claim: NodeClaim<'_>,
        events_on_claim: Vec<EventDraft>,
    ) -> Result<ClaimOutcome, StoreError>;

    /// Gives up a claim this claimant holds (after a failure that loses the
    /// attempt's result), so a redelivery need not wait for the lease to expire.
    /// A claim held by anyone else is left alone.
    async fn release_claim(
        &self,
        key: RunKey<'_>,
        node_id: &str,
        attempt: u32,
        claimant: &str,
    ) -> Result<(), StoreError>;

    /// Extends a claim this claimant holds to `lease_expires_at` (the
    /// heartbeat while its capability runs). `false` when the claimant no
    /// longer holds it (released, or taken over after it expired).
    async fn renew_claim(&self, key: RunKey<'_>, claim: NodeClaim<'_>) -> Result<bool, StoreError>;

    /// Whether any step of the run holds a lease that stands at `now`
    /// (unexpired, and on SQLite its process alive): the sweeper leaves
    /// such a run's outbox alone, its holder is at work.
    async fn run_holds_live_lease(&self, key: RunKey<'_>, now: Instant)
    -> Result<bool, StoreError>;
}

/// Reads across a tenant's runs: the runs list and what waits for people
/// (runs awaiting a person, their tasks and pending requests).
#[async_trait]
pub trait RunQueries: Send + Sync {
    /// The tenant's runs at work (queued or running), read from the counter
    /// the commits keep: one read, whatever the tenant's history.
    async fn live_runs(&self, tenant_id: &str) -> Result<u64, StoreError>;

    /// One page of the tenant's runs, newest first (`query.limit` at most,
    /// of `query.status` when given, older than `query.cursor` when given).
    async fn list_runs(
        &self,
        tenant_id: &str,
        query: &baton_core::state::listing::RunListQuery,
    ) -> Result<baton_core::state::listing::RunListPage, StoreError>;

    /// The tenant's runs waiting for a person (status `awaiting_human`,
    /// `awaiting_hitl` or `paused`), oldest first: where the human task
    /// list comes from.
    async fn runs_awaiting_human(&self, tenant_id: &str) -> Result<Vec<RunState>, StoreError>;

    /// The tenant's pending human tasks (of one capability when given),
    /// oldest run first. By default derived from `runs_awaiting_human`; a
    /// store may keep tasks as their own records.
    async fn pending_tasks(
        &self,
        tenant_id: &str,
        capability_id: Option<&str>,
    ) -> Result<Vec<HumanTask>, StoreError> {
        let runs = self.runs_awaiting_human(tenant_id).await?;
        Ok(runs
            .iter()
            .flat_map(human_tasks)
            .filter(|task| capability_id.is_none_or(|wanted| task.capability_id == wanted))
            .collect())
    }

    /// The tenant's pending approval requests and clarifying questions,
    /// oldest run first (derived like `pending_tasks`, by default).
    async fn pending_requests(&self, tenant_id: &str) -> Result<Vec<PendingRequest>, StoreError> {
        let runs = self.runs_awaiting_human(tenant_id).await?;
        Ok(runs.iter().filter_map(pending_request).collect())
    }
}

/// Durable run state, event log, node leases and outbox.
///
/// Outbox lifecycle: an entry is written by the commit that decides the
/// step, sent by the relay (no store write), and consumed (removed) by the
/// commit of the step that handles it, never earlier: a worker that dies
/// after claiming a node leaves the entry, so the step is driven again. An
/// entry still there after a while was lost between commit and send, held
/// by a holder that died before its first hold, or is waiting in a
/// backlog: a stale delivery of the same run re-sends it once, and the
/// sweeper re-sends it each time it has been quiet for two leases with no
/// live lease in its run, waiting twice as long after each re-send
/// (`OutboxStore::mark_outbox_quiet`).
///
/// Split into the roles its callers use ([`RunLog`], [`NodeLeases`],
/// [`OutboxStore`], [`RunQueries`]): a caller holds only the role it needs
/// (an `Arc<dyn RunStore>` becomes an `Arc<dyn RunLog>` by upcasting). An
/// adapter implements the four; it is then a `RunStore`.
pub trait RunStore: RunLog + NodeLeases + OutboxStore + RunQueries {}

impl<Store: RunLog + NodeLeases + OutboxStore + RunQueries + ?Sized> RunStore for Store {}

/// A message received from the step queue, with what acknowledges it.
#[derive(Debug, Clone)]
pub struct ReceivedStep {
    pub message: StepMessage,
    pub receipt: String,
    pub receive_count: u32,
}

/// At-least-once delivery of step messages.
#[async_trait]
pub trait StepQueue: Send + Sync {
    async fn send(&self, messages: &[StepMessage]) -> Result<(), QueueError>;
    async fn receive(
        &self,
        max_messages: usize,
        wait: Duration,
    ) -> Result<Vec<ReceivedStep>, QueueError>;
    async fn acknowledge(&self, receipt: &str) -> Result<(), QueueError>;
    /// Makes the message visible again after `delay` (a failed or busy step).
    async fn release(&self, receipt: &str, delay: Duration) -> Result<(), QueueError>;
    /// Sends a fresh copy of `message` that becomes visible after `delay`
    /// (a timer that came early). SQS delays one hop by 15 minutes at most:
    /// a longer wait is several hops, each a new message (its receive count
    /// starts again, so a long timer never reaches the dead-letter queue).
    async fn send_delayed(&self, message: &StepMessage, delay: Duration) -> Result<(), QueueError>;
    /// Keeps a received message hidden for `hold` from now: the holder's
    /// heartbeat while its step runs, so that a holder that dies gives its
    /// message back within one `hold`, not after the queue's visibility
    /// timeout. A queue without visibility timeouts (the in-memory one: its
    /// messages die with the process that holds them) has nothing to do.
    async fn hold(&self, receipt: &str, hold: Duration) -> Result<(), QueueError> {
        let _ = (receipt, hold);
        Ok(())
    }
}

/// A model's structured answer (defined by the engine, which judges it).
pub use baton_core::engine::ModelAnswer;

/// What a provider streams while it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelDelta {
    /// More answer text.
    Text(String),
    /// The stream broke and the provider asks again from the start: the
    /// text streamed so far for this answer is void.
    Restarted,
    /// The requested model failed after its provider's retries (`cause`);
    /// the fallback model `to` answers instead (text streamed so far is
    /// void).
    /// Boxed: a channel of deltas holds blocks of 32 of them, and every
    /// model call in flight has a channel.
    FellBack(Box<ModelFallback>),
}

/// A fallback taken: the model `from` failed (`cause`) and `to` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFallback {
    pub from: String,
    pub to: String,
    pub cause: String,
}

/// A language model that answers one structured request, streaming text deltas.
#[async_trait]
pub trait LlmProvider: Send + Sync {
    /// Model name for telemetry.
    fn model_name(&self) -> String;
    /// Answers `request`, sending each text delta to `deltas` as it arrives
    /// (and [`ModelDelta::Restarted`] before a retry that voids them).
    async fn complete(
        &self,
        request: &ModelRequest,
        deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError>;

    /// One turn of a conversation with tools: `request` (system instruction,
    /// first user message, the answer's schema) followed by `session`'s
    /// turns, with its tools offered. The answer is text, tool calls, or
    /// both. A provider that cannot call tools says so.
    async fn converse(
        &self,
        request: &ModelRequest,
        session: &baton_core::records::conversation::ToolSession,
        deltas: UnboundedSender<ModelDelta>,
    ) -> Result<baton_core::records::conversation::SessionAnswer, LlmError> {
        let _ = (request, session, deltas);
        Err(LlmError::Configuration(format!(
            "the model provider `{}` cannot call tools",
            self.model_name()
        )))
    }
}

/// Capabilities agents register at run time, per
/// tenant. Records are upserted whole; liveness is derived from
/// `last_seen_at_millis` by the reader (`RegisteredCapability::status_at`).
#[async_trait]
pub trait CapabilityDirectory: Send + Sync {
    /// Stores `record` under its capability id for `tenant_id`. A record
    /// already there keeps its `registered_at_millis`; the stored record is
    /// returned.
    async fn upsert_registration(
        &self,
        tenant_id: &str,
        record: RegisteredCapability,
    ) -> Result<RegisteredCapability, StoreError>;

    /// Every registration of `tenant_id`, active or not, in capability id order.
    async fn list_registrations(
        &self,
        tenant_id: &str,
    ) -> Result<Vec<RegisteredCapability>, StoreError>;

    /// A heartbeat: `capability_id`'s `last_seen_at_millis` becomes
    /// `seen_at_millis`, nothing else changes. `None` when `tenant_id` has
    /// no such registration (nothing is created).
    async fn renew_heartbeat(
        &self,
        tenant_id: &str,
        capability_id: &str,
        seen_at_millis: u64,
    ) -> Result<Option<RegisteredCapability>, StoreError>;

    /// Removes `capability_id`'s registration; whether there was one.
    async fn deregister(&self, tenant_id: &str, capability_id: &str) -> Result<bool, StoreError>;
}

/// The shell's clock: every "now" the engine and the adapters use comes from here.
pub trait Clock: Send + Sync {
    fn now(&self) -> Instant;
}

pub trait IdGenerator: Send + Sync {
    fn new_id(&self, prefix: &str) -> String;
}

/// Where concluded judge panel transcripts are published beyond the run's
/// own event log (which always holds them): an external ledger plugs in
/// here. Called before the step that concluded the panel commits, at least
/// once: a retried step publishes again with the same `idempotency_key`.
/// A ledger's receipt (`Some`) is written into the transcript the step
/// commits (its topic, each message's `hcsTxId`).
#[async_trait]
pub trait TranscriptPublisher: Send + Sync {
    async fn publish(
        &self,
        tenant_id: &str,
        run_id: &str,
        publication: &baton_core::contracts::panels::TranscriptPublication,
    ) -> Result<Option<baton_core::contracts::panels::LedgerReceipt>, crate::error::PublishError>;
}

/// Performs one tool call of an agent session as the registry defines it
/// (`baton-tools` in the step worker and the CLI). A failure is an outcome
/// the model reads, never an error of the step; the call's idempotency key
/// goes to the executor (HTTP tools send it as `Idempotency-Key`).
#[async_trait]
pub trait ToolRunner: Send + Sync {
    async fn run_tool(
        &self,
        tool: &baton_core::catalog::tools::ToolDefinition,
        invocation: &baton_core::records::conversation::ToolInvocation,
    ) -> baton_core::records::conversation::ToolOutcome;
}

/// Reads remote agents' cards (A2A): a capability naming a `remoteAgent`
/// is registered only when its card is reachable through the outbound
/// guard and names a JSON-RPC interface of A2A 1.0.
#[async_trait]
pub trait RemoteAgentCards: Send + Sync {
    /// The agent's JSON-RPC interface URL, or why the card is refused.
    async fn check_card(&self, card_url: &str) -> Result<String, crate::error::CardRefused>;
}

/// No remote agents reachable from this process: a registration naming
/// one is refused, saying so.
pub struct NoRemoteAgents;

#[async_trait]
impl RemoteAgentCards for NoRemoteAgents {
    async fn check_card(&self, card_url: &str) -> Result<String, crate::error::CardRefused> {
        Err(crate::error::CardRefused::NotReachableFromHere(
            card_url.to_string(),
        ))
    }
}

/// No tool executors in this process: every call fails, saying so (the
/// API, stream and ingest functions never run steps).
pub struct NoToolRunner;

#[async_trait]
impl ToolRunner for NoToolRunner {
    async fn run_tool(
        &self,
        tool: &baton_core::catalog::tools::ToolDefinition,
        _invocation: &baton_core::records::conversation::ToolInvocation,
    ) -> baton_core::records::conversation::ToolOutcome {
        baton_core::records::conversation::ToolOutcome::failed(format!(
            "this process has no tool executors; `{}` cannot run here",
            tool.name
        ))
    }
}

/// Delivers completion notifications: the envelope's signed webhook and the
/// event bus. A failure is the engine's to retry later (through the queue),
/// so an implementation makes one attempt and says why it failed.
#[async_trait]
pub trait CompletionNotifier: Send + Sync {
    /// Delivers to every destination `delivery` names; `Err` with the
    /// reason when one of them did not accept it.
    async fn deliver(
        &self,
        delivery: &baton_core::engine::NotificationDelivery,
    ) -> Result<(), crate::error::DeliveryError>;
}

/// For processes that deliver no notification: every attempt fails saying
/// so (the engine gives up after its attempts, the error kept in the run).
pub struct NoCompletionNotifier;

#[async_trait]
impl CompletionNotifier for NoCompletionNotifier {
    async fn deliver(
        &self,
        _delivery: &baton_core::engine::NotificationDelivery,
    ) -> Result<(), crate::error::DeliveryError> {
        Err(crate::error::DeliveryError::NotConfigured("this process delivers no completion notifications (no webhook client or event bus is configured)".into()))
    }
}
