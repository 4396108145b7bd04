//! `baton-bootstrap`: start-up wiring. Reads the configuration once
//! ([`config::Configuration`], through one injectable variable reader),
//! builds every client and port, and hands back the services. Used by the
//! `baton` CLI and by each Lambda function's `main`, so configuration means
//! the same everywhere.
//!
//! Features: `model` (the OpenAI-compatible provider) and `http` (the API's
//! authenticator), both on by default; the sweeper turns both off and links
//! neither a model client nor axum.
//!
//! Invariant: every configuration problem is reported here, at start-up,
//! with the variable's name; nothing here runs per request.

pub mod config;
#[cfg(feature = "evaluations")]
pub mod evaluations;
#[cfg(feature = "model")]
pub mod model_routes;
#[cfg(feature = "model")]
pub mod notifier;
#[cfg(feature = "model")]
pub mod secret_store;
pub mod stores;

use std::path::Path;
use std::sync::Arc;

use baton_core::catalog::registry::Registry;
use baton_runtime::clock::RandomIds;
use baton_runtime::ports::LlmProvider;
use baton_runtime::registry_loader::{load_embedded_registry, load_registry};
use baton_runtime::services::{OrchestratorSettings, OutboxSweeper, ServicePorts, Services};

pub use config::{Configuration, VariableReader, process_environment};
pub use stores::{NotAStore, StoreChoice, StorePorts, cloud_ports, observe_commits};

/// A start-up failure, already phrased for the operator.
#[derive(Debug)]
pub struct StartupError(pub String);

impl std::fmt::Display for StartupError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::error::Error for StartupError {}

/// JSON logs on stderr, filtered by `BATON_LOG` (else `default_filter`),
/// and, when the `OTEL_*` variables ask for it, traces exported as
/// `service` (unless `OTEL_SERVICE_NAME` names it).
pub fn init_json_logging(
    configuration: &Configuration,
    default_filter: &str,
    service: &str,
) -> Result<(), StartupError> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{Layer, fmt};
    let logs = fmt::layer()
        .json()
        .with_writer(std::io::stderr)
        .with_filter(log_filter(configuration, default_filter));
    let traces = start_trace_export(configuration, service)?;
    let _ = tracing_subscriber::registry()
        .with(logs)
        .with(traces.map(|export| export.layer().with_filter(exported_spans())))
        .try_init();
    Ok(())
}

/// `BATON_LOG`, else `default_filter`.
pub fn log_filter(
    configuration: &Configuration,
    default_filter: &str,
) -> tracing_subscriber::EnvFilter {
    let filter = configuration
        .log_filter
        .as_deref()
        .unwrap_or(default_filter);
    tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter))
}

/// The spans (and the events in them) exported: Baton's own, at `INFO`
/// and above, whatever `BATON_LOG` says; none of its dependencies'.
pub fn exported_spans() -> tracing_subscriber::filter::Targets {
    tracing_subscriber::filter::Targets::new()
        .with_target("baton", tracing_subscriber::filter::LevelFilter::INFO)
}

static TRACE_EXPORT: std::sync::OnceLock<baton_traces::TraceExport> = std::sync::OnceLock::new();

/// Starts the process's trace export when the configuration asks for it
/// (once; later calls return the same export).
pub fn start_trace_export(
    configuration: &Configuration,
    service: &str,
) -> Result<Option<&'static baton_traces::TraceExport>, StartupError> {
    let Some(traces) = &configuration.traces else {
        return Ok(None);
    };
    if let Some(export) = TRACE_EXPORT.get() {
        return Ok(Some(export));
    }
    let settings = baton_traces::TraceExportSettings {
        default_service_name: (!traces.service_name_set).then(|| service.to_string()),
        process_id: std::process::id(),
    };
    let export = baton_traces::TraceExport::start(&settings)
        .map_err(|error| StartupError(format!("{error} (see docs/operate.md, Traces)")))?;
    Ok(Some(TRACE_EXPORT.get_or_init(|| export)))
}

/// The process's trace export, when traces are exported.
pub fn trace_export() -> Option<&'static baton_traces::TraceExport> {
    TRACE_EXPORT.get()
}

/// Sends every finished span now (before a Lambda invocation returns);
/// nothing when traces are not exported.
pub async fn flush_traces() {
    if let Some(export) = trace_export() {
        let _ = tokio::task::spawn_blocking(|| export.flush()).await;
    }
}

/// `router`, its spans flushed after each response (a Lambda HTTP
/// function: the execution environment may be frozen once it answers; a
/// streamed response's later spans go with the next flush). Unchanged when
/// traces are not exported.
#[cfg(feature = "http")]
pub fn flushing_traces_after_each_response(router: baton_http::Router) -> baton_http::Router {
    if trace_export().is_none() {
        return router;
    }
    router.layer(axum::middleware::from_fn(
        |request: axum::extract::Request, next: axum::middleware::Next| async move {
            let response = next.run(request).await;
            flush_traces().await;
            response
        },
    ))
}

/// Flushes and stops the export (the process is ending).
pub fn shutdown_traces() {
    if let Some(export) = trace_export() {
        export.shutdown();
    }
}

/// The registry: from `directory` when given (a flag, or
/// `BATON_REGISTRY_DIR`), else the one built into the binary.
pub fn registry_from(directory: Option<&Path>) -> Result<Arc<Registry>, StartupError> {
    match directory {
        Some(root) => load_registry(root)
            .map(Arc::new)
            .map_err(|error| StartupError(format!("registry {}: {error}", root.display()))),
        None => load_embedded_registry()
            .map(Arc::new)
            .map_err(|error| StartupError(format!("built-in registry: {error}"))),
    }
}

/// Where the deployment's default model runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefaultModelHome {
    /// The OpenAI-compatible endpoint (`BATON_LLM_BASE_URL`), the model
    /// `BATON_LLM_MODEL` names.
    Endpoint,
    /// The CLI's offline model: the catalog's first model of a `local`
    /// provider names it.
    Offline,
}

/// The registry of `configuration` with the deployment's default model in
/// its catalog: every AI node without a preference names it in its plan,
/// `node_start` and usage, and a judge may name it. A name the catalog
/// lists keeps its prices; another is added with its prices unknown.
pub fn registry_for(
    configuration: &Configuration,
    home: DefaultModelHome,
) -> Result<Arc<Registry>, StartupError> {
    let registry = registry_from(configuration.registry_dir.as_deref())?;
    let named = match home {
        DefaultModelHome::Endpoint => configuration.default_model.clone().map(|name| {
            (
                name,
                baton_core::catalog::model_catalog::ProviderKind::Openai,
            )
        }),
        DefaultModelHome::Offline => registry
            .models()
            .first_model_of_kind(baton_core::catalog::model_catalog::ProviderKind::Local)
            .map(|name| {
                (
                    name.to_string(),
                    baton_core::catalog::model_catalog::ProviderKind::Local,
                )
            }),
    };
    Ok(match named {
        Some((name, kind)) => {
            Arc::new(Registry::clone(&registry).with_deployment_default_model(&name, kind))
        }
        None => registry,
    })
}

/// The OpenAI-compatible provider from `BATON_LLM_*` / `OPENAI_*`.
#[cfg(feature = "model")]
pub fn model_from_variables(
    read: VariableReader<'_>,
) -> Result<Arc<dyn LlmProvider>, StartupError> {
    let provider = baton_llm::OpenAiCompatibleConfig::from_variables(read)
        .and_then(baton_llm::OpenAiCompatibleProvider::new)
        .map_err(|error| StartupError(format!("{error} (see docs/configuration.md, Variables)")))?;
    Ok(Arc::new(provider))
}

/// Step-loop settings from the configuration.
pub fn settings_from(configuration: &Configuration) -> OrchestratorSettings {
    let defaults = OrchestratorSettings::default();
    let (stream_deltas, delta_flush_interval) = match configuration.delta_flush {
        crate::config::DeltaFlush::Every(interval) => (true, interval),
        crate::config::DeltaFlush::Off => (false, defaults.delta_flush_interval),
    };
    OrchestratorSettings {
        planner: configuration.planner,
        human_task_timeout: configuration.human_task_timeout,
        agent_session_limit: configuration.agent_session_limit,
        announce_to_event_bus: configuration.event_bus.is_some(),
        stream_deltas,
        delta_flush_interval,
        max_envelope_bytes: configuration.max_envelope_bytes,
        tenant_limits: configuration.tenant_limits.clone(),
        retention: configuration.retention(),
        max_schedules_per_tenant: configuration.max_schedules_per_tenant,
        memory_namespace_cap: configuration.memory_namespace_cap,
        audit_retention_days: configuration.audit_retention_days,
        node_lease: configuration.node_lease,
        step_budget: Some(configuration.step_budget),
        ..defaults
    }
}

/// The executors of agents' tool calls (HTTP through the outbound guard,
/// `{"env": …}` headers read from the process environment, `{"secret": …}`
/// headers from `secrets`, the builtins; the registry search by meaning
/// when `BATON_EMBEDDINGS_MODEL` names an embedding model of the
/// OpenAI-compatible endpoint, read by `read`).
#[cfg(feature = "model")]
pub fn tool_runner_from(
    configuration: &Configuration,
    registry: Arc<Registry>,
    secrets: Arc<dyn baton_runtime::ports::SecretStore>,
    read: VariableReader<'_>,
) -> Result<Arc<dyn baton_runtime::ports::ToolRunner>, StartupError> {
    let mut runner = baton_tools::ToolRunner::new(
        registry,
        &configuration.outbound_http_hosts,
        Arc::new(crate::config::process_environment),
    )
    .with_secrets(secrets);
    if let Some(embedder) = memory_embedder(read)? {
        runner = runner.with_embedder(embedder);
    }
    Ok(Arc::new(runner))
}

/// The embedding model of the OpenAI-compatible endpoint that
/// `BATON_EMBEDDINGS_MODEL` names (read by `read`): the registry search by
/// meaning and memory's search use it; `None` when the variable is unset.
#[cfg(feature = "model")]
pub fn memory_embedder(
    read: VariableReader<'_>,
) -> Result<Option<Arc<dyn baton_runtime::ports::TextEmbedder>>, StartupError> {
    let Some(model) = read("BATON_EMBEDDINGS_MODEL").filter(|model| !model.trim().is_empty())
    else {
        return Ok(None);
    };
    let embedder = baton_llm::OpenAiCompatibleConfig::from_variables(read)
        .and_then(|config| baton_llm::embeddings::OpenAiCompatibleEmbedder::new(config, &model))
        .map_err(|error| {
            StartupError(format!(
                "BATON_EMBEDDINGS_MODEL is set but no embeddings endpoint can be built: {error} (see docs/configuration.md, Variables)"
            ))
        })?;
    Ok(Some(Arc::new(embedder)))
}

/// The services over `ports` with `llm` and `tools`.
pub fn services_over(
    registry: Arc<Registry>,
    ports: StorePorts,
    executors: Executors,
    settings: OrchestratorSettings,
    worker_id: String,
) -> Services {
    Services::new(
        registry,
        ServicePorts {
            store: ports.store,
            queue: ports.queue,
            capability_directory: ports.capability_directory,
            llm: executors.llm,
            clock: ports.clock,
            ids: Arc::new(RandomIds),
            transcripts: executors.transcripts,
            tools: executors.tools,
            threads: ports.threads,
            notifier: executors.notifier,
            remote_agents: executors.remote_agents,
            stream_leases: ports.stream_leases,
            schedules: ports.schedules,
            schedule_triggers: ports.schedule_triggers,
            audit: ports.audit,
            request_keys: ports.request_keys,
            memory: ports.memory,
            embedder: executors.embedder,
        },
        settings,
        worker_id,
    )
}

/// Who performs a step's effects: the model, the tools, the completion
/// notifications.
pub struct Executors {
    pub llm: Arc<dyn LlmProvider>,
    pub tools: Arc<dyn baton_runtime::ports::ToolRunner>,
    pub notifier: Arc<dyn baton_runtime::ports::CompletionNotifier>,
    /// Checks remote agents' cards at registration ([`remote_agent_cards`]).
    pub remote_agents: Arc<dyn baton_runtime::ports::RemoteAgentCards>,
    /// Where concluded panels' transcripts are published besides the run's
    /// event log ([`transcript_publisher`]).
    pub transcripts: Arc<dyn baton_runtime::ports::TranscriptPublisher>,
    /// The embedding model memory's search fuses with BM25
    /// (`BATON_EMBEDDINGS_MODEL`, [`memory_embedder`]), where there is one.
    pub embedder: Option<Arc<dyn baton_runtime::ports::TextEmbedder>>,
}

/// The transcript publisher: the consensus service when
/// `BATON_HCS_NODE_URL` is set (`baton-hcs`, its key read from `secrets`),
/// else the run's event log alone.
#[cfg(feature = "model")]
pub fn transcript_publisher(
    read: VariableReader<'_>,
    secrets: Arc<dyn baton_runtime::ports::SecretStore>,
) -> Result<Arc<dyn baton_runtime::ports::TranscriptPublisher>, StartupError> {
    match baton_hcs::HcsSettings::from_variables(read)
        .map_err(|error| StartupError(error.to_string()))?
    {
        Some(settings) => Ok(Arc::new(baton_hcs::HcsTranscripts::new(settings, secrets))),
        None => Ok(Arc::new(baton_runtime::models::panels::EventLogTranscripts)),
    }
}

/// Remote agents' cards, read through the outbound guard
/// (`BATON_OUTBOUND_HTTP_HOSTS` allows plain http to local hosts); without
/// the `remote-agents` feature, a registration naming one is refused.
pub fn remote_agent_cards(
    configuration: &Configuration,
) -> Arc<dyn baton_runtime::ports::RemoteAgentCards> {
    #[cfg(feature = "remote-agents")]
    {
        Arc::new(baton_a2a_client::RemoteAgents::new(
            &configuration.outbound_http_hosts,
        ))
    }
    #[cfg(not(feature = "remote-agents"))]
    {
        let _ = configuration;
        Arc::new(baton_runtime::ports::NoRemoteAgents)
    }
}

/// The cloud services, as the api, stream and ingest functions build them.
#[cfg(feature = "model")]
pub async fn cloud_services(
    configuration: &Configuration,
    read: VariableReader<'_>,
    worker_role: &str,
) -> Result<Services, StartupError> {
    let ports = cloud_ports(configuration).await?;
    let secrets = secret_store::secret_store(configuration, config::SecretSourceChoice::Aws).await;
    cloud_services_over(configuration, read, ports, secrets, worker_role)
}

/// The cloud services over ports already built (the step function keeps
/// the queue to shorten the visibility of steps that ran out of time).
#[cfg(feature = "model")]
pub fn cloud_services_over(
    configuration: &Configuration,
    read: VariableReader<'_>,
    ports: StorePorts,
    secrets: Arc<dyn baton_runtime::ports::SecretStore>,
    worker_role: &str,
) -> Result<Services, StartupError> {
    let registry = registry_for(configuration, DefaultModelHome::Endpoint)?;
    let executors = Executors {
        llm: model_routes::routed_model(
            model_from_variables(read)?,
            None,
            &registry,
            read,
            secrets.clone(),
        ),
        transcripts: transcript_publisher(read, secrets.clone())?,
        tools: tool_runner_from(configuration, registry.clone(), secrets, read)?,
        notifier: Arc::new(notifier::completion_notifier(
            configuration,
            ports.clock.clone(),
        )),
        remote_agents: remote_agent_cards(configuration),
        embedder: memory_embedder(read)?,
    };
    Ok(services_over(
        registry,
        ports,
        executors,
        settings_from(configuration),
        configuration.worker_id(worker_role),
    ))
}

/// The cloud services of a function that never performs a step (api,
/// stream, ingest): they submit, read and answer runs, and the step function
/// does the work, so they link no model client. Their step service has
/// [`NoModelHere`], which refuses every call.
pub async fn cloud_services_without_model(
    configuration: &Configuration,
    worker_role: &str,
) -> Result<Services, StartupError> {
    let ports = cloud_ports(configuration).await?;
    let registry = registry_for(configuration, DefaultModelHome::Endpoint)?;
    Ok(services_over(
        registry,
        ports,
        Executors {
            llm: Arc::new(NoModelHere(worker_role.to_string())),
            tools: Arc::new(baton_runtime::ports::NoToolRunner),
            notifier: Arc::new(baton_runtime::ports::NoCompletionNotifier),
            remote_agents: remote_agent_cards(configuration),
            // Panels conclude in the step function only.
            transcripts: Arc::new(baton_runtime::models::panels::EventLogTranscripts),
            // Memory written here is searched lexically until the step
            // function (which links the embeddings client) rewrites it.
            embedder: None,
        },
        settings_from(configuration),
        configuration.worker_id(worker_role),
    ))
}

/// The model port of a function that performs no step: every call fails
/// with a configuration error naming the function.
pub struct NoModelHere(pub String);

#[async_trait::async_trait]
impl LlmProvider for NoModelHere {
    fn model_name(&self) -> String {
        "none".into()
    }

    async fn complete(
        &self,
        _request: &baton_core::state::context::ModelRequest,
        _deltas: tokio::sync::mpsc::UnboundedSender<baton_runtime::ports::ModelDelta>,
    ) -> Result<baton_runtime::ports::ModelAnswer, baton_runtime::error::LlmError> {
        Err(baton_runtime::error::LlmError::Configuration(format!(
            "the {} function calls no model: steps run in the step function",
            self.0
        )))
    }
}

/// The sweeper: a store, a queue and a clock.
pub async fn cloud_sweeper(
    configuration: &Configuration,
) -> Result<
    (
        OutboxSweeper,
        Arc<dyn baton_runtime::ports::RetentionUpkeep>,
    ),
    StartupError,
> {
    let ports = cloud_ports(configuration).await?;
    let retention = ports.retention.clone();
    Ok((
        OutboxSweeper::new(ports.store, ports.queue, ports.clock),
        retention,
    ))
}

/// The reader of the step queue's dead-letter queue
/// (`BATON_DEAD_LETTER_QUEUE_URL`; `None` when unset) over `steps`.
pub async fn dead_letter_reader(
    configuration: &Configuration,
    steps: Arc<baton_runtime::services::StepService>,
) -> Option<baton_runtime::queue::dead_letters::DeadLetterReader> {
    let url = configuration.dead_letter_queue_url.as_deref()?;
    let aws = baton_aws::AwsConnection::from_environment().await;
    let queue = baton_aws::SqsStepQueue::new(&aws, url).with_receive_hold(configuration.node_lease);
    Some(baton_runtime::queue::dead_letters::DeadLetterReader::new(
        steps,
        Arc::new(queue),
    ))
}

/// Tokens from `BATON_API_TOKENS` and, with `BATON_OIDC_ISSUER`, the
/// identity provider's JWTs; with neither configured, `anonymous_tenant`
/// (if given) is allowed, else every request is refused.
#[cfg(feature = "http")]
pub fn authenticator_from(
    configuration: &Configuration,
    anonymous_tenant: Option<&str>,
) -> Result<baton_http::TokenAuthenticator, StartupError> {
    use baton_http::TokenAuthenticator;
    let mut authenticator = match configuration.api_tokens.as_deref() {
        Some(text) => TokenAuthenticator::from_configuration(text)
            .map_err(|error| StartupError(error.to_string()))?,
        None => TokenAuthenticator::default(),
    };
    if let Some(oidc) = &configuration.oidc {
        use baton_http::auth::oidc::{OidcSettings, OidcVerifier};
        let settings = OidcSettings {
            jwks_url: oidc.jwks_url.clone(),
            tenant_claim: oidc.tenant_claim.clone(),
            fixed_tenant: oidc.fixed_tenant.clone(),
            user_claim: oidc.user_claim.clone(),
            groups_claim: oidc.groups_claim.clone(),
            scopes_claim: oidc.scopes_claim.clone(),
            http_allowed_hosts: configuration.outbound_http_hosts.clone(),
            ..OidcSettings::new(&oidc.issuer, &oidc.audience)
        };
        authenticator = authenticator.with_oidc(OidcVerifier::new(settings));
    }
    Ok(match anonymous_tenant {
        Some(tenant) => authenticator.allowing_anonymous_when_unconfigured(tenant),
        None => authenticator,
    })
}

/// The HTTP router over `services` (the api and stream functions, `baton serve`).
#[cfg(feature = "http")]
pub fn api_router(
    services: &Services,
    authenticator: baton_http::TokenAuthenticator,
    configuration: &Configuration,
) -> baton_http::Router {
    baton_http::router(api_state(services, authenticator, configuration))
}

/// What the API's routes and its MCP server share: the services and the
/// HTTP layer's tunables.
#[cfg(feature = "http")]
pub fn api_state(
    services: &Services,
    authenticator: baton_http::TokenAuthenticator,
    configuration: &Configuration,
) -> baton_http::ApiState {
    baton_http::ApiState {
        runs: services.runs.clone(),
        capabilities: services.capabilities.clone(),
        people: services.people.clone(),
        authenticator: Arc::new(authenticator),
        settings: baton_http::HttpSettings {
            max_body_bytes: configuration.max_body_bytes,
            max_streams_per_run: configuration.max_streams_per_run,
            max_streams_per_tenant: configuration.max_streams_per_tenant,
            public_url: configuration.public_url.clone(),
            trusted_origins: baton_http::auth::cross_site::TrustedOrigins::new(
                &configuration.allowed_origins,
                configuration.public_url.as_deref(),
            ),
            viewer_api_origins: configuration.viewer_api_origins.clone(),
            sandbox: configuration.sandbox,
            ..baton_http::HttpSettings::default()
        },
        streams: services.streams.clone(),
        schedules: services.schedules.clone(),
        audit: services.audit.clone(),
        request_keys: services.request_keys.clone(),
        memory: services.memory.clone(),
    }
}
