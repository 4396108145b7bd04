//! The use cases, each a service holding only the ports it uses (private
//! fields, one constructor):
//!
//! - [`RunService`]: submit, cancel, snapshot and read or follow a run's frames.
//! - [`StepService`]: perform one durable step (load, begin, perform the
//!   engine's effect, resume, commit, send the outbox).
//! - [`CapabilityService`]: registrations and the capability snapshot a
//!   tenant's planner sees.
//! - [`PeopleService`]: a person's answer to a parked node, or their decline.
//! - [`ScheduleService`]: schedules kept, fired (one run per fire time),
//!   paused and resumed.
//! - [`OutboxRelay`] / [`OutboxSweeper`]: send committed step messages, and
//!   re-send what a crash left unsent.
//! - [`RetentionPass`]: retention's batches as an upkeep runs them, bounded
//!   in batches and time.
//!
//! Also the one event follower (`follow`: a run's frames, replayed then
//! followed) and a read-through cache of a tenant's registrations
//! (`capability_cache`).
//!
//! [`Services::new`] wires the first three over one set of ports; the
//! sweeper needs only a store, a queue and a clock.

mod admission;
mod audit;
mod capabilities;
pub mod capability_cache;
pub mod capability_search;
mod commit;
#[cfg(feature = "evaluations")]
pub mod dataset_evaluations;
pub mod follow;
pub mod lifecycle_bus;
pub mod memory;
mod memory_tools;
mod outbox;
mod people;
mod request_keys;
mod retention_pass;
mod runs;
mod schedules;
mod shared_plans;
mod steps;
mod stream_budget;
mod thread_lanes;

use std::sync::Arc;
use std::time::Duration;

use baton_core::basics::schema::ValidatorCache;
use baton_core::catalog::registry::Registry;
use baton_core::engine::{DEFAULT_MAX_NODE_ATTEMPTS, DEFAULT_MAX_PLANNER_ATTEMPTS, PlannerChoice};

pub use audit::{AuditEntry, AuditTrail, DEFAULT_AUDIT_RETENTION_DAYS, MAX_AUDIT_PAGE};
pub use capabilities::{CapabilityListing, CapabilityService, CapabilitySnapshot, Registered};
pub use outbox::{OutboxRelay, OutboxSweeper};
pub use people::{PeopleService, PersonInput, PersonInputOutcome};
pub use request_keys::{
    MAX_REQUEST_KEY_CHARS, Once, REQUEST_KEY_RETENTION, RequestKey, RequestKeyService, STALE_CLAIM,
};
pub use retention_pass::RetentionPass;
pub use runs::{
    ChatRequest, Checkpoint, EvaluationView, MAX_CHAT_MESSAGE_CHARS, PanelEntry, RunService,
    SUBMISSION_WINDOW, SubmittedRun, Submitter, ThreadPageRead,
};
pub use schedules::{DEFAULT_MAX_SCHEDULES_PER_TENANT, FiredRun, ScheduleService, ScheduleTick};
pub use steps::{GaveUp, StepOutcome, StepService};
pub use stream_budget::{STREAM_LEASE, StreamBudget, StreamTicket};

use crate::ports::{
    CapabilityDirectory, Clock, IdGenerator, LlmProvider, RunStore, StepQueue, ThreadStore,
    ToolRunner, TranscriptPublisher,
};

/// Tunables of the step loop.
#[derive(Debug, Clone)]
pub struct OrchestratorSettings {
    pub max_node_attempts: u32,
    /// How long a claimed node attempt is protected from twin deliveries
    /// without a heartbeat: the worker renews it every third of this while
    /// the capability runs, so it bounds how long a dead worker's node
    /// waits, not how long a node may take.
    pub node_lease: Duration,
    /// Deltas are flushed to the event log when this many bytes are buffered…
    pub delta_flush_bytes: usize,
    /// …or when this long has passed since the last flush.
    pub delta_flush_interval: Duration,
    /// Whether streamed model text is appended to the event log at all.
    pub stream_deltas: bool,
    /// Bound on reload-and-reapply rounds after version conflicts.
    pub max_commit_rounds: u32,
    /// Which planner drafts plans.
    pub planner: PlannerChoice,
    /// Drafts an LLM planner may have rejected before falling back.
    pub max_planner_attempts: u32,
    /// How long a delivery that found its node claimed by another worker
    /// waits before it looks again (it is usually stale by then).
    pub busy_retry_delay: Duration,
    /// Time kept, before an invocation's deadline, to commit a result and
    /// send the outbox: a model call is stopped this long before it.
    pub commit_margin: Duration,
    /// How long one step of a long-running worker (`baton serve`, `baton
    /// run`) may take (`BATON_STEP_BUDGET_SECONDS`), as a Lambda
    /// invocation's timeout bounds a step there: past it less
    /// `commit_margin` a call still waited on is dropped, the claim
    /// released and the step delivered again. None: no budget.
    pub step_budget: Option<Duration>,
    /// A human task's SLA: unanswered after this, the run fails.
    pub human_task_timeout: Duration,
    /// How long an agent session may last across its steps.
    pub agent_session_limit: Duration,
    /// Runs that end or park are announced on the event bus
    /// (`BATON_EVENT_BUS` is set).
    pub announce_to_event_bus: bool,
    /// The largest envelope a run may be submitted with, in bytes of its
    /// JSON (`BATON_MAX_ENVELOPE_BYTES`): the same on every store, so an
    /// envelope tried locally fits the cloud's run item too.
    pub max_envelope_bytes: usize,
    /// Runs at work (queued or running) a tenant may have at once; a
    /// submission past it is refused (`RuntimeError::TenantLimit`, HTTP 429).
    pub tenant_limits: TenantLimits,
    /// How long an ended run's records are kept, by tenant.
    pub retention: RunRetention,
    /// Schedules a tenant may keep (`BATON_MAX_SCHEDULES_PER_TENANT`).
    pub max_schedules_per_tenant: usize,
    /// Items one memory namespace holds at most
    /// (`BATON_MEMORY_NAMESPACE_CAP`): search reads a namespace whole.
    pub memory_namespace_cap: usize,
    /// How long an audit record is kept (`BATON_AUDIT_RETENTION_DAYS`).
    pub audit_retention_days: u32,
}

/// A long-running worker's step budget by default: the step function's
/// timeout in the template, 300 s.
pub const DEFAULT_STEP_BUDGET: Duration = Duration::from_secs(300);

/// The default retention of an ended run's records: 30 days.
pub const DEFAULT_RETENTION_DAYS: u32 = 30;

/// How long an ended run and everything of it (state, frames, entries,
/// listings, outbox, thread items) is kept after it ends
/// (`BATON_RETENTION_DAYS`, default [`DEFAULT_RETENTION_DAYS`]; a tenant's
/// own in `registry/tenants.json`). A run that waits (queued, running,
/// parked for a person) never expires: its clock starts when it ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRetention {
    pub every_tenant_days: u32,
    pub by_tenant_days: std::collections::BTreeMap<String, u32>,
}

impl Default for RunRetention {
    fn default() -> Self {
        RunRetention {
            every_tenant_days: DEFAULT_RETENTION_DAYS,
            by_tenant_days: std::collections::BTreeMap::new(),
        }
    }
}

impl RunRetention {
    /// The same retention with the registry's per-tenant days over this
    /// one's (`registry/tenants.json`).
    pub fn with_tenant_settings(
        mut self,
        settings: &baton_core::catalog::tenant_settings::TenantSettings,
    ) -> Self {
        self.by_tenant_days
            .extend(settings.retention_days_by_tenant());
        self
    }

    /// The retention of `tenant_id`: its own, else every tenant's.
    pub fn of(&self, tenant_id: &str) -> Duration {
        let days = self
            .by_tenant_days
            .get(tenant_id)
            .copied()
            .unwrap_or(self.every_tenant_days);
        Duration::from_secs(u64::from(days) * 24 * 3600)
    }

    /// What a commit moving a run to `status` stamps: now plus the tenant's
    /// retention once the run has ended, nothing while it works or waits.
    pub fn retain_until(
        &self,
        tenant_id: &str,
        status: baton_core::state::run::RunStatus,
        now: baton_core::basics::instant::Instant,
    ) -> Option<baton_core::basics::instant::Instant> {
        status.is_terminal().then(|| now.plus(self.of(tenant_id)))
    }
}

/// Per-tenant limits: runs at work at once (`BATON_TENANT_MAX_LIVE_RUNS`)
/// and submissions in any 60 s (`BATON_TENANT_MAX_SUBMISSIONS_PER_MINUTE`);
/// none set, no limit. Both are counted from the store's run listing, so
/// every process and Lambda instance sharing a store enforces the same
/// count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TenantLimits {
    pub live_runs: PerTenantLimit,
    pub submissions_per_minute: PerTenantLimit,
}

impl TenantLimits {
    /// The live-run limit of `tenant_id`, if any.
    pub fn max_live_runs_of(&self, tenant_id: &str) -> Option<usize> {
        self.live_runs.of(tenant_id)
    }

    /// How many runs `tenant_id` may submit in any 60 s, if limited.
    pub fn max_submissions_per_minute_of(&self, tenant_id: &str) -> Option<usize> {
        self.submissions_per_minute.of(tenant_id)
    }

    /// Whether any limit is set for `tenant_id`.
    pub fn limits(&self, tenant_id: &str) -> bool {
        self.max_live_runs_of(tenant_id).is_some()
            || self.max_submissions_per_minute_of(tenant_id).is_some()
    }
}

/// Why a per-tenant limit's text is refused (the item, as written).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitTextProblem {
    #[error("`{0}`: the limit must be a positive whole number")]
    NotPositive(String),
    #[error("`{0}`: the tenant is empty")]
    EmptyTenant(String),
}

/// One limit: a default for every tenant and overrides by tenant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PerTenantLimit {
    pub every_tenant: Option<usize>,
    pub by_tenant: std::collections::BTreeMap<String, usize>,
}

impl PerTenantLimit {
    /// The limit of `tenant_id`: its own, else the default, else none.
    pub fn of(&self, tenant_id: &str) -> Option<usize> {
        self.by_tenant.get(tenant_id).copied().or(self.every_tenant)
    }

    /// Reads `20` (every tenant), `team-a:100` (one tenant) or both,
    /// comma-separated: `20,team-a:100,team-b:5`.
    pub fn parse(text: &str) -> Result<Self, LimitTextProblem> {
        let mut limit = PerTenantLimit::default();
        for item in text
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
        {
            let (tenant, number) = match item.rsplit_once(':') {
                Some((tenant, number)) => (Some(tenant.trim()), number.trim()),
                None => (None, item),
            };
            let value: usize = number
                .parse()
                .ok()
                .filter(|value| *value > 0)
                .ok_or_else(|| LimitTextProblem::NotPositive(item.to_string()))?;
            match tenant {
                Some("") => return Err(LimitTextProblem::EmptyTenant(item.to_string())),
                Some(tenant) => {
                    limit.by_tenant.insert(tenant.to_string(), value);
                }
                None => limit.every_tenant = Some(value),
            }
        }
        Ok(limit)
    }
}

/// The default envelope limit: 256 KiB, which leaves room in a 400 KB
/// DynamoDB item for the run's state around it.
pub const DEFAULT_MAX_ENVELOPE_BYTES: usize = 256 * 1024;

impl Default for OrchestratorSettings {
    fn default() -> Self {
        OrchestratorSettings {
            max_node_attempts: DEFAULT_MAX_NODE_ATTEMPTS,
            node_lease: Duration::from_secs(30),
            delta_flush_bytes: 512,
            delta_flush_interval: Duration::from_millis(100),
            stream_deltas: true,
            max_commit_rounds: 16,
            busy_retry_delay: Duration::from_secs(2),
            planner: PlannerChoice::Deterministic,
            max_planner_attempts: DEFAULT_MAX_PLANNER_ATTEMPTS,
            commit_margin: Duration::from_secs(5),
            step_budget: Some(DEFAULT_STEP_BUDGET),
            human_task_timeout: baton_core::engine::DEFAULT_HUMAN_TASK_TIMEOUT,
            agent_session_limit: baton_core::records::agents::DEFAULT_SESSION_LIMIT,
            announce_to_event_bus: false,
            max_envelope_bytes: DEFAULT_MAX_ENVELOPE_BYTES,
            tenant_limits: TenantLimits::default(),
            retention: RunRetention::default(),
            audit_retention_days: audit::DEFAULT_AUDIT_RETENTION_DAYS,
            max_schedules_per_tenant: schedules::DEFAULT_MAX_SCHEDULES_PER_TENANT,
            memory_namespace_cap: memory::DEFAULT_NAMESPACE_CAP,
        }
    }
}

impl OrchestratorSettings {
    /// The engine's read-only collaborators under these settings.
    pub(crate) fn engine_context<'a>(
        &self,
        registry: &'a Registry,
        validators: &'a ValidatorCache,
    ) -> baton_core::engine::EngineContext<'a> {
        baton_core::engine::EngineContext {
            registry,
            validators,
            planner: self.planner,
            max_planner_attempts: self.max_planner_attempts,
            human_task_timeout: self.human_task_timeout,
            agent_session_limit: self.agent_session_limit,
            announce_to_event_bus: self.announce_to_event_bus,
            unavailable_capabilities: &baton_core::engine::NO_CAPABILITY_UNAVAILABLE,
            capability_health: &baton_core::catalog::capability_health::NO_HEALTH,
            capability_relevance: None,
        }
    }
}

/// The adapters the services work through.
#[derive(Clone)]
pub struct ServicePorts {
    pub store: Arc<dyn RunStore>,
    pub queue: Arc<dyn StepQueue>,
    pub capability_directory: Arc<dyn CapabilityDirectory>,
    pub llm: Arc<dyn LlmProvider>,
    pub clock: Arc<dyn Clock>,
    pub ids: Arc<dyn IdGenerator>,
    /// Where concluded panel transcripts go beyond the event log
    /// (`panels::EventLogTranscripts`: nowhere else).
    pub transcripts: Arc<dyn TranscriptPublisher>,
    /// Performs agents' tool calls (`NoToolRunner` where steps never run).
    pub tools: Arc<dyn ToolRunner>,
    /// Chat threads (`memory::InMemoryThreadStore` in one process).
    pub threads: Arc<dyn ThreadStore>,
    /// Delivers completion notifications (`NoCompletionNotifier` where
    /// nobody is told).
    pub notifier: Arc<dyn crate::ports::CompletionNotifier>,
    /// Checks remote agents' cards when they are registered
    /// (`NoRemoteAgents` where none can be reached).
    pub remote_agents: Arc<dyn crate::ports::RemoteAgentCards>,
    /// Open event streams' leases (`memory::InMemoryStreamLeases` in one
    /// process; the store's, where several share it).
    pub stream_leases: Arc<dyn crate::ports::StreamLeases>,
    /// Schedules (`memory::InMemoryScheduleBook` in one process; the
    /// store's, where several share it).
    pub schedules: Arc<dyn crate::ports::ScheduleBook>,
    /// The audit trail (`memory::InMemoryAuditLog` in one process; the
    /// store's, where several share it).
    pub audit: Arc<dyn crate::ports::AuditLog>,
    /// Idempotency keys of requests that are not run submissions
    /// (`memory::InMemoryRequestKeys` in one process; the store's, where
    /// several share it).
    pub request_keys: Arc<dyn crate::ports::RequestKeys>,
    /// What fires them (`ports::StoreKeepsSchedules`: the process keeping
    /// the store, `baton serve`; EventBridge Scheduler in the cloud).
    pub schedule_triggers: Arc<dyn crate::ports::ScheduleTriggers>,
    /// The tenants' memory across runs (`memory::InMemoryMemoryStore` in
    /// one process; the store's, where several share it).
    pub memory: Arc<dyn crate::ports::MemoryStore>,
    /// The embedding model memory's search fuses with BM25, where the
    /// deployment has one.
    pub embedder: Option<Arc<dyn crate::ports::TextEmbedder>>,
}

/// What the run and step services share.
#[derive(Clone)]
pub(crate) struct CommonParts {
    registry: Arc<Registry>,
    store: Arc<dyn RunStore>,
    relay: OutboxRelay,
    validators: Arc<ValidatorCache>,
    clock: Arc<dyn Clock>,
    settings: OrchestratorSettings,
    threads: Arc<dyn ThreadStore>,
    /// The one commit protocol every writer of a run goes through.
    committer: commit::DecisionCommitter,
    /// The one way a run comes to exist.
    admission: admission::RunAdmission,
    /// Stored frames, live, for code that embeds the runtime.
    lifecycle: lifecycle_bus::LifecycleBus,
}

/// The services of one process, wired over one set of ports.
#[derive(Clone)]
pub struct Services {
    pub runs: Arc<RunService>,
    pub steps: Arc<StepService>,
    pub capabilities: Arc<CapabilityService>,
    pub people: Arc<PeopleService>,
    /// Open event streams, budgeted in the store.
    pub streams: Arc<StreamBudget>,
    /// Schedules: kept, fired, paused.
    pub schedules: Arc<ScheduleService>,
    /// The audit trail of state-changing requests.
    pub audit: Arc<AuditTrail>,
    /// Requests made once by their idempotency key.
    pub request_keys: Arc<RequestKeyService>,
    /// The tenants' memory across runs.
    pub memory: Arc<memory::MemoryService>,
    /// This process's stored frames, live ([`Services::subscribe_to_lifecycle`]).
    pub lifecycle: lifecycle_bus::LifecycleBus,
}

impl Services {
    /// `worker_id` is unique per process (e.g. the Lambda instance); node
    /// claims are scoped by it.
    pub fn new(
        registry: Arc<Registry>,
        ports: ServicePorts,
        settings: OrchestratorSettings,
        worker_id: impl Into<String>,
    ) -> Self {
        Self::sharing_validators(
            registry,
            ports,
            settings,
            worker_id,
            Arc::new(ValidatorCache::new()),
        )
    }

    /// Same, with a compiled-schema cache shared with other services of the
    /// process (compiling a schema costs far more than validating with it).
    pub fn sharing_validators(
        registry: Arc<Registry>,
        ports: ServicePorts,
        settings: OrchestratorSettings,
        worker_id: impl Into<String>,
        validators: Arc<ValidatorCache>,
    ) -> Self {
        let capabilities = Arc::new(
            CapabilityService::new(
                registry.clone(),
                ports.capability_directory.clone(),
                validators.clone(),
                ports.clock.clone(),
            )
            .with_remote_agents(ports.remote_agents.clone())
            .with_embedder(ports.embedder.clone()),
        );
        let relay = OutboxRelay::new(
            ports.store.clone(),
            ports.queue.clone(),
            ports.clock.clone(),
        );
        let lifecycle = lifecycle_bus::LifecycleBus::default();
        let streams = Arc::new(StreamBudget::new(
            ports.stream_leases.clone(),
            ports.clock.clone(),
            ports.ids.clone(),
        ));
        let committer = commit::DecisionCommitter {
            store: ports.store.clone(),
            lifecycle: lifecycle.clone(),
            relay: relay.clone(),
            transcripts: ports.transcripts,
            threads: ports.threads.clone(),
            clock: ports.clock.clone(),
            max_commit_rounds: settings.max_commit_rounds,
            chat_history_limit: registry
                .chat_settings()
                .map_or(0, |chat| chat.history_limit),
            chat_summarizes: registry
                .chat_settings()
                .is_some_and(|chat| chat.summarize_dropped_history),
            retention: settings
                .retention
                .clone()
                .with_tenant_settings(registry.tenant_settings()),
            shared_plans: Arc::default(),
        };
        let max_schedules_per_tenant = settings.max_schedules_per_tenant;
        let memory = Arc::new(memory::MemoryService::new(
            ports.memory,
            ports.embedder,
            ports.clock.clone(),
            settings.memory_namespace_cap,
        ));
        let request_keys = Arc::new(RequestKeyService::new(
            ports.request_keys.clone(),
            ports.clock.clone(),
        ));
        let audit = Arc::new(AuditTrail::new(
            ports.audit,
            ports.clock.clone(),
            ports.ids.clone(),
            settings.audit_retention_days,
        ));
        let admission = admission::RunAdmission {
            run_log: ports.store.clone(),
            lifecycle: lifecycle.clone(),
            queries: ports.store.clone(),
            relay: relay.clone(),
            clock: ports.clock.clone(),
            tenant_limits: settings.tenant_limits.clone(),
        };
        let common = CommonParts {
            admission,
            relay,
            registry,
            store: ports.store,
            validators,
            clock: ports.clock,
            settings,
            threads: ports.threads,
            committer,
            lifecycle: lifecycle.clone(),
        };
        let runs = Arc::new(RunService::new(common.clone(), ports.ids.clone()));
        let schedules = Arc::new(ScheduleService::new(
            ports.schedules,
            ports.schedule_triggers,
            runs.clone(),
            common.clock.clone(),
            ports.ids,
            max_schedules_per_tenant,
        ));
        let people = Arc::new(PeopleService::new(common.clone()));
        let steps = Arc::new(StepService::new(
            common,
            ports.llm,
            capabilities.clone(),
            worker_id.into(),
            ports.tools,
            ports.notifier,
            memory.clone(),
        ));
        Services {
            runs,
            steps,
            capabilities,
            people,
            streams,
            schedules,
            audit,
            request_keys,
            memory,
            lifecycle,
        }
    }

    /// The frames this process stores from now on, as each write succeeds:
    /// raw ([`LifecycleSubscription::next`](lifecycle_bus::LifecycleSubscription::next))
    /// or rendered as hook events
    /// ([`next_hooks`](lifecycle_bus::LifecycleSubscription::next_hooks)).
    pub fn subscribe_to_lifecycle(&self) -> lifecycle_bus::LifecycleSubscription {
        self.lifecycle.subscribe()
    }
}
