//! `baton-bootstrap`: start-up wiring. Reads the environment once, builds
//! every client and port, and hands back an `Orchestrator` (plus the HTTP
//! authenticator). Used by the `baton` CLI and by each Lambda function's
//! `main`, so configuration means the same everywhere.
//!
//! Invariant: every configuration problem is reported here, at start-up,
//! with the variable's name; nothing here runs per request.

use std::path::PathBuf;
use std::sync::Arc;

use baton_core::registry::Registry;
use baton_core::schema::ValidatorCache;
use baton_http::TokenAuthenticator;
use baton_llm::{OpenAiCompatibleConfig, OpenAiCompatibleProvider};
use baton_runtime::capability_cache::CachingCapabilityDirectory;
use baton_runtime::clock::{RandomIds, SystemClock};
use baton_runtime::orchestrator::{Orchestrator, OrchestratorSettings, PlannerChoice};
use baton_runtime::ports::{CapabilityDirectory, LlmProvider, RunStore, StepQueue};
use baton_runtime::registry_loader::{default_registry_root, load_registry};

/// A start-up failure, already phrased for the operator.
#[derive(Debug)]
pub struct StartupError(pub String);

impl std::fmt::Display for StartupError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::error::Error for StartupError {}

/// JSON logs on stderr, filtered by `BATON_LOG` (default `info` in functions).
pub fn init_json_logging(default_filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("BATON_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Loads the registry at `root` (default `$BATON_REGISTRY_DIR` or `./registry`).
pub fn registry_from(root: Option<PathBuf>) -> Result<Arc<Registry>, StartupError> {
    let root = root.unwrap_or_else(default_registry_root);
    load_registry(&root)
        .map(Arc::new)
        .map_err(|error| StartupError(format!("registry {}: {error}", root.display())))
}

/// The model provider from `BATON_LLM_*` / `OPENAI_*`.
pub fn model_from_environment() -> Result<Arc<dyn LlmProvider>, StartupError> {
    let provider = OpenAiCompatibleConfig::from_environment()
        .and_then(OpenAiCompatibleProvider::new)
        .map_err(|error| StartupError(format!("{error} (see README, Configuration)")))?;
    Ok(Arc::new(provider))
}

fn required_variable(name: &str, purpose: &str) -> Result<String, StartupError> {
    std::env::var(name)
        .ok()
        .filter(|value| !value.trim().is_empty())
        .ok_or_else(|| StartupError(format!("{name} is not set: {purpose}")))
}

/// The adapters an orchestrator works through (in memory, or DynamoDB and SQS).
pub struct OrchestratorPorts {
    pub store: Arc<dyn RunStore>,
    pub queue: Arc<dyn StepQueue>,
    pub capability_directory: Arc<dyn CapabilityDirectory>,
}

/// The DynamoDB store (runs and capability registrations) and the SQS queue
/// from `BATON_TABLE`, `BATON_QUEUE_URL` and the SDK's own variables
/// (`AWS_ENDPOINT_URL` for emulators).
pub async fn cloud_ports_from_environment() -> Result<OrchestratorPorts, StartupError> {
    let table = required_variable(
        "BATON_TABLE",
        "name the DynamoDB table (infra/local.sh up prints it)",
    )?;
    let queue_url = required_variable(
        "BATON_QUEUE_URL",
        "give the SQS step queue URL (infra/local.sh up prints it)",
    )?;
    let configuration = baton_aws::load_aws_configuration().await;
    let store = Arc::new(baton_aws::DynamoRunStore::new(
        aws_sdk_dynamodb::Client::new(&configuration),
        table,
    ));
    let queue = Arc::new(baton_aws::SqsStepQueue::new(
        aws_sdk_sqs::Client::new(&configuration),
        queue_url,
    ));
    // Registrations are read at each planning step; a warm instance lists a
    // tenant's from DynamoDB at most every 10 s.
    let capability_directory = Arc::new(CachingCapabilityDirectory::new(
        store.clone(),
        std::time::Duration::from_secs(10),
    ));
    Ok(OrchestratorPorts {
        store,
        queue,
        capability_directory,
    })
}

/// Step-loop settings from the environment: `BATON_PLANNER=deterministic|llm`.
pub fn settings_from_environment() -> Result<OrchestratorSettings, StartupError> {
    let planner = match std::env::var("BATON_PLANNER")
        .ok()
        .as_deref()
        .map(str::trim)
    {
        None | Some("") | Some("deterministic") => PlannerChoice::Deterministic,
        Some("llm") => PlannerChoice::Llm,
        Some(other) => {
            return Err(StartupError(format!(
                "BATON_PLANNER must be `deterministic` or `llm` (got `{other}`)"
            )));
        }
    };
    Ok(OrchestratorSettings {
        planner,
        ..OrchestratorSettings::default()
    })
}

/// An orchestrator over the given ports.
pub fn orchestrator_over(
    registry: Arc<Registry>,
    ports: OrchestratorPorts,
    llm: Arc<dyn LlmProvider>,
    worker_id: String,
) -> Arc<Orchestrator> {
    orchestrator_with_settings(
        registry,
        ports,
        llm,
        worker_id,
        OrchestratorSettings::default(),
    )
}

/// An orchestrator over the given ports with explicit settings.
pub fn orchestrator_with_settings(
    registry: Arc<Registry>,
    ports: OrchestratorPorts,
    llm: Arc<dyn LlmProvider>,
    worker_id: String,
    settings: OrchestratorSettings,
) -> Arc<Orchestrator> {
    Arc::new(Orchestrator {
        store: ports.store,
        queue: ports.queue,
        capability_directory: ports.capability_directory,
        llm,
        clock: Arc::new(SystemClock),
        ids: Arc::new(RandomIds),
        registry,
        validators: Arc::new(ValidatorCache::new()),
        settings,
        worker_id,
        claim_counter: Default::default(),
    })
}

/// The whole cloud orchestrator, as every Lambda function builds it.
pub async fn cloud_orchestrator_from_environment(
    worker_id: String,
) -> Result<Arc<Orchestrator>, StartupError> {
    let registry = registry_from(None)?;
    let llm = model_from_environment()?;
    let settings = settings_from_environment()?;
    let ports = cloud_ports_from_environment().await?;
    Ok(orchestrator_with_settings(
        registry, ports, llm, worker_id, settings,
    ))
}

/// Tokens from `BATON_API_TOKENS`; with none configured, `anonymous_tenant`
/// (if given) is allowed, else every request is refused.
pub fn authenticator_from_environment(
    anonymous_tenant: Option<&str>,
) -> Result<TokenAuthenticator, StartupError> {
    match std::env::var("BATON_API_TOKENS")
        .ok()
        .filter(|text| !text.trim().is_empty())
    {
        Some(text) => TokenAuthenticator::from_configuration(&text).map_err(StartupError),
        None => Ok(match anonymous_tenant {
            Some(tenant) => {
                TokenAuthenticator::default().allowing_anonymous_when_unconfigured(tenant)
            }
            None => TokenAuthenticator::default(),
        }),
    }
}
