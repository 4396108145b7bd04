//! The `run` and `plan` use cases behind the CLI.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use baton_core::envelope::TaskEnvelope;
use baton_core::planner::plan_deterministically;
use baton_core::registry::Registry;
use baton_core::run::RunStatus;
use baton_core::schema::ValidatorCache;
use baton_core::validator::{rejected_bundle, validate_plan};
use baton_runtime::RuntimeError;
use baton_runtime::memory::{InMemoryCapabilityDirectory, InMemoryRunStore, InMemoryStepQueue};
use baton_runtime::orchestrator::Orchestrator;
use baton_runtime::ports::RunStore;
use baton_runtime::registry_loader::{default_registry_root, load_registry};
use baton_runtime::worker::LocalRunner;
use serde_json::{Value, json};

use crate::OutputFormat;
use crate::output::FramePrinter;

pub const EXIT_COMPLETED: u8 = 0;
pub const EXIT_INVALID_INPUT: u8 = 2;
pub const EXIT_RUN_FAILED: u8 = 3;
pub const EXIT_AWAITING_HUMAN: u8 = 4;

/// Tenant of runs started from the command line.
const LOCAL_TENANT: &str = "local";

fn invalid(message: impl std::fmt::Display) -> u8 {
    eprintln!("baton: {message}");
    EXIT_INVALID_INPUT
}

fn read_envelope_json(path: &Path) -> Result<Value, u8> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| invalid(format!("cannot read {}: {error}", path.display())))?;
    serde_json::from_str(&text)
        .map_err(|error| invalid(format!("{}: not valid JSON: {error}", path.display())))
}

fn load_registry_or_exit(registry: Option<PathBuf>) -> Result<Registry, u8> {
    let root = registry.unwrap_or_else(default_registry_root);
    load_registry(&root).map_err(|error| invalid(format!("registry {}: {error}", root.display())))
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

type EmbeddedParts = (
    Arc<Orchestrator>,
    Arc<InMemoryRunStore>,
    Arc<InMemoryStepQueue>,
);

fn startup(error: baton_bootstrap::StartupError) -> u8 {
    invalid(error)
}

/// The embedded default: in-memory store and queue, the configured model.
fn embedded_orchestrator(registry: Arc<Registry>) -> Result<EmbeddedParts, u8> {
    let llm = crate::model_choice::model_for_cli().map_err(startup)?;
    let store = Arc::new(InMemoryRunStore::new());
    let queue = Arc::new(InMemoryStepQueue::new());
    let settings = baton_bootstrap::settings_from_environment().map_err(startup)?;
    let worker_id = format!("local-{}", std::process::id());
    let ports = baton_bootstrap::OrchestratorPorts {
        store: store.clone(),
        queue: queue.clone(),
        capability_directory: Arc::new(InMemoryCapabilityDirectory::new()),
    };
    let orchestrator =
        baton_bootstrap::orchestrator_with_settings(registry, ports, llm, worker_id, settings);
    Ok((orchestrator, store, queue))
}

/// DynamoDB and SQS from the environment (`BATON_TABLE`, `BATON_QUEUE_URL`, `AWS_*`).
async fn cloud_orchestrator(registry: Arc<Registry>) -> Result<Arc<Orchestrator>, u8> {
    let llm = crate::model_choice::model_for_cli().map_err(startup)?;
    let ports = baton_bootstrap::cloud_ports_from_environment()
        .await
        .map_err(startup)?;
    let settings = baton_bootstrap::settings_from_environment().map_err(startup)?;
    let worker_id = format!("serve-{}", std::process::id());
    Ok(baton_bootstrap::orchestrator_with_settings(
        registry, ports, llm, worker_id, settings,
    ))
}

/// `baton serve`: the HTTP API and the step worker in one local process.
pub async fn serve(
    store: crate::StoreChoice,
    address: std::net::SocketAddr,
    registry: Option<PathBuf>,
) -> u8 {
    let registry = match load_registry_or_exit(registry) {
        Ok(registry) => Arc::new(registry),
        Err(code) => return code,
    };
    let built = match store {
        crate::StoreChoice::Memory => {
            embedded_orchestrator(registry).map(|(orchestrator, _, _)| orchestrator)
        }
        crate::StoreChoice::Dynamodb => cloud_orchestrator(registry).await,
    };
    let orchestrator = match built {
        Ok(orchestrator) => orchestrator,
        Err(code) => return code,
    };
    let authenticator = match baton_bootstrap::authenticator_from_environment(Some("local")) {
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
    let app = baton_http::router(baton_http::ApiState {
        orchestrator: orchestrator.clone(),
        authenticator: Arc::new(authenticator),
        settings: baton_http::HttpSettings::default(),
    });
    let (stop_sender, mut stop_receiver) = tokio::sync::watch::channel(false);
    let worker = tokio::spawn(baton_runtime::worker::run_worker_until(
        orchestrator,
        async move {
            let _ = stop_receiver.changed().await;
        },
    ));
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await;
    let _ = stop_sender.send(true);
    let _ = worker.await;
    match served {
        Ok(()) => EXIT_COMPLETED,
        Err(error) => {
            eprintln!("baton serve: {error}");
            EXIT_RUN_FAILED
        }
    }
}

/// `baton run`: runs the envelope in-process and prints every frame.
pub async fn run(envelope_path: &Path, registry: Option<PathBuf>, format: OutputFormat) -> u8 {
    let envelope_json = match read_envelope_json(envelope_path) {
        Ok(value) => value,
        Err(code) => return code,
    };
    let registry = match load_registry_or_exit(registry) {
        Ok(registry) => Arc::new(registry),
        Err(code) => return code,
    };
    let (orchestrator, store, queue) = match embedded_orchestrator(registry) {
        Ok(parts) => parts,
        Err(code) => return code,
    };
    let submitted = match orchestrator.submit_run(LOCAL_TENANT, &envelope_json).await {
        Ok(submitted) => submitted,
        Err(error @ RuntimeError::InvalidInput { .. }) => {
            return report_invalid_envelope(envelope_path, &error);
        }
        Err(error) => return invalid(error),
    };
    let runner = LocalRunner {
        orchestrator: orchestrator.clone(),
        queue,
    };
    let run_id = submitted.run_id.clone();
    let worker = tokio::spawn(async move { runner.run_until_settled(LOCAL_TENANT, &run_id).await });
    let mut printer = FramePrinter::new(format);
    let mut last_sequence = 0;
    let status = loop {
        match store
            .read_events(LOCAL_TENANT, &submitted.run_id, last_sequence, 500)
            .await
        {
            Ok(frames) => {
                if let Some(last) = frames.last() {
                    last_sequence = last.id;
                }
                printer.print_frames(&frames);
                if !frames.is_empty() {
                    continue;
                }
            }
            Err(error) => return invalid(error),
        }
        if worker.is_finished() {
            match worker.await {
                Ok(Ok(status)) => {
                    if let Ok(frames) = store
                        .read_events(LOCAL_TENANT, &submitted.run_id, last_sequence, usize::MAX)
                        .await
                    {
                        printer.print_frames(&frames);
                    }
                    break status;
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
        store.wait_for_events(Duration::from_millis(50)).await;
    };
    let final_state = store
        .load_run(LOCAL_TENANT, &submitted.run_id)
        .await
        .ok()
        .flatten();
    printer.finish(
        status,
        final_state
            .as_ref()
            .and_then(|stored| stored.state.output.as_ref()),
    );
    match status {
        RunStatus::Completed => EXIT_COMPLETED,
        RunStatus::AwaitingHuman => EXIT_AWAITING_HUMAN,
        _ => {
            if let Some(failure) = final_state.and_then(|stored| stored.state.failure) {
                eprintln!(
                    "baton: run {} {}: {}",
                    submitted.run_id,
                    status.as_str(),
                    failure.message
                );
            }
            EXIT_RUN_FAILED
        }
    }
}

/// `baton plan`: plans and validates without calling a model.
pub fn plan(envelope_path: &Path, registry: Option<PathBuf>) -> u8 {
    let envelope_json = match read_envelope_json(envelope_path) {
        Ok(value) => value,
        Err(code) => return code,
    };
    let registry = match load_registry_or_exit(registry) {
        Ok(registry) => registry,
        Err(code) => return code,
    };
    let envelope = match TaskEnvelope::parse_value(&envelope_json) {
        Ok(envelope) => envelope,
        Err(error) => return invalid(format!("{}: {error}", envelope_path.display())),
    };
    let (plan, bundle) = match plan_deterministically(&envelope, &registry) {
        Ok(plan) => {
            let bundle = validate_plan(&plan, &envelope, &registry, &ValidatorCache::new());
            (Some(plan), bundle)
        }
        Err(diagnostics) => (None, rejected_bundle(diagnostics)),
    };
    let rejected = plan.is_none() || bundle.status == baton_core::diagnostics::PlanStatus::Rejected;
    let report = json!({"diagnostics": bundle, "plan": plan});
    println!(
        "{}",
        serde_json::to_string_pretty(&report).unwrap_or_default()
    );
    if rejected {
        EXIT_RUN_FAILED
    } else {
        EXIT_COMPLETED
    }
}
