//! The `run` and `plan` use cases behind the CLI.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use baton_bootstrap::stores::{LeftOverSteps, StoreChoice};
use baton_bootstrap::{Configuration, process_environment};
use baton_core::envelope::TaskEnvelope;
use baton_core::registry::Registry;
use baton_core::run::RunStatus;
use baton_core::schema::ValidatorCache;
use baton_runtime::RuntimeError;
use baton_runtime::clock::SystemClock;
use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::ports::{Clock, StepQueue};
use baton_runtime::services::{OutboxSweeper, Services};
use baton_runtime::workers::LocalRunner;
use futures_util::StreamExt;
use serde_json::Value;

use crate::OutputFormat;
use crate::output::FramePrinter;

pub const EXIT_COMPLETED: u8 = 0;
pub const EXIT_INVALID_INPUT: u8 = 2;
pub const EXIT_RUN_FAILED: u8 = 3;
pub const EXIT_AWAITING_HUMAN: u8 = 4;

/// How often `baton run` looks for new frames.
const FOLLOW_POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Tenant of runs started from the command line.
pub(crate) const LOCAL_TENANT: &str = "local";

pub(crate) fn invalid(message: impl std::fmt::Display) -> u8 {
    eprintln!("baton: {message}");
    EXIT_INVALID_INPUT
}

fn read_envelope_json(path: &Path) -> Result<Value, u8> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| invalid(format!("cannot read {}: {error}", path.display())))?;
    serde_json::from_str(&text)
        .map_err(|error| invalid(format!("{}: not valid JSON: {error}", path.display())))
}

/// The registry: `--registry DIR`, else `BATON_REGISTRY_DIR`, else the one
/// built into the binary.
pub(crate) fn load_registry_or_exit(
    registry: Option<PathBuf>,
    configuration: &Configuration,
) -> Result<Arc<Registry>, u8> {
    let mut configuration = configuration.clone();
    if let Some(directory) = registry {
        configuration.registry_dir = Some(directory);
    }
    let home = match crate::model_choice::model_choice_from(&process_environment) {
        Ok(crate::model_choice::ModelChoice::Local) => baton_bootstrap::DefaultModelHome::Offline,
        _ => baton_bootstrap::DefaultModelHome::Endpoint,
    };
    baton_bootstrap::registry_for(&configuration, home).map_err(invalid)
}

pub(crate) fn configuration_or_exit() -> Result<Configuration, u8> {
    let configuration = Configuration::from_variables(&process_environment).map_err(invalid)?;
    if let Some(point) = &configuration.crash_at {
        baton_runtime::crash_points::arm(point)
            .map_err(|problem| invalid(format!("BATON_CRASH_AT: {problem}")))?;
    }
    Ok(configuration)
}

fn report_invalid_envelope(path: &Path, error: &RuntimeError) -> u8 {
    match error {
        RuntimeError::InvalidInput {
            path: json_path,
            message,
        } => invalid(format!(
            "{}: invalid envelope at {json_path}: {message}",
            path.display()
        )),
        other => invalid(format!("{}: {other}", path.display())),
    }
}

fn startup(error: baton_bootstrap::StartupError) -> u8 {
    invalid(error)
}

/// The embedded default: in-memory queue, the chosen embedded store, the configured model.
pub(crate) async fn embedded_services(
    registry: Arc<Registry>,
    configuration: &Configuration,
    store: &StoreChoice,
    left_over: LeftOverSteps<'_>,
) -> Result<(Services, Arc<InMemoryStepQueue>), u8> {
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
) -> Result<(Services, Arc<InMemoryStepQueue>, crate::sweeping::Sweepers), u8> {
    let secrets = baton_bootstrap::secret_store::secret_store(
        configuration,
        baton_bootstrap::config::SecretSourceChoice::Local,
    )
    .await;
    let llm =
        crate::model_choice::routed_model_for_cli(&registry, &process_environment, secrets.clone())
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
    let sweepers =
        crate::sweeping::Sweepers::retention_only(ports.retention.clone(), clock.clone());
    let executors = baton_bootstrap::Executors {
        llm,
        tools: baton_bootstrap::tool_runner_from(configuration, registry.clone(), secrets),
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
) -> Result<(Services, Arc<dyn StepQueue>, crate::sweeping::Sweepers), u8> {
    let secrets = baton_bootstrap::secret_store::secret_store(
        configuration,
        baton_bootstrap::config::SecretSourceChoice::Aws,
    )
    .await;
    let llm =
        crate::model_choice::routed_model_for_cli(&registry, &process_environment, secrets.clone())
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
        tools: baton_bootstrap::tool_runner_from(configuration, registry.clone(), secrets),
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
        crate::sweeping::Sweepers::cloud(outbox, retention, clock, configuration, &services).await;
    Ok((services, queue, sweeper))
}

/// `baton serve`: the HTTP API and the step worker in one local process.
pub async fn serve(
    store: StoreChoice,
    address: std::net::SocketAddr,
    registry: Option<PathBuf>,
) -> u8 {
    let configuration = match configuration_or_exit() {
        Ok(configuration) => configuration,
        Err(code) => return code,
    };
    let registry = match load_registry_or_exit(registry, &configuration) {
        Ok(registry) => registry,
        Err(code) => return code,
    };
    // `/metrics` names the registry files' capabilities, never a tenant's
    // registration.
    let counters = Arc::new(baton_runtime::observe::telemetry::RunCounters::naming_only(
        registry
            .capabilities()
            .map(|capability| capability.capability_id.clone()),
    ));
    let (services, queue, sweeper) =
        match services_on(&store, registry.clone(), &configuration, counters.clone()).await {
            Ok(parts) => parts,
            Err(code) => return code,
        };
    let authenticator = match baton_bootstrap::authenticator_from(&configuration, Some("local")) {
        Ok(authenticator) => authenticator,
        Err(error) => return startup(error),
    };
    if authenticator.is_anonymous() {
        eprintln!(
            "baton serve: BATON_API_TOKENS is not set: every request is accepted as tenant `local` (local development only)"
        );
    }
    let listener = match tokio::net::TcpListener::bind(address).await {
        Ok(listener) => listener,
        Err(error) => return invalid(format!("cannot listen on {address}: {error}")),
    };
    let bound = listener
        .local_addr()
        .map(|bound| bound.to_string())
        .unwrap_or_else(|_| address.to_string());
    eprintln!("baton serve: listening on http://{bound}/api/v1/flex (store: {store:?})");
    let metrics_access = crate::metrics_route::MetricsAccess::of(
        configuration.metrics_token.as_deref(),
        authenticator.is_anonymous(),
    );
    if metrics_access == crate::metrics_route::MetricsAccess::Refused {
        eprintln!(
            "baton serve: /metrics is refused until BATON_METRICS_TOKEN is set (its own token; the API's tokens do not read it)"
        );
    }
    let app = baton_bootstrap::api_router(&services, authenticator, &configuration).merge(
        crate::metrics_route::metrics_router(counters.clone(), metrics_access),
    );
    // `/api/v1/flex/evaluations`: datasets run here, kept in the data directory.
    let app = match &configuration.data_home {
        Some(data_home) => {
            let evaluations: baton_http::evaluation_port::EvaluationsExtension =
                Arc::new(crate::serve_evaluations::ServeEvaluations::new(
                    services.clone(),
                    registry.clone(),
                    configuration
                        .retention()
                        .with_tenant_settings(registry.tenant_settings()),
                    data_home,
                ));
            app.layer(axum::Extension(evaluations))
        }
        None => app,
    };
    let (stop_sender, mut stop_receiver) = tokio::sync::watch::channel(false);
    let sweeping = sweeper.spawn(&configuration, stop_receiver.clone());
    // `serve` keeps the store's schedules: it fires each one when it is due.
    let mut stop_for_schedules = stop_receiver.clone();
    let schedules = services.schedules.clone();
    let keeping_schedules = tokio::spawn(async move {
        baton_runtime::workers::keep_schedules_until(
            &schedules,
            baton_runtime::workers::SCHEDULE_TICK,
            async move {
                let _ = stop_for_schedules.changed().await;
            },
        )
        .await;
    });
    let worker = tokio::spawn(baton_runtime::workers::run_worker_with_bound(
        services.steps.clone(),
        queue,
        async move {
            let _ = stop_receiver.changed().await;
        },
        configuration.worker_max_steps_in_flight,
    ));
    baton_http::server::serve_with_limits(
        listener,
        app,
        baton_http::server::ConnectionLimits {
            header_read_timeout: configuration.header_read_timeout,
            max_header_bytes: configuration.max_header_bytes,
        },
        async move {
            stop_signal().await;
            // The worker takes no new step from now on (its steps in
            // flight finish) while the server closes its connections.
            let _ = stop_sender.send(true);
        },
    )
    .await;
    let _ = worker.await;
    let _ = keeping_schedules.await;
    sweeping.abort();
    EXIT_COMPLETED
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
) -> Result<(Services, Arc<dyn StepQueue>, crate::sweeping::Sweepers), u8> {
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

/// Ctrl-C (SIGINT) or SIGTERM (a container's stop): `baton serve` stops
/// taking requests, finishes its steps and flushes its spans.
async fn stop_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut terminate) => {
                terminate.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate => {}
    }
}

/// `baton run`: runs the envelope in-process and prints every frame.
pub async fn run(
    envelope_path: &Path,
    registry: Option<PathBuf>,
    format: OutputFormat,
    store: StoreChoice,
) -> u8 {
    let envelope_json = match read_envelope_json(envelope_path) {
        Ok(value) => value,
        Err(code) => return code,
    };
    let configuration = match configuration_or_exit() {
        Ok(configuration) => configuration,
        Err(code) => return code,
    };
    let registry = match load_registry_or_exit(registry, &configuration) {
        Ok(registry) => registry,
        Err(code) => return code,
    };
    let (services, queue) =
        match embedded_services(registry, &configuration, &store, LeftOverSteps::None).await {
            Ok(parts) => parts,
            Err(code) => return code,
        };
    let submitted = match services.runs.submit(LOCAL_TENANT, &envelope_json).await {
        Ok(submitted) => submitted,
        Err(error @ (RuntimeError::InvalidInput { .. } | RuntimeError::RunNotFound { .. })) => {
            return report_invalid_envelope(envelope_path, &error);
        }
        Err(error) => return invalid(error),
    };
    drive_and_print(&services, queue, &submitted.run_id, 0, format).await
}

/// Steps the run on the in-memory queue until it settles, printing its
/// frames after `after_sequence`; the exit code says how it ended.
pub(crate) async fn drive_and_print(
    services: &Services,
    queue: Arc<InMemoryStepQueue>,
    run_id: &str,
    after_sequence: u64,
    format: OutputFormat,
) -> u8 {
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue,
    };
    let worker_run_id = run_id.to_string();
    let mut worker =
        tokio::spawn(async move { runner.run_until_settled(LOCAL_TENANT, &worker_run_id).await });
    let colours = configuration_or_exit().is_ok_and(|configuration| !configuration.no_color);
    let mut printer = FramePrinter::new(format, colours);
    let mut frames = std::pin::pin!(services.runs.follow(
        LOCAL_TENANT,
        run_id,
        after_sequence,
        FOLLOW_POLL_INTERVAL
    ));
    let mut worker_result = None;
    loop {
        tokio::select! {
            frame = frames.next() => match frame {
                Some(mut frame) => {
                    if format == OutputFormat::Hooks {
                        services.runs.fill_model_instructions(LOCAL_TENANT, &mut frame).await;
                    }
                    printer.print_frames(std::slice::from_ref(&frame));
                }
                None => break,
            },
            joined = &mut worker, if worker_result.is_none() => {
                match joined {
                    Ok(Ok(status)) if status.is_settled() => worker_result = Some(status),
                    Ok(Ok(status)) => {
                        eprintln!("baton: the queue drained but the run is still {}", status.as_str());
                        return EXIT_RUN_FAILED;
                    }
                    Ok(Err(error)) => {
                        eprintln!("baton: the run stopped: {error}");
                        return EXIT_RUN_FAILED;
                    }
                    Err(error) => {
                        eprintln!("baton: the worker crashed: {error}");
                        return EXIT_RUN_FAILED;
                    }
                }
            }
        }
    }
    let final_state = services
        .runs
        .load(LOCAL_TENANT, run_id)
        .await
        .ok()
        .flatten();
    let status = final_state
        .as_ref()
        .map_or(RunStatus::Failed, |stored| stored.state.status);
    printer.finish(
        status,
        final_state
            .as_ref()
            .and_then(|stored| stored.state.output.as_ref()),
    );
    match status {
        RunStatus::Completed => EXIT_COMPLETED,
        RunStatus::AwaitingHuman => {
            eprintln!(
                "baton: run {run_id} waits for a person. With --store sqlite it is kept: list its task with `baton tasks`, answer with `baton resume {run_id} --output ANSWER.json`"
            );
            EXIT_AWAITING_HUMAN
        }
        RunStatus::AwaitingHitl => {
            let asks = final_state
                .as_ref()
                .and_then(|stored| stored.state.governance.pending_request())
                .map(|request| (request.kind, request.operator_prompt.clone()));
            match asks {
                Some((baton_core::governance::HitlKind::Clarify, question)) => eprintln!(
                    "baton: run {run_id} asks: {question}\n  answer with `baton resume {run_id} --answer TEXT`"
                ),
                _ => eprintln!(
                    "baton: run {run_id} waits for approval: `baton resolve {run_id} --approve` (or --reject)"
                ),
            }
            EXIT_AWAITING_HUMAN
        }
        RunStatus::Paused => {
            eprintln!(
                "baton: run {run_id} is paused by a policy; continue it with `baton resume {run_id}`"
            );
            EXIT_AWAITING_HUMAN
        }
        _ => {
            if let Some(failure) = final_state.and_then(|stored| stored.state.failure) {
                eprintln!(
                    "baton: run {} {}: {}",
                    run_id,
                    status.as_str(),
                    failure.message
                );
            }
            EXIT_RUN_FAILED
        }
    }
}

/// How `baton plan` prints the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PlanFormat {
    Json,
    Mermaid,
    Dot,
}

/// `baton plan`: plans and validates without calling a model.
pub fn plan(envelope_path: &Path, registry: Option<PathBuf>, format: PlanFormat) -> u8 {
    let envelope_json = match read_envelope_json(envelope_path) {
        Ok(value) => value,
        Err(code) => return code,
    };
    let configuration = match configuration_or_exit() {
        Ok(configuration) => configuration,
        Err(code) => return code,
    };
    let registry = match load_registry_or_exit(registry, &configuration) {
        Ok(registry) => registry,
        Err(code) => return code,
    };
    let mut envelope = match TaskEnvelope::parse_value(&envelope_json) {
        Ok(envelope) => envelope,
        Err(error) => return invalid(format!("{}: {error}", envelope_path.display())),
    };
    // Refused as a submission would be: catalog models, policy conditions,
    // the fallback capability.
    if let Err(error) =
        baton_core::model_choice::check_envelope_models(&envelope, registry.models())
            .and_then(|()| {
                baton_core::policy_conditions::check_policy_conditions(&envelope, &registry)
            })
            .and_then(|()| {
                baton_core::escalation_targets::check_fallback_capability(&envelope, &registry)
            })
    {
        return invalid(format!("{}: {error}", envelope_path.display()));
    }
    // The plan a run would get: legacy policy keys normalised first.
    match baton_core::legacy_policies::normalize_legacy_policies(&mut envelope) {
        Ok(rewrites) => {
            for rewrite in rewrites {
                eprintln!("baton: {} became {}", rewrite.field, rewrite.became);
            }
        }
        Err(error) => return invalid(format!("{}: {error}", envelope_path.display())),
    }
    // The plan, its judgement and where each node would escalate.
    let preview = baton_core::preview::preview_plan(&envelope, &registry, &ValidatorCache::new());
    let rejected = preview.is_rejected();
    let report = serde_json::to_value(&preview).unwrap_or_default();
    let plan = preview.plan;
    let picture = match (&plan, format) {
        (_, PlanFormat::Json) => None,
        (Some(plan), PlanFormat::Mermaid) => Some(baton_core::plan_picture::to_mermaid(plan)),
        (Some(plan), PlanFormat::Dot) => Some(baton_core::plan_picture::to_dot(plan)),
        (None, _) => None,
    };
    match picture {
        Some(picture) => {
            print!("{picture}");
            if rejected {
                eprintln!(
                    "{}",
                    serde_json::to_string_pretty(&report["diagnostics"]).unwrap_or_default()
                );
            }
        }
        None if format == PlanFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        ),
        None => eprintln!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        ),
    }
    if rejected {
        EXIT_RUN_FAILED
    } else {
        EXIT_COMPLETED
    }
}
