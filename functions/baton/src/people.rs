//! `baton tasks` and `baton resume`: the person's side of a parked run, on
//! a store that outlives the process (SQLite).

use std::path::{Path, PathBuf};

use baton_core::engine::HumanInputRefused;
use baton_core::schema::json_path_for_pointer;
use baton_core::tasks::{HumanTask, human_tasks};
use baton_runtime::ports::RunStore;
use baton_runtime::services::{HumanInput, HumanInputOutcome};
use serde_json::Value;

use crate::commands::{
    EXIT_COMPLETED, EXIT_RUN_FAILED, LOCAL_TENANT, configuration_or_exit, default_state_file,
    drive_and_print, embedded_services, invalid, load_registry_or_exit,
};
use crate::{OutputFormat, StoreChoice, TaskFormat};

/// The SQLite file a command that reads parked runs works on.
fn durable_file(store: &StoreChoice) -> Result<PathBuf, u8> {
    match store {
        StoreChoice::Sqlite(Some(path)) => Ok(path.clone()),
        StoreChoice::Sqlite(None) => default_state_file(),
        StoreChoice::Memory => Err(invalid(
            "--store memory keeps nothing between processes: parked runs live in sqlite (run with --store sqlite)",
        )),
        StoreChoice::Dynamodb => Err(invalid(
            "--store dynamodb: use the HTTP API (`baton serve --store dynamodb`) for tasks in the cloud",
        )),
    }
}

/// `baton runs`: the local tenant's most recent runs, newest first.
pub async fn runs(store: StoreChoice, format: TaskFormat, limit: usize) -> u8 {
    let path = match durable_file(&store) {
        Ok(path) => path,
        Err(code) => return code,
    };
    let sqlite = match baton_sqlite::SqliteStore::open(&path) {
        Ok(sqlite) => sqlite,
        Err(error) => return invalid(format!("store {}: {error}", path.display())),
    };
    let runs = match sqlite.recent_runs(LOCAL_TENANT, limit).await {
        Ok(runs) => runs,
        Err(error) => return invalid(format!("store {}: {error}", path.display())),
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
    EXIT_COMPLETED
}

/// `baton tasks`: the pending human tasks of the local tenant.
pub async fn tasks(store: StoreChoice, format: TaskFormat) -> u8 {
    let path = match durable_file(&store) {
        Ok(path) => path,
        Err(code) => return code,
    };
    let sqlite = match baton_sqlite::SqliteStore::open(&path) {
        Ok(sqlite) => sqlite,
        Err(error) => return invalid(format!("store {}: {error}", path.display())),
    };
    let runs = match sqlite.runs_awaiting_human(LOCAL_TENANT).await {
        Ok(runs) => runs,
        Err(error) => return invalid(format!("store {}: {error}", path.display())),
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
            if tasks.is_empty() {
                println!("no pending tasks in {}", path.display());
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
    EXIT_COMPLETED
}

fn read_output(path: &Path) -> Result<Value, u8> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| invalid(format!("cannot read {}: {error}", path.display())))?;
    serde_json::from_str(&text)
        .map_err(|error| invalid(format!("{}: not valid JSON: {error}", path.display())))
}

fn report_refusal(refusal: HumanInputRefused, output_path: &Path) -> u8 {
    match refusal {
        HumanInputRefused::NotAwaiting {
            run_status,
            node_status,
        } => {
            eprintln!(
                "baton: nothing to resume: the node is {} and the run {}",
                node_status.map_or("not in the plan".to_string(), |status| format!(
                    "{status:?}"
                )),
                run_status.as_str()
            );
            EXIT_RUN_FAILED
        }
        HumanInputRefused::StalePlanVersion { current } => invalid(format!(
            "the run's plan moved to version {current}; read the task again"
        )),
        HumanInputRefused::OutputContractViolated(violations) => {
            for violation in &violations {
                eprintln!(
                    "baton: {}: {} breaks the node's output contract: {}",
                    output_path.display(),
                    json_path_for_pointer("$", &violation.instance_pointer),
                    violation.message
                );
            }
            invalid("nothing changed; fix the answer and resume again")
        }
    }
}

/// What `baton resume` was asked.
pub struct ResumeRequest {
    pub run_id: String,
    pub node_id: Option<String>,
    pub output: PathBuf,
    pub registry: Option<PathBuf>,
    pub format: OutputFormat,
    pub store: StoreChoice,
}

/// `baton resume`: answers the run's parked node with the output in a file,
/// then runs on, printing frames like `baton run` (same exit codes).
pub async fn resume(request: ResumeRequest) -> u8 {
    let output = match read_output(&request.output) {
        Ok(output) => output,
        Err(code) => return code,
    };
    if let Err(code) = durable_file(&request.store) {
        return code;
    }
    let configuration = match configuration_or_exit() {
        Ok(configuration) => configuration,
        Err(code) => return code,
    };
    let registry = match load_registry_or_exit(request.registry.clone(), &configuration) {
        Ok(registry) => registry,
        Err(code) => return code,
    };
    let (services, queue) = match embedded_services(registry, &configuration, &request.store).await
    {
        Ok(parts) => parts,
        Err(code) => return code,
    };
    let stored = match services.runs.load(LOCAL_TENANT, &request.run_id).await {
        Ok(Some(stored)) => stored,
        Ok(None) => return invalid(format!("no run `{}` in this store", request.run_id)),
        Err(error) => return invalid(error),
    };
    let tasks = human_tasks(&stored.state);
    let task = match (&request.node_id, tasks.as_slice()) {
        (Some(node_id), _) => tasks.iter().find(|task| &task.node_id == node_id),
        (None, [only]) => Some(only),
        (None, []) => None,
        (None, _) => {
            return invalid(format!(
                "run `{}` waits on several nodes ({}); name one with --node",
                request.run_id,
                tasks
                    .iter()
                    .map(|task| task.node_id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    };
    let Some(task) = task.cloned() else {
        eprintln!(
            "baton: run `{}` is {} and waits for no person{}",
            request.run_id,
            stored.state.status.as_str(),
            request
                .node_id
                .as_deref()
                .map(|node| format!(" on `{node}`"))
                .unwrap_or_default()
        );
        return EXIT_RUN_FAILED;
    };
    let last_frame = match services
        .runs
        .read_all_events_after(LOCAL_TENANT, &request.run_id, 0)
        .await
    {
        Ok(frames) => frames.last().map_or(0, |frame| frame.id),
        Err(error) => return invalid(error),
    };
    let answer = HumanInput::Answer {
        node_id: task.node_id.clone(),
        expected_plan_version: task.plan_version,
        output,
    };
    match services
        .humans
        .apply(LOCAL_TENANT, &request.run_id, answer)
        .await
    {
        Ok(HumanInputOutcome::Applied { .. }) => {}
        Ok(HumanInputOutcome::Refused(refusal)) => {
            return report_refusal(refusal, &request.output);
        }
        Ok(HumanInputOutcome::RunNotFound) => {
            return invalid(format!("no run `{}` in this store", request.run_id));
        }
        Err(error) => return invalid(error),
    }
    drive_and_print(
        &services,
        queue,
        &request.run_id,
        last_frame,
        request.format,
    )
    .await
}
