//! Where runs are kept: the store a process is given (`StoreChoice`:
//! memory, a SQLite file, or DynamoDB and SQS) made into the ports the
//! services run over (`StorePorts`), for the CLI and the functions alike.
//! The cloud ports come from the configuration (`cloud_ports`); the embedded
//! ones (feature `embedded`: the CLI) from the choice, a SQLite file's
//! unconsumed outbox put back on the in-memory queue as far as
//! `LeftOverSteps` says. Every store's commits can be counted
//! (`observe_commits`).

use std::path::PathBuf;
use std::sync::Arc;

use baton_runtime::clock::SystemClock;
use baton_runtime::ports::{CapabilityDirectory, Clock, RunStore, StepQueue};
use baton_runtime::services::capability_cache::CachingCapabilityDirectory;

use crate::{Configuration, StartupError, trace_export};

/// Where runs are kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreChoice {
    /// In-memory store and queue (the embedded default): gone with the process.
    Memory,
    /// One SQLite file (`None`: `$XDG_DATA_HOME/baton/runs.sqlite3`, else
    /// `$HOME/.local/share/baton/runs.sqlite3`) and an in-memory queue
    /// refilled from the file's outbox at start: runs survive the process.
    Sqlite(Option<PathBuf>),
    /// DynamoDB and SQS (AWS_ENDPOINT_URL, BATON_TABLE, BATON_QUEUE_URL).
    Dynamodb,
}

/// A `--store` that names no store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a store: use memory, sqlite, sqlite:PATH or dynamodb")]
pub struct NotAStore(pub String);

impl std::str::FromStr for StoreChoice {
    type Err = NotAStore;

    /// `memory`, `sqlite`, `sqlite:PATH` or `dynamodb`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "memory" => Ok(StoreChoice::Memory),
            "sqlite" => Ok(StoreChoice::Sqlite(None)),
            "dynamodb" => Ok(StoreChoice::Dynamodb),
            other => match other.strip_prefix("sqlite:") {
                Some(path) if !path.is_empty() => {
                    Ok(StoreChoice::Sqlite(Some(PathBuf::from(path))))
                }
                _ => Err(NotAStore(other.to_string())),
            },
        }
    }
}

/// The adapters of a deployment (in memory, or DynamoDB and SQS).
#[derive(Clone)]
pub struct StorePorts {
    pub store: Arc<dyn RunStore>,
    pub queue: Arc<dyn StepQueue>,
    pub capability_directory: Arc<dyn CapabilityDirectory>,
    pub clock: Arc<dyn Clock>,
    /// Chat threads (the same store as the runs).
    pub threads: Arc<dyn baton_runtime::ports::ThreadStore>,
    /// Retention's batches on the same store (`baton gc`, `serve`'s
    /// interval, the `sweeper` function).
    pub retention: Arc<dyn baton_runtime::ports::RetentionUpkeep>,
    /// Open event streams' leases (the store's, so every process and
    /// Lambda instance counts the same streams).
    pub stream_leases: Arc<dyn baton_runtime::ports::StreamLeases>,
    /// Schedules (the store's, so `baton serve` and the API read the same).
    pub schedules: Arc<dyn baton_runtime::ports::ScheduleBook>,
    /// What fires them: EventBridge Scheduler where the api function is
    /// configured for it (`BATON_SCHEDULER_TARGET_ARN`, …), else the process
    /// keeping the store (`baton serve`).
    pub schedule_triggers: Arc<dyn baton_runtime::ports::ScheduleTriggers>,
    /// The audit trail (the store's: append-only).
    pub audit: Arc<dyn baton_runtime::ports::AuditLog>,
    /// Requests' idempotency keys (the store's, so a retry reaching
    /// another process or Lambda instance finds the first answer).
    pub request_keys: Arc<dyn baton_runtime::ports::RequestKeys>,
    /// The tenants' memory across runs (the store's).
    pub memory: Arc<dyn baton_runtime::ports::MemoryStore>,
}

/// The DynamoDB store (runs and capability registrations) and the SQS queue
/// from `BATON_TABLE`, `BATON_QUEUE_URL` and the SDK's own variables
/// (`AWS_ENDPOINT_URL` for emulators).
pub async fn cloud_ports(configuration: &Configuration) -> Result<StorePorts, StartupError> {
    let table = Configuration::required(
        &configuration.table,
        "BATON_TABLE",
        "name the DynamoDB table (infra/local.sh up prints it)",
    )?;
    let queue_url = Configuration::required(
        &configuration.queue_url,
        "BATON_QUEUE_URL",
        "give the SQS step queue URL (infra/local.sh up prints it)",
    )?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let aws = baton_aws::AwsConnection::from_environment().await;
    let store = Arc::new(
        baton_aws::DynamoRunStore::new(&aws, table)
            .with_clock(clock.clone())
            .with_retention(configuration.retention()),
    );
    // A received message starts hidden for one node lease, renewed while
    // its step runs: a dead holder's message is back within one lease.
    let queue = Arc::new(
        baton_aws::SqsStepQueue::new(&aws, queue_url).with_receive_hold(configuration.node_lease),
    );
    // Registrations are read at each planning step (and before a node of a
    // registered capability); a warm instance lists a tenant's from
    // DynamoDB at most every `BATON_CAPABILITY_CACHE_SECONDS`.
    let capability_directory = Arc::new(CachingCapabilityDirectory::new(
        store.clone(),
        configuration.capability_cache,
    ));
    let ports = StorePorts {
        threads: store.clone(),
        retention: store.clone(),
        stream_leases: store.clone(),
        schedules: store.clone(),
        audit: store.clone(),
        request_keys: store.clone(),
        memory: store.clone(),
        schedule_triggers: schedule_triggers(configuration, &aws),
        store,
        queue,
        capability_directory,
        clock,
    };
    let sink: Option<baton_runtime::observe::telemetry::ObservationSink> = if configuration.emit_emf
    {
        Some(Arc::new(
            |seen: &[baton_runtime::observe::telemetry::Observation]| {
                let now = baton_core::basics::instant::Instant::from_unix_millis(
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map(|elapsed| elapsed.as_millis() as u64)
                        .unwrap_or(0),
                );
                for line in baton_runtime::observe::telemetry::emf_lines(seen, now) {
                    println!("{line}");
                }
            },
        ))
    } else {
        None
    };
    Ok(observe_commits(
        ports,
        Arc::new(baton_runtime::observe::telemetry::RunCounters::default()),
        sink,
    ))
}

/// EventBridge Scheduler fires the schedules where this process is built
/// for it (feature `scheduler`: the api function) and configured for it
/// (`BATON_SCHEDULER_TARGET_ARN`, `BATON_SCHEDULER_ROLE_ARN`); otherwise the
/// process keeping the store does (`baton serve`).
#[allow(unused_variables)]
fn schedule_triggers(
    configuration: &Configuration,
    aws: &baton_aws::AwsConnection,
) -> Arc<dyn baton_runtime::ports::ScheduleTriggers> {
    #[cfg(feature = "scheduler")]
    if let Some(target) = &configuration.scheduler {
        return Arc::new(baton_aws::scheduler::EventBridgeScheduleTriggers::new(
            aws,
            baton_aws::scheduler::SchedulerTarget {
                group: target.group.clone(),
                target_arn: target.target_arn.clone(),
                role_arn: target.role_arn.clone(),
            },
        ));
    }
    Arc::new(baton_runtime::ports::StoreKeepsSchedules)
}

/// The same ports, their run store counting what it commits into
/// `counters` (and handing each commit's observations to `sink`, and each
/// ended run's root span to the trace export when there is one).
pub fn observe_commits(
    mut ports: StorePorts,
    counters: Arc<baton_runtime::observe::telemetry::RunCounters>,
    sink: Option<baton_runtime::observe::telemetry::ObservationSink>,
) -> StorePorts {
    let mut observed =
        baton_runtime::observe::telemetry::ObservedRunStore::new(ports.store, counters);
    if let Some(sink) = sink {
        observed = observed.with_sink(sink);
    }
    if let Some(export) = trace_export() {
        observed = observed.with_run_spans(export.run_spans());
    }
    ports.store = Arc::new(observed);
    ports
}

/// The SQLite file `sqlite` without a path means: under the user's data
/// directory (`XDG_DATA_HOME`, else `HOME/.local/share`).
/// The SQLite file a `--store sqlite[:PATH]` choice names; refused for
/// another store.
pub fn sqlite_file(
    store: &StoreChoice,
    configuration: &Configuration,
) -> Result<PathBuf, StartupError> {
    match store {
        StoreChoice::Sqlite(Some(path)) => Ok(path.clone()),
        StoreChoice::Sqlite(None) => default_state_file(configuration),
        other => Err(StartupError(format!("{other:?} keeps no SQLite file"))),
    }
}

pub fn default_state_file(configuration: &Configuration) -> Result<PathBuf, StartupError> {
    let data_directory = configuration
        .data_home
        .clone()
        .ok_or_else(|| {
            StartupError("--store sqlite needs XDG_DATA_HOME or HOME to find its file; give one with --store sqlite:PATH".to_string())
        })?;
    Ok(data_directory.join("baton").join("runs.sqlite3"))
}

/// Which unconsumed steps a process takes over from a SQLite store.
#[derive(Clone, Copy, Debug)]
pub enum LeftOverSteps<'a> {
    /// Every run's (`baton serve`: the store's one long-running worker).
    AllRuns,
    /// One run's (`baton resume`/`resolve`: its due timers, its lost steps).
    OfRun(&'a str),
    /// None (`baton run`: a new run; other processes may be working on the rest).
    None,
}

/// The embedded stores over `queue`: in memory, or a SQLite file whose
/// unconsumed outbox (what a previous process left) goes back on the queue,
/// as far as `left_over` says. Answers the ports and how many steps were
/// queued again (the caller tells its user).
#[cfg(feature = "embedded")]
pub async fn embedded_store_ports(
    choice: &StoreChoice,
    configuration: &Configuration,
    queue: Arc<baton_runtime::memory::InMemoryStepQueue>,
    clock: Arc<dyn Clock>,
    left_over: LeftOverSteps<'_>,
) -> Result<(StorePorts, usize), StartupError> {
    use baton_runtime::memory::{
        InMemoryCapabilityDirectory, InMemoryRunStore, InMemoryThreadStore,
    };

    let path = match choice {
        StoreChoice::Memory => {
            let memory = Arc::new(
                InMemoryRunStore::new()
                    .with_clock(clock.clone())
                    .with_ended_run_cap(configuration.memory_max_ended_runs),
            );
            let ports = StorePorts {
                store: memory.clone(),
                retention: memory,
                stream_leases: Arc::new(baton_runtime::memory::InMemoryStreamLeases::new()),
                schedules: Arc::new(baton_runtime::memory::InMemoryScheduleBook::new()),
                audit: Arc::new(baton_runtime::memory::InMemoryAuditLog::new()),
                request_keys: Arc::new(baton_runtime::memory::InMemoryRequestKeys::new()),
                memory: Arc::new(baton_runtime::memory::InMemoryMemoryStore::default()),
                schedule_triggers: Arc::new(baton_runtime::ports::StoreKeepsSchedules),
                queue,
                capability_directory: Arc::new(InMemoryCapabilityDirectory::new()),
                clock,
                threads: Arc::new(InMemoryThreadStore::new()),
            };
            return Ok((ports, 0));
        }
        StoreChoice::Sqlite(_) => sqlite_file(choice, configuration)?,
        StoreChoice::Dynamodb => {
            return Err(StartupError(
                "--store dynamodb is for `baton serve`; `baton run` keeps runs in memory or sqlite"
                    .to_string(),
            ));
        }
    };
    let in_file =
        |error: &dyn std::fmt::Display| StartupError(format!("store {}: {error}", path.display()));
    let sqlite = Arc::new(
        baton_sqlite::SqliteStore::open(&path)
            .map_err(|error| in_file(&error))?
            .with_clock(clock.clone()),
    );
    let mut taken_over = match left_over {
        LeftOverSteps::None => Vec::new(),
        LeftOverSteps::AllRuns | LeftOverSteps::OfRun(_) => sqlite
            .unconsumed_outbox()
            .await
            .map_err(|error| in_file(&error))?,
    };
    if let LeftOverSteps::OfRun(run_id) = left_over {
        taken_over.retain(|message| message.run_id == run_id);
    }
    if !taken_over.is_empty() {
        queue
            .send(&taken_over)
            .await
            .map_err(|error| in_file(&error))?;
    }
    let ports = StorePorts {
        store: sqlite.clone(),
        queue,
        capability_directory: sqlite.clone(),
        clock,
        retention: sqlite.clone(),
        stream_leases: sqlite.clone(),
        schedules: sqlite.clone(),
        audit: sqlite.clone(),
        request_keys: sqlite.clone(),
        memory: sqlite.clone(),
        schedule_triggers: Arc::new(baton_runtime::ports::StoreKeepsSchedules),
        threads: sqlite,
    };
    Ok((ports, taken_over.len()))
}
