//! In-memory adapters: the embedded default's run store and step queue.
//! Same semantics as the cloud adapters (conditional commits, contiguous
//! sequence numbers, leases, outbox, at-least-once redelivery), one process.

use crate::ports::RunLog;
use crate::ports::RunQueries;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use baton_core::basics::ids::RunKey;
use baton_core::basics::instant::Instant;
use baton_core::records::entries::RunEntry;
use baton_core::state::run::{RunState, RunStatus, StepMessage};
use baton_core::wire::event::{EventDraft, EventFrame};
use tokio::sync::Notify;

mod audit_log;
#[cfg(feature = "evaluations")]
mod evaluation_files;
mod event_log;
mod local_secrets;
mod memory_items;
mod node_leases;
mod outbox_entries;
mod queue;
mod registrations;
mod request_key_book;
mod schedule_book;
mod stream_leases;
mod threads;

use self::event_log::{CompactEventLog, RunIds};
use crate::clock::SystemClock;
use crate::error::StoreError;
use crate::ports::{Clock, CreateOutcome, StepCommit, StoredRun};

struct OutboxEntry {
    message: StepMessage,
    /// Re-sent this many times (0: never; only those are "pending").
    resends: u32,
    /// Written, or what the last `mark_outbox_quiet` set.
    quiet_since_millis: u64,
}

struct Lease {
    worker_id: String,
    expires_at_millis: u64,
}

struct RunRecord {
    state: RunState,
    version: u64,
    /// The event log, compact (see [`CompactEventLog`]).
    events: CompactEventLog,
    /// Boxed entries: a map's node holds eleven slots, and most runs have
    /// one message or none pending.
    outbox: BTreeMap<String, Box<OutboxEntry>>,
    leases: HashMap<(String, u32), Lease, foldhash::fast::RandomState>,
    /// Entries beside the run, by key (`baton_core::records::entries`).
    entries: BTreeMap<String, RunEntry>,
    /// When the ended run may be dropped (Unix ms); `None` while it works
    /// or waits.
    retain_until_millis: Option<u64>,
    /// The idempotency key it was created with (dropped with it).
    idempotency_key: Option<String>,
}

impl RunRecord {
    /// Appends `drafts` to the run's log; returns the last sequence number.
    fn append(&mut self, drafts: &[EventDraft]) -> u64 {
        let run_trace_id = self.state.trace.map(|trace| trace.trace_id);
        self.events.append(drafts, run_trace_id)
    }

    /// A settled run keeps its log compressed and no leases (it refuses
    /// claims); a commit that takes it up again starts afresh.
    fn settle_if_terminal(&mut self) {
        if self.state.status().is_terminal() {
            self.events.seal();
            self.leases = HashMap::default();
        }
    }
}

/// One tenant's runs by run id.
type RunsOfTenant = HashMap<String, Box<RunRecord>, foldhash::fast::RandomState>;

#[derive(Default)]
struct StoreTables {
    /// Boxed records: the table keeps free slots as it grows.
    /// Runs by tenant, then by run id (looked up by `&str`, no key built).
    runs: HashMap<String, RunsOfTenant, foldhash::fast::RandomState>,
    run_id_by_idempotency_key: HashMap<(String, String), String, foldhash::fast::RandomState>,
    /// Runs at work (queued, running) by tenant: kept by create and commit.
    live_runs: HashMap<String, u64, foldhash::fast::RandomState>,
    /// Ended runs by when they may be dropped: `(retain_until ms, tenant, run)`.
    ended: std::collections::BTreeSet<(u64, String, String)>,
}

impl StoreTables {
    /// Moves the tenant's live-run counter by what a status change means.
    fn count_live(&mut self, tenant_id: &str, before: Option<RunStatus>, after: RunStatus) {
        let was = before.is_some_and(RunStatus::is_at_work);
        match (was, after.is_at_work()) {
            (false, true) => *self.live_runs.entry(tenant_id.to_string()).or_default() += 1,
            (true, false) => {
                if let Some(live) = self.live_runs.get_mut(tenant_id) {
                    *live = live.saturating_sub(1);
                }
            }
            _ => {}
        }
    }

    /// Drops ended runs past their retention, then the earliest to expire
    /// while more than `cap` ended runs are kept.
    fn drop_expired(&mut self, now_millis: u64, cap: usize) {
        while let Some(first) = self.ended.first().cloned() {
            if first.0 > now_millis && self.ended.len() <= cap {
                break;
            }
            self.ended.pop_first();
            let (_, tenant_id, run_id) = first;
            let removed = self
                .runs
                .get_mut(&tenant_id)
                .and_then(|runs| runs.remove(&run_id));
            if let Some(key) = removed.and_then(|record| record.idempotency_key) {
                self.run_id_by_idempotency_key.remove(&(tenant_id, key));
            }
        }
    }

    fn run(&self, tenant_id: &str, run_id: &str) -> Result<&RunRecord, StoreError> {
        self.runs
            .get(tenant_id)
            .and_then(|runs| runs.get(run_id))
            .map(|record| &**record)
            .ok_or(StoreError::RunNotFound)
    }

    fn run_mut(&mut self, tenant_id: &str, run_id: &str) -> Result<&mut RunRecord, StoreError> {
        self.runs
            .get_mut(tenant_id)
            .and_then(|runs| runs.get_mut(run_id))
            .map(|record| &mut **record)
            .ok_or(StoreError::RunNotFound)
    }
}

/// Run store held in process memory.
pub struct InMemoryRunStore {
    tables: Mutex<StoreTables>,
    event_appended: Notify,
    /// Stamps outbox entries (what the sweeper's age cutoff compares with).
    clock: Arc<dyn Clock>,
    /// Ended runs kept at most: past it, the earliest to expire is dropped
    /// (a process's memory does not grow with its history).
    ended_run_cap: usize,
}

/// Ended runs the in-memory store keeps by default.
pub const DEFAULT_ENDED_RUN_CAP: usize = 10_000;

impl Default for InMemoryRunStore {
    fn default() -> Self {
        InMemoryRunStore {
            tables: Mutex::default(),
            event_appended: Notify::new(),
            clock: Arc::new(SystemClock),
            ended_run_cap: DEFAULT_ENDED_RUN_CAP,
        }
    }
}

fn poisoned() -> StoreError {
    StoreError::Unavailable("in-memory store lock poisoned".into())
}

impl InMemoryRunStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// The same store reading `clock` (the orchestrator's) instead of the wall clock.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The same store keeping at most `cap` ended runs.
    pub fn with_ended_run_cap(mut self, cap: usize) -> Self {
        self.ended_run_cap = cap;
        self
    }

    /// Resolves when any run appends an event (for local followers).
    pub async fn wait_for_events(&self, timeout: Duration) {
        let _ = tokio::time::timeout(timeout, self.event_appended.notified()).await;
    }
}

#[async_trait]
impl RunLog for InMemoryRunStore {
    async fn create_run_within(
        &self,
        state: &RunState,
        events: Vec<EventDraft>,
        outbox: Vec<StepMessage>,
        idempotency_key: Option<&str>,
        live_run_limit: Option<u64>,
    ) -> Result<CreateOutcome, StoreError> {
        let mut tables = self.tables.lock().map_err(|_| poisoned())?;
        if let Some(key) = idempotency_key {
            let scoped_key = (state.tenant_id.clone(), key.to_string());
            if let Some(existing) = tables.run_id_by_idempotency_key.get(&scoped_key) {
                return Ok(CreateOutcome::AlreadyExists {
                    run_id: existing.clone(),
                });
            }
        }
        let live_runs = tables.live_runs.get(&state.tenant_id).copied().unwrap_or(0);
        if state.status().is_at_work() && live_run_limit.is_some_and(|limit| live_runs >= limit) {
            return Ok(CreateOutcome::LiveRunLimitReached { live_runs });
        }
        if let Some(key) = idempotency_key {
            let scoped_key = (state.tenant_id.clone(), key.to_string());
            tables
                .run_id_by_idempotency_key
                .insert(scoped_key, state.run_id.clone());
        }
        let mut record = RunRecord {
            state: state.clone(),
            version: 1,
            events: CompactEventLog::default(),
            outbox: outbox
                .into_iter()
                .map(|message| {
                    (
                        message.message_id.clone(),
                        Box::new(OutboxEntry {
                            message,
                            resends: 0,
                            quiet_since_millis: self.clock.now().unix_millis(),
                        }),
                    )
                })
                .collect(),
            leases: HashMap::default(),
            entries: BTreeMap::new(),
            retain_until_millis: None,
            idempotency_key: idempotency_key.map(str::to_string),
        };
        record.append(&events);
        tables.count_live(&state.tenant_id, None, state.status());
        tables
            .runs
            .entry(state.tenant_id.clone())
            .or_default()
            .insert(state.run_id.clone(), Box::new(record));
        drop(tables);
        self.event_appended.notify_waiters();
        Ok(CreateOutcome::Created)
    }

    async fn load_run(&self, key: RunKey<'_>) -> Result<Option<StoredRun>, StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        let mut tables = self.tables.lock().map_err(|_| poisoned())?;
        tables.drop_expired(self.clock.now().unix_millis(), self.ended_run_cap);
        Ok(tables
            .runs
            .get(tenant_id)
            .and_then(|runs| runs.get(run_id))
            .map(|record| StoredRun {
                state: record.state.clone(),
                version: record.version,
            }))
    }

    async fn commit_step(&self, key: RunKey<'_>, commit: StepCommit) -> Result<u64, StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        let mut tables = self.tables.lock().map_err(|_| poisoned())?;
        let record = tables.run_mut(tenant_id, run_id)?;
        if record.version != commit.expected_version {
            return Err(StoreError::VersionConflict {
                expected: commit.expected_version,
            });
        }
        let status_before = record.state.status();
        let retained_before = record.retain_until_millis;
        record.append(&commit.events);
        record.state = commit.state;
        record.version += 1;
        record.settle_if_terminal();
        record.retain_until_millis = commit.retain_until.map(Instant::unix_millis);
        let (status_after, retained_after) = (record.state.status(), record.retain_until_millis);
        if let Some(message_id) = &commit.consumed_message_id {
            record.outbox.remove(message_id);
        }
        for entry in commit.entries {
            record.entries.insert(entry.key.clone(), entry);
        }
        let version = record.version;
        tables.count_live(tenant_id, Some(status_before), status_after);
        if let Some(until) = retained_before {
            tables
                .ended
                .remove(&(until, tenant_id.to_string(), run_id.to_string()));
        }
        if let Some(until) = retained_after {
            tables
                .ended
                .insert((until, tenant_id.to_string(), run_id.to_string()));
        }
        // Each entry is kept under the run that consumes it (a child's end
        // is addressed to its parent), so the consuming commit removes it.
        let written_at_millis = self.clock.now().unix_millis();
        for message in commit.outbox {
            let owner = match tables.run_mut(&message.tenant_id, &message.run_id) {
                Ok(owner) => owner,
                // Addressed to no run this store holds: kept with its writer.
                Err(_) => tables.run_mut(tenant_id, run_id)?,
            };
            let message_id = message.message_id.clone();
            let entry = OutboxEntry {
                message,
                resends: 0,
                quiet_since_millis: written_at_millis,
            };
            owner.outbox.insert(message_id, Box::new(entry));
        }
        tables.drop_expired(self.clock.now().unix_millis(), self.ended_run_cap);
        drop(tables);
        self.event_appended.notify_waiters();
        Ok(version)
    }

    async fn read_entries(
        &self,
        key: RunKey<'_>,
        prefix: &str,
    ) -> Result<Vec<RunEntry>, StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        let tables = self.tables.lock().map_err(|_| poisoned())?;
        let record = tables.run(tenant_id, run_id)?;
        Ok(record
            .entries
            .range(prefix.to_string()..)
            .take_while(|(key, _)| key.starts_with(prefix))
            .map(|(_, entry)| entry.clone())
            .collect())
    }

    async fn append_events(
        &self,
        key: RunKey<'_>,
        events: Vec<EventDraft>,
    ) -> Result<u64, StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        let mut tables = self.tables.lock().map_err(|_| poisoned())?;
        let record = tables.run_mut(tenant_id, run_id)?;
        if record.state.status().is_terminal() {
            // Nothing lands after the terminal frame (a twin attempt's
            // deltas, still streaming when the run ended).
            return Ok(record.events.len());
        }
        let last = record.append(&events);
        drop(tables);
        self.event_appended.notify_waiters();
        Ok(last)
    }

    async fn last_sequence(&self, key: RunKey<'_>) -> Result<Option<u64>, StoreError> {
        let tables = self.tables.lock().map_err(|_| poisoned())?;
        let run = tables.run(key.tenant_id(), key.run_id()).ok();
        Ok(run.map(|record| record.events.len()))
    }

    async fn read_events(
        &self,
        key: RunKey<'_>,
        after_sequence: u64,
        limit: usize,
    ) -> Result<Vec<EventFrame>, StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        // Copied under the lock, decoded after it.
        let (copied, run_id, correlation_id, trace_id) = {
            let tables = self.tables.lock().map_err(|_| poisoned())?;
            let record = tables.run(tenant_id, run_id)?;
            let copied = record.events.copy_after(after_sequence, limit)?;
            let state = &record.state;
            (
                copied,
                state.run_id.clone(),
                state.correlation_id.clone(),
                state.trace.map(|trace| trace.trace_id),
            )
        };
        copied.decode(&RunIds {
            run_id: &run_id,
            correlation_id: &correlation_id,
            trace_id,
        })
    }
}

#[async_trait]
impl RunQueries for InMemoryRunStore {
    async fn live_runs(&self, tenant_id: &str) -> Result<u64, StoreError> {
        let tables = self.tables.lock().map_err(|_| poisoned())?;
        Ok(tables.live_runs.get(tenant_id).copied().unwrap_or(0))
    }

    async fn list_runs(
        &self,
        tenant_id: &str,
        query: &baton_core::state::listing::RunListQuery,
    ) -> Result<baton_core::state::listing::RunListPage, StoreError> {
        use baton_core::state::listing::{RunListPage, RunListing};
        let mut tables = self.tables.lock().map_err(|_| poisoned())?;
        tables.drop_expired(self.clock.now().unix_millis(), self.ended_run_cap);
        let mut listed: Vec<RunListing> = tables
            .runs
            .get(tenant_id)
            .into_iter()
            .flat_map(HashMap::values)
            .map(|record| RunListing::of(&record.state))
            .filter(|listing| query.admits(listing))
            .collect();
        listed.sort_by_key(|listing| std::cmp::Reverse(listing.ordering_key()));
        listed.truncate(query.limit + 1);
        Ok(RunListPage::from_newest_first(listed, query.limit))
    }

    async fn runs_awaiting_human(&self, tenant_id: &str) -> Result<Vec<RunState>, StoreError> {
        let tables = self.tables.lock().map_err(|_| poisoned())?;
        let mut parked: Vec<RunState> = tables
            .runs
            .get(tenant_id)
            .into_iter()
            .flat_map(HashMap::values)
            .filter(|record| record.state.status().awaits_people())
            .map(|record| record.state.clone())
            .collect();
        parked.sort_by(|a, b| (&a.created_at, &a.run_id).cmp(&(&b.created_at, &b.run_id)));
        Ok(parked)
    }
}

/// The memory store drops ended runs as it goes (at every commit and
/// read); a batch drops those past `now` at once.
#[async_trait]
impl crate::ports::RetentionUpkeep for InMemoryRunStore {
    async fn expire_ended_runs(
        &self,
        now: Instant,
        _batch: usize,
    ) -> Result<crate::ports::ExpiredRunsBatch, StoreError> {
        let mut tables = self.tables.lock().map_err(|_| poisoned())?;
        let before: usize = tables.runs.values().map(HashMap::len).sum();
        tables.drop_expired(now.unix_millis(), self.ended_run_cap);
        let after: usize = tables.runs.values().map(HashMap::len).sum();
        Ok(crate::ports::ExpiredRunsBatch {
            runs: (before - after) as u64,
            items: 0,
            more: false,
        })
    }
}

pub use self::audit_log::InMemoryAuditLog;
#[cfg(feature = "evaluations")]
pub use self::evaluation_files::{EvaluationFiles, InMemoryEvaluations, TranscriptFolder};
pub use self::local_secrets::{LOCAL_SECRETS_FILE, LocalSecrets, reference_name};
pub use self::memory_items::InMemoryMemoryStore;
pub use self::queue::InMemoryStepQueue;
pub use self::registrations::InMemoryCapabilityDirectory;
pub use self::request_key_book::InMemoryRequestKeys;
pub use self::schedule_book::InMemoryScheduleBook;
pub use self::stream_leases::InMemoryStreamLeases;
pub use self::threads::InMemoryThreadStore;

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::basics::trace_context::{RunTrace, TraceParent};
    use baton_core::wire::event::EventType;

    /// The run's trace id is kept once, not in each frame's text, and every
    /// frame read has it back.
    #[tokio::test]
    async fn frames_are_kept_without_the_runs_trace_id_and_read_with_it() {
        let store = InMemoryRunStore::new();
        let caller =
            TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").ok();
        let trace = RunTrace::new(caller, 0, 7);
        let envelope = baton_core::contracts::envelope::TaskEnvelope::parse_value(
            &serde_json::json!({"objective": "o", "outputContract": {"schema": {"type": "object"}}}),
        )
        .unwrap_or_else(|error| unreachable!("{error:?}"));
        let identity = baton_core::engine::NewRunIdentity {
            run_id: "r".into(),
            tenant_id: "t".into(),
            correlation_id: "c".into(),
            thread_id: "th".into(),
            trace: Some(trace),
            submitted_by: None,
        };
        let mut decision =
            baton_core::engine::start_run(identity, envelope, Instant::from_unix_millis(0), 1);
        for event in &mut decision.events {
            event.trace_id = Some(trace.trace_id);
        }
        decision
            .events
            .push(EventDraft::new(EventType::Log, "t", 0));
        let created = store
            .create_run(&decision.state, decision.events, Vec::new(), None)
            .await;
        assert!(created.is_ok());
        let records = {
            let tables = store
                .tables
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let record = tables
                .run("t", "r")
                .unwrap_or_else(|error| unreachable!("{error}"));
            record
                .events
                .copy_after(0, 100)
                .map(|copied| copied.records().to_vec())
                .unwrap_or_default()
        };
        assert!(!String::from_utf8_lossy(&records).contains(&trace.trace_id.to_string()));
        let frames = store
            .read_events(RunKey::new("t", "r"), 0, 100)
            .await
            .unwrap_or_default();
        assert!(frames.len() >= 3);
        assert!(
            frames
                .iter()
                .all(|frame| frame.trace_id == Some(trace.trace_id))
        );
    }
}
