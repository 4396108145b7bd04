//! `baton-sqlite`: the embedded durable store. The `RunStore`,
//! `CapabilityDirectory` and `ThreadStore` ports on one SQLite file (`rusqlite` with the
//! bundled library: nothing to install), so a run parked on a laptop
//! survives the process that started it, and several processes (`baton
//! serve`, `baton tasks`, `baton resume`) share it.
//!
//! Schema (version 2, in `PRAGMA user_version`; 2 writes a run's plan in
//! its own LZ4 block of the `state` value, which a version-1 Baton cannot
//! read, so it refuses the file as written by a newer one):
//!
//! | table | key | columns |
//! | --- | --- | --- |
//! | `runs` | `tenant_id, run_id` | `state` (LZ4-compressed JSON, the plan in a block of its own, `state_column`; one block or JSON text in files written before), `version`, `status`, `correlation_id`, `last_sequence`, `created_at_millis`, `retain_until_millis` (set by the commit that ends the run: past it, `baton gc` and `serve` delete the run and everything of it), `forked_from` (a fork's source run: the runs list's `forkedFrom`; the column is added on open to files written before it) |
//! | `idempotency` | `tenant_id, idempotency_key` | `run_id` |
//! | `events` | `tenant_id, run_id, sequence` | `frame` (JSON) |
//! | `leases` | `tenant_id, run_id, node_id, attempt` | `claimant`, `expires_at_millis`, `owner` (the claiming process's token: a lease of a dead process is void at once; the column is added on open to files written before it) |
//! | `outbox` | `tenant_id, run_id, message_id` | `message` (JSON), `resent` (how many times re-sent; 0: pending), `written_at_millis`, `quiet_since_millis` (indexed: the sweeper re-drives entries quiet for two leases; added on open to files written before it, set from `written_at_millis`) |
//! | `capabilities` | `tenant_id, capability_id` | `record` (JSON) |
//! | `entries` | `tenant_id, run_id, entry_key` | `body` (JSON): what lives beside a run (conversation turns, judge calls), put by the commit that carries it (added without a version change, like `threads`) |
//! | `threads` | `tenant_id, thread_id, run_id` | `at_millis`, `exchange` (JSON): chat threads (added without a version change: `CREATE TABLE IF NOT EXISTS` on open), read by page from the newest through the index `(tenant_id, thread_id, at_millis, run_id)` |
//! | `live_run_counters` | `tenant_id` | `live_runs`: the tenant's runs at work (queued, running), moved by the create and the commits that start and stop work, so the live-run limit is one read (set from `runs` on the first open that has the table) |
//! | `schedules` | `tenant_id, schedule_id` | the schedule as JSON, its `revision` (changes are conditional on it) and `due_millis` (indexed: what `serve` fires next) |
//! | `stream_leases` | `tenant_id, run_id, stream_id` | `expires_at_millis`: open event streams, counted against the per-run and per-tenant caps by every process sharing the file |
//! | `thread_lanes` | `tenant_id, thread_id` | `lane` (JSON: the run answering, those queued, those cut short), `version` (each write conditional on it; added like `threads`) |
//! | `request_keys` | `tenant_id, request_key` | `expires_at_millis`, `record` (JSON: the request's fingerprint, its answer once it has one): idempotency keys of chat messages, forks, answers and schedule creations (added like `threads`) |
//! | `evaluations` | `tenant_id, evaluation_id` | `record`, `request`, `results` (JSON, JSON, JSONL text): the evaluations `baton serve` runs on this store (feature `evaluations`; added like `threads`) |
//! | `evaluation_transcripts` | `tenant_id, evaluation_id, example_id` | `panel_output` (JSON): an example's judge panel output |
//! | `memory_items` | `tenant_id, namespace, item_key` | `person`, `expires_at_millis` (both indexed), `item` (JSON): the tenant's memory across runs, the namespace's parts joined by U+001F so a prefix is one key range (added like `threads`) |
//! | `audit_records` | `tenant_id, audit_id` | `expires_at_millis`, `record` (JSON): the audit trail, inserted only (a trigger refuses any `UPDATE`; rows go only when their retention passes, dropped by the next append; added like `threads`) |
//!
//! Durability: WAL journal, `synchronous = FULL` for commits (a committed
//! step survives a power loss, not only a crash of the process; the WAL
//! is synced with `fdatasync`: the workspace's `.cargo/config.toml` builds
//! the bundled SQLite with `HAVE_FDATASYNC`); claims,
//! streamed frames (deltas, a restarted stream's warning), lease renewals
//! and releases and outbox re-sent marks at `NORMAL` (`rows::without_fsync`:
//! they survive a crash of the process, and a power loss undoes at most
//! those since the last fsynced commit, which only repeats a claim or a
//! send, or drops streamed text the commit carries anyway); `busy_timeout`
//! 5 s so processes sharing the file wait for each other's write instead of
//! failing. `wal_autocheckpoint` is 10,000 pages (SQLite's default is
//! 1,000): the WAL grows to about 40 MB before it is copied back, and a page
//! rewritten by many commits in between is copied once (100 concurrent runs:
//! 181 -> 162 ms in `node_step_overhead`).
//!
//! One thread owns the writing connection (`connection_thread`); every
//! write is a job on it. Writes that arrive together share one transaction
//! (`group_commit`). Reads (a step's load, a stream's frames, listings) are
//! jobs on a second connection with a thread of its own, opened
//! `query_only`: under WAL a reader neither waits for nor blocks the writer,
//! so a stream or a load is not queued behind a group of commits. A read
//! sees every write answered before it began (each is committed before it
//! is answered, and each read is a transaction of its own).
//!
//! Invariants: every write is one `BEGIN IMMEDIATE` transaction, so a
//! commit (state, events, outbox, consumed entry, run entries) is all or nothing and a
//! losing writer (stale version) writes nothing; step commits that arrive
//! together share one transaction and one fsync, each in its own savepoint
//! (`group_commit`), each answered once the group is durable; sequence numbers are
//! contiguous per run (`last_sequence` moves in the same transaction as the
//! events); every query is scoped by tenant.

mod claimants;
mod connection_thread;
mod entries;
mod event_log;
mod group_commit;
mod leases;
#[cfg(test)]
mod reads_beside_writes;
mod rows;
mod run_store;
mod state_column;
mod tenant_runs;
mod threads;

pub use run_store::RunSummary;

use std::path::Path;
use std::sync::Arc;

use baton_runtime::clock::SystemClock;
use baton_runtime::error::StoreError;
use baton_runtime::ports::Clock;
use rusqlite::Connection;

/// The schema this code reads and writes (1: before plans were split off
/// in `runs.state`; read as is).
const SCHEMA_VERSION: i64 = 2;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS runs (
    tenant_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    state TEXT NOT NULL,
    version INTEGER NOT NULL,
    status TEXT NOT NULL,
    correlation_id TEXT NOT NULL,
    last_sequence INTEGER NOT NULL,
    created_at_millis INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, run_id)
);
CREATE INDEX IF NOT EXISTS runs_by_status ON runs (tenant_id, status, created_at_millis, run_id);
CREATE INDEX IF NOT EXISTS runs_by_creation ON runs (tenant_id, created_at_millis, run_id);
CREATE TABLE IF NOT EXISTS idempotency (
    tenant_id TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    run_id TEXT NOT NULL,
    PRIMARY KEY (tenant_id, idempotency_key)
);
CREATE TABLE IF NOT EXISTS events (
    tenant_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    sequence INTEGER NOT NULL,
    frame TEXT NOT NULL,
    PRIMARY KEY (tenant_id, run_id, sequence)
);
CREATE TABLE IF NOT EXISTS leases (
    tenant_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    node_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    claimant TEXT NOT NULL,
    expires_at_millis INTEGER NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (tenant_id, run_id, node_id, attempt)
);
CREATE TABLE IF NOT EXISTS outbox (
    tenant_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    message TEXT NOT NULL,
    resent INTEGER NOT NULL DEFAULT 0,
    written_at_millis INTEGER NOT NULL,
    quiet_since_millis INTEGER,
    PRIMARY KEY (tenant_id, run_id, message_id)
);
CREATE TABLE IF NOT EXISTS capabilities (
    tenant_id TEXT NOT NULL,
    capability_id TEXT NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (tenant_id, capability_id)
);
CREATE TABLE IF NOT EXISTS entries (
    tenant_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    entry_key TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (tenant_id, run_id, entry_key)
);
CREATE TABLE IF NOT EXISTS threads (
    tenant_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    at_millis INTEGER NOT NULL,
    exchange TEXT NOT NULL,
    PRIMARY KEY (tenant_id, thread_id, run_id)
);
CREATE TABLE IF NOT EXISTS live_run_counters (
    tenant_id TEXT NOT NULL PRIMARY KEY,
    live_runs INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS idempotency_by_run ON idempotency (tenant_id, run_id);
CREATE INDEX IF NOT EXISTS threads_by_run ON threads (tenant_id, run_id);
CREATE INDEX IF NOT EXISTS threads_by_time ON threads (tenant_id, thread_id, at_millis, run_id);
CREATE TABLE IF NOT EXISTS stream_leases (
    tenant_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    stream_id TEXT NOT NULL,
    expires_at_millis INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, run_id, stream_id)
);
CREATE TABLE IF NOT EXISTS schedules (
    tenant_id TEXT NOT NULL,
    schedule_id TEXT NOT NULL,
    revision INTEGER NOT NULL,
    due_millis INTEGER,
    created_at_millis INTEGER NOT NULL,
    schedule TEXT NOT NULL,
    PRIMARY KEY (tenant_id, schedule_id)
);
CREATE INDEX IF NOT EXISTS schedules_due ON schedules (due_millis) WHERE due_millis IS NOT NULL;
CREATE TABLE IF NOT EXISTS thread_lanes (
    tenant_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    lane TEXT NOT NULL,
    version INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, thread_id)
);
CREATE TABLE IF NOT EXISTS audit_records (
    tenant_id TEXT NOT NULL,
    audit_id TEXT NOT NULL,
    expires_at_millis INTEGER NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (tenant_id, audit_id)
);
CREATE INDEX IF NOT EXISTS audit_records_expiry ON audit_records (expires_at_millis);
CREATE TABLE IF NOT EXISTS evaluations (
    tenant_id TEXT NOT NULL,
    evaluation_id TEXT NOT NULL,
    record TEXT,
    request TEXT,
    results TEXT,
    PRIMARY KEY (tenant_id, evaluation_id)
);
CREATE TABLE IF NOT EXISTS evaluation_transcripts (
    tenant_id TEXT NOT NULL,
    evaluation_id TEXT NOT NULL,
    example_id TEXT NOT NULL,
    panel_output TEXT NOT NULL,
    PRIMARY KEY (tenant_id, evaluation_id, example_id)
);
CREATE TABLE IF NOT EXISTS request_keys (
    tenant_id TEXT NOT NULL,
    request_key TEXT NOT NULL,
    expires_at_millis INTEGER NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (tenant_id, request_key)
);
CREATE INDEX IF NOT EXISTS request_keys_expiry ON request_keys (expires_at_millis);
CREATE TABLE IF NOT EXISTS memory_items (
    tenant_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    item_key TEXT NOT NULL,
    person TEXT,
    expires_at_millis INTEGER,
    item TEXT NOT NULL,
    PRIMARY KEY (tenant_id, namespace, item_key)
);
CREATE INDEX IF NOT EXISTS memory_items_person ON memory_items (tenant_id, person);
CREATE INDEX IF NOT EXISTS memory_items_expiry ON memory_items (expires_at_millis);
CREATE TRIGGER IF NOT EXISTS audit_records_are_append_only
BEFORE UPDATE ON audit_records
BEGIN
    SELECT RAISE(ABORT, 'audit records are append-only');
END;
";

/// `RunStore` and `CapabilityDirectory` on one SQLite file.
#[derive(Clone)]
pub struct SqliteStore {
    /// The one thread that owns the writing connection: every write is a
    /// job sent to it (`connection_thread`).
    connection: Arc<connection_thread::ConnectionThread>,
    /// The reading connection's thread (`query_only`): every read is a job
    /// sent to it, so reads do not queue behind writes.
    reader: Arc<connection_thread::ConnectionThread>,
    /// Stamps outbox entries and run creation (the orchestrator's clock).
    clock: Arc<dyn Clock>,
    /// This process's registration beside the file: leases carry its token.
    claimant_process: Arc<claimants::ClaimantProcess>,
    /// Step commits waiting for the next group (`group_commit`).
    group: Arc<group_commit::GroupCommits>,
    /// The states this process last committed (`committed_states`).
    committed_states: Arc<run_store::committed_states::CommittedStates>,
}

pub(crate) fn unavailable(error: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("sqlite: {error}"))
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path`, with its parent folder.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        if let Some(parent) = path
            .parent()
            .filter(|parent| !parent.as_os_str().is_empty())
        {
            std::fs::create_dir_all(parent)
                .map_err(|error| unavailable(format!("creating {}: {error}", parent.display())))?;
        }
        let mut connection = Connection::open(path)
            .map_err(|error| unavailable(format!("opening {}: {error}", path.display())))?;
        connection
            .busy_timeout(std::time::Duration::from_secs(5))
            .map_err(unavailable)?;
        // Switching to WAL takes an exclusive lock and does not wait on the
        // busy handler: with several processes opening one file at once
        // (two `baton run`s), it is retried until the first one switched it.
        with_busy_retries(|| {
            let mode: String =
                connection.pragma_query_value(None, "journal_mode", |row| row.get(0))?;
            if !mode.eq_ignore_ascii_case("wal") {
                connection.pragma_update(None, "journal_mode", "WAL")?;
            }
            Ok(())
        })
        .map_err(unavailable)?;
        connection
            .pragma_update(None, "synchronous", "FULL")
            .map_err(unavailable)?;
        connection
            .pragma_update(None, "wal_autocheckpoint", 10000)
            .map_err(unavailable)?;
        // The schema is set up in one write transaction (it waits for the
        // lock), so concurrent first opens do not race each other.
        let setup = connection
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(unavailable)?;
        let found: i64 = setup
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .map_err(unavailable)?;
        if found > SCHEMA_VERSION {
            return Err(StoreError::Corrupt(format!(
                "{} holds schema version {found}, written by a newer Baton (this one reads {SCHEMA_VERSION})",
                path.display()
            )));
        }
        let counters_are_new = !setup
            .prepare(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'live_run_counters'",
            )
            .and_then(|mut statement| statement.exists([]))
            .map_err(unavailable)?;
        setup.execute_batch(SCHEMA).map_err(unavailable)?;
        add_lease_owner_column(&setup)?;
        add_forked_from_column(&setup)?;
        add_retention_column(&setup)?;
        add_outbox_quiet_column(&setup)?;
        index_runs_by_status_and_creation(&setup)?;
        if counters_are_new {
            count_live_runs_once(&setup)?;
        }
        setup
            .pragma_update(None, "user_version", SCHEMA_VERSION)
            .map_err(unavailable)?;
        setup.commit().map_err(unavailable)?;
        let claimant_process = Arc::new(claimants::ClaimantProcess::register(path)?);
        let reader = open_reader(path)?;
        Ok(SqliteStore {
            connection: Arc::new(connection_thread::ConnectionThread::start(connection)?),
            reader: Arc::new(connection_thread::ConnectionThread::start(reader)?),
            clock: Arc::new(SystemClock),
            claimant_process,
            group: Arc::default(),
            committed_states: Arc::default(),
        })
    }

    /// The same store reading `clock` instead of the wall clock.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Runs `work` on the connection's own thread (SQLite calls block; the
    /// async executor must not) and answers with its result.
    pub(crate) async fn with_connection<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.connection.run(work).await
    }

    /// Runs the read `work` on the reading connection's thread (it cannot
    /// write: the connection is `query_only`).
    pub(crate) async fn with_reader<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.reader.run(work).await
    }
}

/// The reading connection: the same file, after the writer set it up (WAL,
/// schema), refusing writes.
fn open_reader(path: &Path) -> Result<Connection, StoreError> {
    let reader = Connection::open(path)
        .map_err(|error| unavailable(format!("opening {} to read: {error}", path.display())))?;
    reader
        .busy_timeout(std::time::Duration::from_secs(5))
        .map_err(unavailable)?;
    reader
        .pragma_update(None, "query_only", true)
        .map_err(unavailable)?;
    Ok(reader)
}

/// Files written before leases carried their process's token lack the
/// `owner` column: it is added (empty: such leases wait for their expiry).
fn add_lease_owner_column(setup: &rusqlite::Transaction<'_>) -> Result<(), StoreError> {
    let has_owner = setup
        .prepare("SELECT 1 FROM pragma_table_info('leases') WHERE name = 'owner'")
        .and_then(|mut statement| statement.exists([]))
        .map_err(unavailable)?;
    if !has_owner {
        setup
            .execute_batch("ALTER TABLE leases ADD COLUMN owner TEXT NOT NULL DEFAULT ''")
            .map_err(unavailable)?;
    }
    Ok(())
}

/// Files written before the runs list could show a run's forks lack the
/// `forked_from` column: it is added (empty: a fork made before then does
/// not list under its source) with its index.
fn add_forked_from_column(setup: &rusqlite::Transaction<'_>) -> Result<(), StoreError> {
    let has_column = setup
        .prepare("SELECT 1 FROM pragma_table_info('runs') WHERE name = 'forked_from'")
        .and_then(|mut statement| statement.exists([]))
        .map_err(unavailable)?;
    if !has_column {
        setup
            .execute_batch("ALTER TABLE runs ADD COLUMN forked_from TEXT")
            .map_err(unavailable)?;
    }
    setup
        .execute_batch(
            "CREATE INDEX IF NOT EXISTS runs_by_fork_source ON runs (tenant_id, forked_from) \
             WHERE forked_from IS NOT NULL",
        )
        .map_err(unavailable)
}

/// Files written before retention lack `retain_until_millis` (when an
/// ended run may be deleted): it is added (empty: runs ended before then
/// are kept until a commit stamps them) with its partial index.
fn add_retention_column(setup: &rusqlite::Transaction<'_>) -> Result<(), StoreError> {
    let has_column = setup
        .prepare("SELECT 1 FROM pragma_table_info('runs') WHERE name = 'retain_until_millis'")
        .and_then(|mut statement| statement.exists([]))
        .map_err(unavailable)?;
    if !has_column {
        setup
            .execute_batch("ALTER TABLE runs ADD COLUMN retain_until_millis INTEGER")
            .map_err(unavailable)?;
    }
    setup
        .execute_batch(
            "CREATE INDEX IF NOT EXISTS runs_by_expiry ON runs (retain_until_millis) \
             WHERE retain_until_millis IS NOT NULL",
        )
        .map_err(unavailable)
}

/// Files written before the sweeper re-drove stalled runs lack the
/// outbox's `quiet_since_millis`: it is added, set from each entry's
/// `written_at_millis` (an entry re-sent once under the old rule is
/// re-driven again if it is still there), and indexed in place of the old
/// `(resent, written_at_millis)` index.
fn add_outbox_quiet_column(setup: &rusqlite::Transaction<'_>) -> Result<(), StoreError> {
    let has_column = setup
        .prepare("SELECT 1 FROM pragma_table_info('outbox') WHERE name = 'quiet_since_millis'")
        .and_then(|mut statement| statement.exists([]))
        .map_err(unavailable)?;
    if !has_column {
        setup
            .execute_batch("ALTER TABLE outbox ADD COLUMN quiet_since_millis INTEGER")
            .map_err(unavailable)?;
    }
    setup
        .execute_batch(
            "UPDATE outbox SET quiet_since_millis = written_at_millis WHERE quiet_since_millis IS NULL;
             DROP INDEX IF EXISTS outbox_waiting;
             CREATE INDEX IF NOT EXISTS outbox_quiet ON outbox (quiet_since_millis);",
        )
        .map_err(unavailable)
}

/// Files written before the status listing had its own index kept
/// `runs_by_status` on `(tenant_id, status)` alone: it is rebuilt with the
/// creation order, so a page of one status is read in order from the index.
fn index_runs_by_status_and_creation(setup: &rusqlite::Transaction<'_>) -> Result<(), StoreError> {
    let columns: i64 = setup
        .query_row(
            "SELECT COUNT(*) FROM pragma_index_info('runs_by_status')",
            [],
            |row| row.get(0),
        )
        .map_err(unavailable)?;
    if columns < 4 {
        setup
            .execute_batch(
                "DROP INDEX IF EXISTS runs_by_status;
                 CREATE INDEX runs_by_status ON runs (tenant_id, status, created_at_millis, run_id);",
            )
            .map_err(unavailable)?;
    }
    Ok(())
}

/// A file opened for the first time since the counters exist (the table
/// was just created): the counters are set from the runs, once.
fn count_live_runs_once(setup: &rusqlite::Transaction<'_>) -> Result<(), StoreError> {
    setup
        .execute_batch(
            "INSERT INTO live_run_counters (tenant_id, live_runs)
             SELECT tenant_id, COUNT(*) FROM runs WHERE status IN ('queued', 'running')
             GROUP BY tenant_id",
        )
        .map_err(unavailable)
}

/// Runs `step` again while SQLite answers "busy" (for up to five seconds).
fn with_busy_retries(
    mut step: impl FnMut() -> Result<(), rusqlite::Error>,
) -> Result<(), rusqlite::Error> {
    let started = std::time::Instant::now();
    loop {
        match step() {
            Err(rusqlite::Error::SqliteFailure(failure, _))
                if failure.code == rusqlite::ErrorCode::DatabaseBusy
                    && started.elapsed() < std::time::Duration::from_secs(5) =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => return other,
        }
    }
}
