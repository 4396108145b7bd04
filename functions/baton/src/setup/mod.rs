//! What every command stands on: the configuration, the registry, and the
//! services over the chosen store (the embedded default, or DynamoDB and
//! SQS), with the model the command line picks (`model_choice`) and the
//! upkeep a long-running process does (`sweeping`).

pub mod model_choice;
pub mod sweeping;

use std::path::PathBuf;
use std::sync::Arc;

use baton_bootstrap::stores::{LeftOverSteps, StoreChoice};
use baton_bootstrap::{Configuration, process_environment};
use baton_core::catalog::registry::Registry;
use baton_runtime::clock::SystemClock;
use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::ports::{Clock, StepQueue};
use baton_runtime::services::{OutboxSweeper, Services};

use crate::failure::{CommandError, invalid};

/// Tenant of runs started from the command line.
/// `--store`: memory, sqlite, sqlite:PATH or dynamodb.
pub fn parse_store(text: &str) -> Result<StoreChoice, baton_bootstrap::NotAStore> {
    text.parse()
}

/// Tenant of runs started from the command line.
pub(crate) const LOCAL_TENANT: &str = "local";

/// The registry: `--registry DIR`, else `BATON_REGISTRY_DIR`, else the one
/// built into the binary.
pub(crate) fn load_registry(
    registry: Option<PathBuf>,
    configuration: &Configuration,
) -> Result<Arc<Registry>, CommandError> {
    let mut configuration = configuration.clone();
    if let Some(directory) = registry {
        configuration.registry_dir = Some(directory);
    }
    let home = match model_choice::model_choice_from(&process_environment) {
        Ok(model_choice::ModelChoice::Local) => baton_bootstrap::DefaultModelHome::Offline,
        _ => baton_bootstrap::DefaultModelHome::Endpoint,
    };
    baton_bootstrap::registry_for(&configuration, home).map_err(invalid)
}

pub(crate) fn configuration() -> Result<Configuration, CommandError> {
    let configuration = Configuration::from_variables(&process_environment).map_err(invalid)?;
    if let Some(point) = &configuration.crash_at {
        baton_runtime::crash_points::arm(point)
            .map_err(|problem| invalid(format!("BATON_CRASH_AT: {problem}")))?;
    }
    Ok(configuration)
}

/// A service the command needs would not start: its configuration is refused.
pub(crate) fn startup(error: baton_bootstrap::StartupError) -> CommandError {
    invalid(error)
}

/// The embedded default: in-memory queue, the chosen embedded store, the configured model.
pub(crate) async fn embedded_services(
    registry: Arc<Registry>,
    configuration: &Configuration,
    store: &StoreChoice,
    left_over: LeftOverSteps<'_>,
) -> Result<(Services, Arc<InMemoryStepQueue>), CommandError> {
    embedded_services_counted(registry, configuration, store, left_over, None)
        .await
        .map(|(services, queue, _)| (services, queue))
}

/// The same, its commits counted into `counters` when given (`baton serve`'s `/metrics`).
async fn embedded_services_counted(
    registry: Arc<Registry>,
    configuration: &Configuration,
    store: &StoreChoice,
    left_over: LeftOverSteps<'_>,
    counters: Option<Arc<baton_runtime::observe::telemetry::RunCounters>>,
) -> Result<(Services, Arc<InMemoryStepQueue>, sweeping::Sweepers), CommandError> {
    let secrets = baton_bootstrap::secret_store::secret_store(
        configuration,
        baton_bootstrap::config::SecretSourceChoice::Local,
    )
    .await;
    let llm = model_choice::routed_model_for_cli(&registry, &process_environment, secrets.clone())
        .map_err(startup)?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let queue = Arc::new(InMemoryStepQueue::new());
    let (mut ports, queued_again) = baton_bootstrap::stores::embedded_store_ports(
        store,
        configuration,
        queue.clone(),
        clock.clone(),
        left_over,
    )
    .await
    .map_err(startup)?;
    if queued_again > 0 {
        eprintln!("baton: {queued_again} step(s) left by an earlier process are queued again");
    }
    if let Some(counters) = counters {
        ports = baton_bootstrap::observe_commits(ports, counters, None);
    }
    let sweepers = sweeping::Sweepers::retention_only(ports.retention.clone(), clock.clone());
    let executors = baton_bootstrap::Executors {
        llm,
        transcripts: baton_bootstrap::transcript_publisher(&process_environment, secrets.clone())
            .map_err(startup)?,
        tools: baton_bootstrap::tool_runner_from(
            configuration,
            registry.clone(),
            secrets,
            &process_environment,
        )
        .map_err(startup)?,
        embedder: baton_bootstrap::memory_embedder(&process_environment).map_err(startup)?,
        notifier: Arc::new(baton_bootstrap::notifier::completion_notifier(
            configuration,
            clock,
        )),
        remote_agents: baton_bootstrap::remote_agent_cards(configuration),
    };
    let services = baton_bootstrap::services_over(
        registry,
        ports,
        executors,
        baton_bootstrap::settings_from(configuration),
        format!("local-{}", std::process::id()),
    );
    Ok((services, queue, sweepers))
}

/// DynamoDB and SQS from the configuration (`BATON_TABLE`, `BATON_QUEUE_URL`, `AWS_*`).
async fn cloud_services(
    registry: Arc<Registry>,
    configuration: &Configuration,
    counters: Arc<baton_runtime::observe::telemetry::RunCounters>,
) -> Result<(Services, Arc<dyn StepQueue>, sweeping::Sweepers), CommandError> {
    let secrets = baton_bootstrap::secret_store::secret_store(
        configuration,
        baton_bootstrap::config::SecretSourceChoice::Aws,
    )
    .await;
    let llm = model_choice::routed_model_for_cli(&registry, &process_environment, secrets.clone())
        .map_err(startup)?;
    let ports = baton_bootstrap::observe_commits(
        baton_bootstrap::cloud_ports(configuration)
            .await
            .map_err(startup)?,
        counters,
        None,
    );
    let queue = ports.queue.clone();
    let outbox = OutboxSweeper::new(ports.store.clone(), queue.clone(), ports.clock.clone());
    let (retention, clock) = (ports.retention.clone(), ports.clock.clone());
    let executors = baton_bootstrap::Executors {
        llm,
        transcripts: baton_bootstrap::transcript_publisher(&process_environment, secrets.clone())
            .map_err(startup)?,
        tools: baton_bootstrap::tool_runner_from(
            configuration,
            registry.clone(),
            secrets,
            &process_environment,
        )
        .map_err(startup)?,
        embedder: baton_bootstrap::memory_embedder(&process_environment).map_err(startup)?,
        notifier: Arc::new(baton_bootstrap::notifier::completion_notifier(
            configuration,
            ports.clock.clone(),
        )),
        remote_agents: baton_bootstrap::remote_agent_cards(configuration),
    };
    let services = baton_bootstrap::services_over(
        registry,
        ports,
        executors,
        baton_bootstrap::settings_from(configuration),
        format!("serve-{}", std::process::id()),
    );
    let sweeper =
        sweeping::Sweepers::cloud(outbox, retention, clock, configuration, &services).await;
    Ok((services, queue, sweeper))
}

/// The services, step queue and upkeep of a long-running process (`baton
/// serve`, `baton mcp`) on `store`: retention's batches on every store; on
/// the cloud stores a send lost after its commit is recovered by the
/// sweeper, as the deployment's scheduled function does, while the embedded
/// stores re-drive every run's left-over steps at start.
pub(crate) async fn services_on(
    store: &StoreChoice,
    registry: Arc<Registry>,
    configuration: &Configuration,
    counters: Arc<baton_runtime::observe::telemetry::RunCounters>,
) -> Result<(Services, Arc<dyn StepQueue>, sweeping::Sweepers), CommandError> {
    match store {
        StoreChoice::Dynamodb => cloud_services(registry, configuration, counters).await,
        embedded => embedded_services_counted(
            registry,
            configuration,
            embedded,
            LeftOverSteps::AllRuns,
            Some(counters),
        )
        .await
        .map(|(services, queue, sweepers)| (services, queue as Arc<dyn StepQueue>, sweepers)),
    }
}
