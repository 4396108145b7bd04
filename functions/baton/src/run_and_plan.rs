//! `baton run` and `baton plan`: an envelope run end to end in-process,
//! its frames printed as they come; or only planned and validated, without
//! calling a model. `drive_and_print` steps a run until it settles for
//! every command that continues one (resume, resolve, fork, chat).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use baton_bootstrap::stores::{LeftOverSteps, StoreChoice};
use baton_core::basics::schema::ValidatorCache;
use baton_core::contracts::envelope::TaskEnvelope;
use baton_core::state::run::RunStatus;
use baton_runtime::RuntimeError;
use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::services::Services;
use baton_runtime::workers::LocalRunner;
use futures_util::StreamExt;
use serde_json::Value;

use crate::failure::{CommandError, Ended, Outcome, failed, invalid};
use crate::setup::{LOCAL_TENANT, configuration, embedded_services, load_registry};
use crate::terminal::OutputFormat;
use crate::terminal::output::FramePrinter;

/// How often `baton run` looks for new frames.
const FOLLOW_POLL_INTERVAL: Duration = Duration::from_millis(20);

fn read_envelope_json(path: &Path) -> Result<Value, CommandError> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| invalid(format!("cannot read {}: {error}", path.display())))?;
    serde_json::from_str(&text)
        .map_err(|error| invalid(format!("{}: not valid JSON: {error}", path.display())))
}

fn report_invalid_envelope(path: &Path, error: &RuntimeError) -> CommandError {
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

/// `baton run`: runs the envelope in-process and prints every frame.
pub async fn run(
    envelope_path: &Path,
    registry: Option<PathBuf>,
    format: OutputFormat,
    store: StoreChoice,
) -> Outcome {
    let envelope_json = read_envelope_json(envelope_path)?;
    let configuration = configuration()?;
    let registry = load_registry(registry, &configuration)?;
    let (services, queue) =
        embedded_services(registry, &configuration, &store, LeftOverSteps::None).await?;
    let submitted = match services.runs.submit(LOCAL_TENANT, &envelope_json).await {
        Ok(submitted) => submitted,
        Err(error @ (RuntimeError::InvalidInput { .. } | RuntimeError::RunNotFound { .. })) => {
            return Err(report_invalid_envelope(envelope_path, &error));
        }
        Err(error) => return Err(invalid(error)),
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
) -> Outcome {
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue,
    };
    let worker_run_id = run_id.to_string();
    let mut worker =
        tokio::spawn(async move { runner.run_until_settled(LOCAL_TENANT, &worker_run_id).await });
    let colours = configuration().is_ok_and(|configuration| !configuration.no_color);
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
                        return Err(failed(format!("the queue drained but the run is still {}", status.as_str())));
                    }
                    Ok(Err(error)) => {
                        return Err(failed(format!("the run stopped: {error}")));
                    }
                    Err(error) => {
                        return Err(failed(format!("the worker crashed: {error}")));
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
        .map_or(RunStatus::Failed, |stored| stored.state.status());
    printer.finish(
        status,
        final_state
            .as_ref()
            .and_then(|stored| stored.state.output.as_ref()),
    );
    match status {
        RunStatus::Completed => Ok(Ended::Completed),
        RunStatus::AwaitingHuman => {
            eprintln!(
                "baton: run {run_id} waits for a person. With --store sqlite it is kept: list its task with `baton tasks`, answer with `baton resume {run_id} --output ANSWER.json`"
            );
            Ok(Ended::AwaitingPerson)
        }
        RunStatus::AwaitingHitl => {
            let asks = final_state
                .as_ref()
                .and_then(|stored| stored.state.governance.pending_request())
                .map(|request| (request.kind, request.operator_prompt.clone()));
            match asks {
                Some((baton_core::records::governance::HitlKind::Clarify, question)) => eprintln!(
                    "baton: run {run_id} asks: {question}\n  answer with `baton resume {run_id} --answer TEXT`"
                ),
                _ => eprintln!(
                    "baton: run {run_id} waits for approval: `baton resolve {run_id} --approve` (or --reject)"
                ),
            }
            Ok(Ended::AwaitingPerson)
        }
        RunStatus::Paused => {
            eprintln!(
                "baton: run {run_id} is paused by a policy; continue it with `baton resume {run_id}`"
            );
            Ok(Ended::AwaitingPerson)
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
            Ok(Ended::RunFailed)
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
pub fn plan(envelope_path: &Path, registry: Option<PathBuf>, format: PlanFormat) -> Outcome {
    let envelope_json = read_envelope_json(envelope_path)?;
    let configuration = configuration()?;
    let registry = load_registry(registry, &configuration)?;
    let mut envelope = match TaskEnvelope::parse_value(&envelope_json) {
        Ok(envelope) => envelope,
        Err(error) => return Err(invalid(format!("{}: {error}", envelope_path.display()))),
    };
    // Refused as a submission would be: catalog models, policy conditions,
    // the fallback capability.
    if let Err(error) =
        baton_core::planning::model_choice::check_envelope_models(&envelope, registry.models())
            .and_then(|()| {
                baton_core::planning::policy_conditions::check_policy_conditions(
                    &envelope, &registry,
                )
            })
            .and_then(|()| {
                baton_core::planning::escalation_targets::check_fallback_capability(
                    &envelope, &registry,
                )
            })
    {
        return Err(invalid(format!("{}: {error}", envelope_path.display())));
    }
    // The plan a run would get: legacy policy keys normalised first.
    match baton_core::contracts::legacy_policies::normalize_legacy_policies(&mut envelope) {
        Ok(rewrites) => {
            for rewrite in rewrites {
                eprintln!("baton: {} became {}", rewrite.field, rewrite.became);
            }
        }
        Err(error) => return Err(invalid(format!("{}: {error}", envelope_path.display()))),
    }
    // The plan, its judgement and where each node would escalate.
    let preview =
        baton_core::planning::preview::preview_plan(&envelope, &registry, &ValidatorCache::new());
    let rejected = preview.is_rejected();
    let report = serde_json::to_value(&preview).unwrap_or_default();
    let plan = preview.plan;
    let picture = match (&plan, format) {
        (_, PlanFormat::Json) => None,
        (Some(plan), PlanFormat::Mermaid) => {
            Some(baton_core::planning::plan_picture::to_mermaid(plan))
        }
        (Some(plan), PlanFormat::Dot) => Some(baton_core::planning::plan_picture::to_dot(plan)),
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
        Ok(Ended::RunFailed)
    } else {
        Ok(Ended::Completed)
    }
}
