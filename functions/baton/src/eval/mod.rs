//! `baton eval DATASET`: every example of an evaluation dataset
//! (`baton_core::contracts::dataset`) run on the embedded default (`--store`, the
//! default SQLite file, so `baton serve` shows the runs) or against a
//! deployed API (`--api URL`), at most `--concurrency` at once. Each is
//! scored by its deterministic checks and, when the dataset or `--judges`
//! names a judge panel, by the panel (`baton-evaluation` decides; this
//! shell runs). Writes one JSON line per example to `--results` and each
//! panel's transcript beside it, shows a progress bar on a terminal (a
//! line per example otherwise), prints the summary: pass rate, mean judge
//! score with its 95 % interval, cost and duration percentiles. Exits 0
//! when the pass rate reaches `--min-pass-rate` (default 1), 1 when it
//! does not, 2 on a bad dataset or panel. `baton eval compare` is in
//! `eval_compare`; `baton judge` in `judge`.

pub mod eval_compare;
pub mod eval_judges;
pub mod eval_progress;
pub mod eval_runs;
pub mod judge;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use baton_bootstrap::stores::{LeftOverSteps, StoreChoice};
use baton_core::contracts::dataset::{Dataset, TemplateUnreadable, parse_dataset};
use baton_evaluation::results::{Check, ExampleResult, results_text};
use baton_evaluation::summary::Summary;

use baton_runtime::ports::evaluation_ports::{ExampleJudge, ExampleRuns};
use baton_runtime::services::dataset_evaluations::{EmbeddedExampleRuns, run_example};

use crate::eval::eval_judges::load_judge;
use crate::eval::eval_runs::ApiExampleRuns;
use crate::failure::{CommandError, Ended, Outcome, invalid};
use crate::setup::{configuration, embedded_services};

/// `baton eval`'s arguments (`baton eval compare` is a subcommand).
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct EvalArguments {
    #[command(subcommand)]
    pub command: Option<EvalSubcommand>,
    /// The dataset (JSONL: a header line, then one example a line).
    pub dataset: Option<PathBuf>,
    #[arg(long)]
    pub registry: Option<PathBuf>,
    /// Examples running at once.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Where the results go (one JSON line per example); judge transcripts
    /// go to the folder beside it (`eval-results.transcripts/`).
    #[arg(long, default_value = "eval-results.jsonl")]
    pub results: PathBuf,
    /// The least share of examples that must pass (0 to 1).
    #[arg(long, default_value_t = 1.0)]
    pub min_pass_rate: f64,
    /// A judge panel request file (JSON: `request` with criteria and judges,
    /// `config`) scoring every example; overrides the dataset's `judges`.
    #[arg(long)]
    pub judges: Option<PathBuf>,
    /// Run the examples on a deployed Baton API (its base URL) instead of
    /// the embedded default.
    #[arg(long)]
    pub api: Option<String>,
    /// The API's bearer token (default: `$BATON_API_TOKEN`).
    #[arg(long)]
    pub token: Option<String>,
    /// Where the embedded default keeps the runs: `sqlite` (the default
    /// file `baton serve --store sqlite` shows), `sqlite:PATH` or `memory`.
    #[arg(long, default_value = "sqlite", value_parser = crate::setup::parse_store)]
    pub store: StoreChoice,
}

#[derive(clap::Subcommand)]
pub enum EvalSubcommand {
    /// Compare a candidate's results with a baseline's: per-example changes,
    /// aggregate differences, regressions (exit 1), an HTML report.
    Compare(crate::eval::eval_compare::CompareArguments),
}

/// Runs `baton eval` or `baton eval compare`.
pub async fn eval(arguments: EvalArguments) -> Outcome {
    if let Some(EvalSubcommand::Compare(compare)) = arguments.command {
        return crate::eval::eval_compare::compare(compare);
    }
    let Some(dataset_path) = arguments.dataset.clone() else {
        return Err(invalid(
            "baton eval: give a dataset (JSONL), or `compare BASELINE CANDIDATE`",
        ));
    };
    if !(0.0..=1.0).contains(&arguments.min_pass_rate) {
        return Err(invalid("--min-pass-rate: a share is 0 to 1"));
    }
    let dataset = read_dataset(&dataset_path)?;
    let configuration = configuration()?;
    let registry = crate::setup::load_registry(arguments.registry.clone(), &configuration)?;
    let panel_file = arguments.judges.clone().or_else(|| {
        dataset
            .header
            .judges
            .as_ref()
            .map(|file| folder_of(&dataset_path).join(file))
    });
    let judges = match &panel_file {
        Some(file) => {
            Some(Arc::new(load_judge(file, &registry, &arguments.results)?) as Arc<dyn ExampleJudge>)
        }
        None => None,
    };
    let mut worker = None;
    let runner: Arc<dyn ExampleRuns> = match &arguments.api {
        Some(api) => Arc::new(ApiExampleRuns {
            client: reqwest::Client::new(),
            // The root URL, or the API's own (`…/api/v1/flex`) as `serve` prints it.
            base: api
                .trim_end_matches('/')
                .trim_end_matches("/api/v1/flex")
                .to_string(),
            token: arguments
                .token
                .clone()
                .or_else(|| configuration.api_token.clone()),
        }),
        None => {
            let (services, queue) = embedded_services(
                registry.clone(),
                &configuration,
                &arguments.store,
                LeftOverSteps::None,
            )
            .await?;
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            worker = Some((
                stop,
                tokio::spawn(baton_runtime::workers::run_worker_with_bound(
                    services.steps.clone(),
                    queue,
                    async move {
                        let _ = stopped.await;
                    },
                    configuration.worker_max_steps_in_flight,
                )),
            ));
            Arc::new(EmbeddedExampleRuns {
                runs: services.runs.clone(),
                tenant: crate::setup::LOCAL_TENANT.to_string(),
            })
        }
    };
    let results = run_examples(&dataset, &dataset_path, runner, judges, &arguments).await;
    if let Some((stop, task)) = worker {
        let _ = stop.send(());
        let _ = task.await;
    }
    if let Err(error) = std::fs::write(&arguments.results, results_text(&results)) {
        return Err(invalid(format!("{}: {error}", arguments.results.display())));
    }
    let summary = Summary::of(&results);
    println!("dataset      {}", dataset.header.name);
    for line in summary.lines(arguments.min_pass_rate) {
        println!("{line}");
    }
    for result in results.iter().filter(|result| !result.passed) {
        println!(
            "failed       {}: {}",
            result.id,
            result.failures().join("; ")
        );
    }
    println!("results      {}", arguments.results.display());
    if summary.meets(arguments.min_pass_rate) {
        Ok(Ended::Completed)
    } else {
        Ok(Ended::Regression)
    }
}

fn folder_of(path: &Path) -> PathBuf {
    path.parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Reads a dataset and the template envelope it names (beside it).
pub fn read_dataset(path: &Path) -> Result<Dataset, CommandError> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| invalid(format!("{}: {error}", path.display())))?;
    let folder = folder_of(path);
    parse_dataset(&text, |file| {
        let read = std::fs::read_to_string(folder.join(file)).map_err(|source| {
            TemplateUnreadable::Unread {
                file: file.to_string(),
                source,
            }
        })?;
        serde_json::from_str(&read).map_err(|source| TemplateUnreadable::NotJson {
            file: file.to_string(),
            source,
        })
    })
    .map_err(|error| invalid(format!("{}: {error}", path.display())))
}

/// Every example, at most `--concurrency` at once, in the dataset's order.
async fn run_examples(
    dataset: &Dataset,
    dataset_path: &Path,
    runner: Arc<dyn ExampleRuns>,
    judges: Option<Arc<dyn ExampleJudge>>,
    arguments: &EvalArguments,
) -> Vec<ExampleResult> {
    let total = dataset.examples.len();
    eprintln!(
        "baton eval: {} ({total} examples, {} at once{}{})",
        dataset_path.display(),
        arguments.concurrency.max(1),
        if judges.is_some() { ", judged" } else { "" },
        runner
            .api()
            .map(|api| format!(", on {api}"))
            .unwrap_or_default()
    );
    let progress = crate::eval::eval_progress::EvalProgress::new(total);
    let slots = Arc::new(tokio::sync::Semaphore::new(arguments.concurrency.max(1)));
    let mut tasks = Vec::new();
    for example in dataset.examples.iter().cloned() {
        let (runner, judges, slots, progress) = (
            runner.clone(),
            judges.clone(),
            slots.clone(),
            progress.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let _slot = slots.acquire_owned().await;
            progress.started(&example.id);
            let result = run_example(runner.as_ref(), judges.as_deref(), &example).await;
            progress.finished(&result);
            result
        }));
    }
    let mut results = Vec::new();
    for (task, example) in tasks.into_iter().zip(&dataset.examples) {
        results.push(task.await.unwrap_or_else(|error| {
            ExampleResult::not_run(
                &example.id,
                example.line,
                None,
                Check::new("ran", false, error.to_string()),
            )
        }));
    }
    progress.done();
    results
}
