//! `baton tasks`, `baton runs`, `baton resume` and `baton resolve`: the
//! person's side of a parked run, on a store that outlives the process
//! (SQLite); `baton audit` (`audit_command`), who did what.

pub mod audit_command;

use baton_runtime::ports::RunQueries;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use baton_core::basics::schema::json_path_for_pointer;
use baton_core::engine::{ApprovalDecision, HumanInputRefused};
use baton_core::records::governance::{HitlKind, Hold};
use baton_core::state::run::RunState;
use baton_core::state::tasks::{HumanTask, human_tasks};
use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::services::{PersonInput, PersonInputOutcome, Services};
use serde_json::Value;

use baton_bootstrap::stores::{LeftOverSteps, StoreChoice, default_state_file};

use crate::failure::{CommandError, Ended, Outcome, failed, invalid};
use crate::run_and_plan::drive_and_print;
use crate::setup::{LOCAL_TENANT, configuration, embedded_services, load_registry};
use crate::terminal::{OutputFormat, TaskFormat};

/// The SQLite file a command that reads parked runs works on.
pub(crate) fn durable_file(store: &StoreChoice) -> Result<PathBuf, CommandError> {
    match store {
        StoreChoice::Sqlite(Some(path)) => Ok(path.clone()),
        StoreChoice::Sqlite(None) => {
            let configuration = configuration()?;
            default_state_file(&configuration).map_err(invalid)
        }
        StoreChoice::Memory => Err(invalid(
            "--store memory keeps nothing between processes: parked runs live in sqlite (run with --store sqlite)",
        )),
        StoreChoice::Dynamodb => Err(invalid(
            "--store dynamodb: use the HTTP API (`baton serve --store dynamodb`) for tasks in the cloud",
        )),
    }
}

/// `baton runs`: the local tenant's most recent runs, newest first.
pub async fn runs(store: StoreChoice, format: TaskFormat, limit: usize) -> Outcome {
    let path = durable_file(&store)?;
    let sqlite = match baton_sqlite::SqliteStore::open(&path) {
        Ok(sqlite) => sqlite,
        Err(error) => return Err(invalid(format!("store {}: {error}", path.display()))),
    };
    let runs = match sqlite.recent_runs(LOCAL_TENANT, limit).await {
        Ok(runs) => runs,
        Err(error) => return Err(invalid(format!("store {}: {error}", path.display()))),
    };
    match format {
        TaskFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&runs).unwrap_or_else(|_| "[]".into())
        ),
        TaskFormat::Pretty => {
            if runs.is_empty() {
                println!("no runs in {}", path.display());
            }
            for run in &runs {
                println!(
                    "{}  {:<15} {}  {}",
                    run.run_id,
                    run.status,
                    run.updated_at,
                    run.objective.chars().take(60).collect::<String>()
                );
            }
        }
    }
    Ok(Ended::Completed)
}

/// `baton tasks`: the pending human tasks of the local tenant.
pub async fn tasks(store: StoreChoice, format: TaskFormat) -> Outcome {
    let path = durable_file(&store)?;
    let sqlite = match baton_sqlite::SqliteStore::open(&path) {
        Ok(sqlite) => sqlite,
        Err(error) => return Err(invalid(format!("store {}: {error}", path.display()))),
    };
    let runs = match sqlite.runs_awaiting_human(LOCAL_TENANT).await {
        Ok(runs) => runs,
        Err(error) => return Err(invalid(format!("store {}: {error}", path.display()))),
    };
    let tasks: Vec<HumanTask> = runs.iter().flat_map(human_tasks).collect();
    match format {
        TaskFormat::Json => {
            println!(
                "{}",
                serde_json::to_string_pretty(&tasks).unwrap_or_else(|_| "[]".into())
            );
        }
        TaskFormat::Pretty => {
            let approvals: Vec<String> = runs
                .iter()
                .filter_map(|run| approval_line(run, &path))
                .collect();
            if tasks.is_empty() && approvals.is_empty() {
                println!("no pending tasks in {}", path.display());
            }
            for approval in &approvals {
                println!("{approval}");
            }
            for task in &tasks {
                println!(
                    "{}  {}  (plan version {})\n    {}\n    answer: baton resume {} --node {} --output ANSWER.json --store sqlite:{}",
                    task.task_id,
                    task.capability_id,
                    task.plan_version,
                    task.instructions.lines().next().unwrap_or_default(),
                    task.run_id,
                    task.node_id,
                    path.display()
                );
            }
        }
    }
    Ok(Ended::Completed)
}

/// A held run's pending approval, as `baton tasks` lists it: the prompt,
/// what is at stake (the pending node's capability and facets) and how to
/// decide it.
fn approval_line(run: &RunState, path: &Path) -> Option<String> {
    let request = run.governance.pending_request()?;
    if request.kind != HitlKind::Approval {
        return None;
    }
    let at_stake = match &request.contract_summary {
        Some(summary) => format!(
            "\n    at stake: node {} ({}): {} -> {}",
            request.pending_node_id.as_deref().unwrap_or("-"),
            summary.capability_id,
            summary.input_facets.join(", "),
            summary.output_facets.join(", ")
        ),
        None => String::new(),
    };
    Some(format!(
        "{}  approval  (plan version {})\n    {}{at_stake}\n    decide: baton resolve {} --approve|--reject --store sqlite:{}",
        request.request_id,
        run.plan_version(),
        request.operator_prompt.lines().next().unwrap_or_default(),
        run.run_id,
        path.display()
    ))
}

pub(crate) fn read_output(path: &Path) -> Result<Value, CommandError> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| invalid(format!("cannot read {}: {error}", path.display())))?;
    serde_json::from_str(&text)
        .map_err(|error| invalid(format!("{}: not valid JSON: {error}", path.display())))
}

fn report_refusal(refusal: HumanInputRefused, output_path: Option<&Path>) -> Outcome {
    match refusal {
        HumanInputRefused::NotAwaiting {
            run_status,
            node_status,
        } => Err(failed(format!(
            "nothing to resume: the node is {} and the run {}",
            node_status.map_or("not in the plan".to_string(), |status| format!(
                "{status:?}"
            )),
            run_status.as_str()
        ))),
        HumanInputRefused::StalePlanVersion { current } => Err(invalid(format!(
            "the run's plan moved to version {current}; read the task again"
        ))),
        HumanInputRefused::OutputContractViolated(violations) => {
            let source =
                output_path.map_or("the answer".to_string(), |path| path.display().to_string());
            for violation in &violations {
                eprintln!(
                    "baton: {source}: {} breaks the node's output contract: {}",
                    json_path_for_pointer("$", &violation.instance_pointer),
                    violation.message
                );
            }
            Err(invalid("nothing changed; fix the answer and resume again"))
        }
        HumanInputRefused::NoPendingRequest { run_status } => Err(failed(format!(
            "no request of that kind waits (the run is {})",
            run_status.as_str()
        ))),
        HumanInputRefused::UnknownRequest { pending } => Err(invalid(format!(
            "that request does not wait; {pending} does"
        ))),
        HumanInputRefused::NotPaused { run_status } => Err(failed(format!(
            "the run is {}, not paused",
            run_status.as_str()
        ))),
        HumanInputRefused::AnswerRequired => Err(invalid("--answer must not be empty")),
        // The CLI answers as the local operator, who may answer any task.
        HumanInputRefused::NotAssignee { assigned_to } => Err(invalid(format!(
            "the task is assigned to users {:?} and groups {:?}",
            assigned_to.users, assigned_to.groups
        ))),
        HumanInputRefused::NoManualPolicy { policy_id, .. } => Err(invalid(format!(
            "the run has no enabled manual policy `{policy_id}`"
        ))),
    }
}

/// What `baton resume` was asked.
pub struct ResumeRequest {
    pub run_id: String,
    pub node_id: Option<String>,
    /// A human task's output (a JSON file).
    pub output: Option<PathBuf>,
    /// The answer to a clarifying question.
    pub answer: Option<String>,
    pub registry: Option<PathBuf>,
    pub format: OutputFormat,
    pub store: StoreChoice,
}

/// What `baton resolve` was asked.
pub struct ResolveRequest {
    pub run_id: String,
    pub decision: ApprovalDecision,
    pub request_id: Option<String>,
    pub note: Option<String>,
    pub registry: Option<PathBuf>,
    pub format: OutputFormat,
    pub store: StoreChoice,
}

/// The services over the durable store, and the run as stored.
pub(crate) async fn open_run(
    run_id: &str,
    registry: Option<PathBuf>,
    store: &StoreChoice,
) -> Result<(Services, Arc<InMemoryStepQueue>, RunState), CommandError> {
    durable_file(store)?;
    let configuration = configuration()?;
    let registry = load_registry(registry, &configuration)?;
    let (services, queue) = embedded_services(
        registry,
        &configuration,
        store,
        LeftOverSteps::OfRun(run_id),
    )
    .await?;
    // What an earlier process left of this run runs first: a timer that came
    // due meanwhile (a task's SLA) fires before anyone's late answer applies.
    let runner = baton_runtime::workers::LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue: queue.clone(),
    };
    runner.drain().await.map_err(invalid)?;
    let stored = match services.runs.load(LOCAL_TENANT, run_id).await {
        Ok(Some(stored)) => stored,
        Ok(None) => return Err(invalid(format!("no run `{run_id}` in this store"))),
        Err(error) => return Err(invalid(error)),
    };
    Ok((services, queue, stored.state))
}

/// Applies a person's input, then runs on, printing frames like `baton run`.
async fn apply_and_drive(
    (services, queue): (Services, Arc<InMemoryStepQueue>),
    run_id: &str,
    input: PersonInput,
    format: OutputFormat,
    output_path: Option<&Path>,
) -> Outcome {
    let last_frame = match services
        .runs
        .read_all_events_after(LOCAL_TENANT, run_id, 0)
        .await
    {
        Ok(frames) => frames.last().map_or(0, |frame| frame.id),
        Err(error) => return Err(invalid(error)),
    };
    match services.people.apply(LOCAL_TENANT, run_id, input).await {
        Ok(PersonInputOutcome::Applied { .. }) => {}
        Ok(PersonInputOutcome::Refused(refusal)) => return report_refusal(refusal, output_path),
        Ok(PersonInputOutcome::RunNotFound) => {
            return Err(invalid(format!("no run `{run_id}` in this store")));
        }
        Err(error) => return Err(invalid(error)),
    }
    drive_and_print(&services, queue, run_id, last_frame, format).await
}

/// `baton resume`: answers the run's parked node with the output in a file
/// (`--output`), answers its clarifying question (`--answer`), or resumes
/// it from a pause (neither); then runs on, printing frames like `baton run`
/// (same exit codes).
pub async fn resume(request: ResumeRequest) -> Outcome {
    let output = request.output.as_deref().map(read_output).transpose()?;
    let (services, queue, state) =
        open_run(&request.run_id, request.registry.clone(), &request.store).await?;
    let input = match (output, request.answer) {
        (Some(output), _) => match waiting_task(&state, request.node_id.as_deref()) {
            Ok(task) => PersonInput::Answer {
                node_id: task.node_id,
                expected_plan_version: task.plan_version,
                output,
            },
            Err(error) => return Err(error),
        },
        (None, Some(answer)) => PersonInput::Clarify {
            request_id: None,
            expected_plan_version: state.plan_version(),
            answer,
        },
        (None, None) => match &state.governance.hold {
            Some(Hold::Paused { .. }) => PersonInput::ResumePaused {
                expected_plan_version: state.plan_version(),
            },
            Some(Hold::Request(request)) if request.kind == HitlKind::Clarify => {
                return Err(invalid(format!(
                    "the run asks: {} (answer with --answer TEXT)",
                    request.operator_prompt
                )));
            }
            Some(Hold::Request(request)) => {
                return Err(invalid(format!(
                    "the run waits for approval of {} (use `baton resolve {} --approve|--reject`)",
                    request.request_id, state.run_id
                )));
            }
            None if !human_tasks(&state).is_empty() => {
                return Err(invalid(
                    "the run waits for a person's output: pass --output ANSWER.json",
                ));
            }
            None => {
                eprintln!(
                    "baton: run `{}` is {} and waits for no person",
                    state.run_id,
                    state.status().as_str()
                );
                return Ok(Ended::RunFailed);
            }
        },
    };
    apply_and_drive(
        (services, queue),
        &request.run_id,
        input,
        request.format,
        request.output.as_deref(),
    )
    .await
}

/// The task `--output` answers: the named node's, or the only one.
fn waiting_task(state: &RunState, node_id: Option<&str>) -> Result<HumanTask, CommandError> {
    let tasks = human_tasks(state);
    let task = match (node_id, tasks.as_slice()) {
        (Some(node_id), _) => tasks.iter().find(|task| task.node_id == node_id),
        (None, [only]) => Some(only),
        (None, []) => None,
        (None, _) => {
            return Err(invalid(format!(
                "run `{}` waits on several nodes ({}); name one with --node",
                state.run_id,
                tasks
                    .iter()
                    .map(|task| task.node_id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    };
    task.cloned().ok_or_else(|| {
        failed(format!(
            "run `{}` is {} and waits for no person's output{}",
            state.run_id,
            state.status().as_str(),
            node_id
                .map(|node| format!(" on `{node}`"))
                .unwrap_or_default()
        ))
    })
}

/// `baton resolve`: approves or rejects the run's pending approval request,
/// then runs on, printing frames like `baton run`.
pub async fn resolve(request: ResolveRequest) -> Outcome {
    let (services, queue, state) =
        open_run(&request.run_id, request.registry.clone(), &request.store).await?;
    let request_id = match (request.request_id, state.governance.pending_request()) {
        (Some(request_id), _) => request_id,
        (None, Some(pending)) => pending.request_id.clone(),
        (None, None) => {
            eprintln!(
                "baton: run `{}` is {} and has no pending approval request",
                state.run_id,
                state.status().as_str()
            );
            return Ok(Ended::RunFailed);
        }
    };
    let input = PersonInput::Resolve {
        request_id,
        decision: request.decision,
        note: request.note,
    };
    apply_and_drive(
        (services, queue),
        &request.run_id,
        input,
        request.format,
        None,
    )
    .await
}
