//! `baton eval DATASET`: every example of an evaluation dataset
//! (`baton_core::dataset`) run on the embedded default, at most
//! `--concurrency` at once, each scored by the deterministic checks: the
//! run's status, the output contract (a completed run's output met it),
//! the example's JSONLogic assertions over the output, the facts it must
//! mention, and its cost and duration bounds. Writes one JSON line per
//! example to `--results` (checks, status, cost, tokens, duration, run id),
//! prints a line per example as it ends and a summary (pass rate, cost and
//! duration percentiles). Exits 0 when the pass rate is at least
//! `--min-pass-rate` (default 1), 1 when it is not, 2 on a bad dataset.
//!
//! Judge scores (`expect.minJudgeScore`, `dataset.judges`), `--api` and
//! `baton eval compare` are not built yet: an example asking for a judge
//! score says so in its results line, as a check not run.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_bootstrap::stores::{LeftOverSteps, StoreChoice};
use baton_core::dataset::{ResolvedExample, parse_dataset};
use serde_json::{Value, json};

use crate::commands::{
    EXIT_COMPLETED, LOCAL_TENANT, configuration_or_exit, embedded_services, invalid,
    load_registry_or_exit,
};

/// Exit code of an evaluation whose pass rate is under its threshold.
const EXIT_REGRESSION: u8 = 1;

/// How long one example's run may take when the example sets no bound.
const DEFAULT_EXAMPLE_LIMIT: Duration = Duration::from_secs(1800);

/// What `baton eval` was asked.
pub struct EvalOptions {
    pub dataset: PathBuf,
    pub registry: Option<PathBuf>,
    pub concurrency: usize,
    pub results: PathBuf,
    pub min_pass_rate: f64,
}

/// One check of one example.
fn check(name: &str, passed: bool, detail: impl Into<String>) -> Value {
    json!({"check": name, "passed": passed, "detail": detail.into()})
}

/// Runs `baton eval`.
pub async fn eval(options: EvalOptions) -> u8 {
    let configuration = match configuration_or_exit() {
        Ok(configuration) => configuration,
        Err(code) => return code,
    };
    let text = match std::fs::read_to_string(&options.dataset) {
        Ok(text) => text,
        Err(error) => return invalid(format!("{}: {error}", options.dataset.display())),
    };
    let folder = options
        .dataset
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let dataset = match parse_dataset(&text, |file| {
        let read = std::fs::read_to_string(folder.join(file))
            .map_err(|error| format!("`{file}`: {error}"))?;
        serde_json::from_str(&read).map_err(|error| format!("`{file}`: not JSON: {error}"))
    }) {
        Ok(dataset) => dataset,
        Err(error) => return invalid(format!("{}: {error}", options.dataset.display())),
    };
    let registry = match load_registry_or_exit(options.registry.clone(), &configuration) {
        Ok(registry) => registry,
        Err(code) => return code,
    };
    let (services, queue) = match embedded_services(
        registry,
        &configuration,
        &StoreChoice::Memory,
        LeftOverSteps::None,
    )
    .await
    {
        Ok(parts) => parts,
        Err(code) => return code,
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = tokio::spawn(baton_runtime::workers::run_worker_with_bound(
        services.steps.clone(),
        queue,
        async move {
            let _ = stopped.await;
        },
        configuration.worker_max_steps_in_flight,
    ));
    let total = dataset.examples.len();
    eprintln!(
        "baton eval: {} ({total} examples, {} at once)",
        options.dataset.display(),
        options.concurrency
    );
    let slots = Arc::new(tokio::sync::Semaphore::new(options.concurrency.max(1)));
    let finished = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for example in dataset.examples {
        let (services, slots, finished) = (services.clone(), slots.clone(), finished.clone());
        tasks.push(tokio::spawn(async move {
            let _slot = slots.acquire_owned().await;
            let line = run_example(&services, &example).await;
            let done = finished.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            eprintln!(
                "[{done}/{total}] {}: {} ({}, {} ms)",
                example.id,
                if line["passed"] == true {
                    "pass"
                } else {
                    "FAIL"
                },
                line["status"].as_str().unwrap_or("not run"),
                line["durationMs"]
            );
            line
        }));
    }
    let mut lines = Vec::new();
    for task in tasks {
        match task.await {
            Ok(line) => lines.push(line),
            Err(error) => return invalid(format!("an example's task failed: {error}")),
        }
    }
    let _ = stop.send(());
    let _ = worker.await;
    let written = lines
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    if let Err(error) = std::fs::write(&options.results, format!("{written}\n")) {
        return invalid(format!("{}: {error}", options.results.display()));
    }
    let passed = lines.iter().filter(|line| line["passed"] == true).count();
    let pass_rate = passed as f64 / total as f64;
    let durations: Vec<f64> = lines
        .iter()
        .filter_map(|line| line["durationMs"].as_f64())
        .collect();
    let costs: Vec<f64> = lines
        .iter()
        .filter_map(|line| line["costUsd"].as_f64())
        .collect();
    println!("dataset      {}", dataset.header.name);
    println!(
        "passed       {passed}/{total} ({:.0}%, threshold {:.0}%)",
        pass_rate * 100.0,
        options.min_pass_rate * 100.0
    );
    println!(
        "duration     p50 {:.0} ms, p95 {:.0} ms",
        percentile(&durations, 0.5),
        percentile(&durations, 0.95)
    );
    println!(
        "cost         total ${:.6}, p50 ${:.6} ({} priced)",
        costs.iter().sum::<f64>(),
        percentile(&costs, 0.5),
        costs.len()
    );
    for line in lines.iter().filter(|line| line["passed"] != true) {
        let failed: Vec<String> = line["checks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|check| check["passed"] == false)
            .map(|check| format!("{}: {}", check["check"], check["detail"]))
            .collect();
        println!("failed       {}: {}", line["id"], failed.join("; "));
    }
    println!("results      {}", options.results.display());
    if pass_rate + f64::EPSILON >= options.min_pass_rate {
        EXIT_COMPLETED
    } else {
        EXIT_REGRESSION
    }
}

/// The nearest-rank percentile of `values` (0 when there are none).
fn percentile(values: &[f64], quantile: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((quantile * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Runs one example to where it settles and scores it.
async fn run_example(
    services: &baton_runtime::services::Services,
    example: &ResolvedExample,
) -> Value {
    let started = Instant::now();
    let submitted = match services.runs.submit(LOCAL_TENANT, &example.envelope).await {
        Ok(submitted) => submitted,
        Err(error) => {
            return json!({
                "id": example.id, "line": example.line, "passed": false, "status": null,
                "durationMs": 0, "checks": [check("submitted", false, error.to_string())],
            });
        }
    };
    let limit = example
        .expect
        .max_duration_ms
        .map_or(DEFAULT_EXAMPLE_LIMIT, |bound| {
            Duration::from_millis(bound).max(Duration::from_secs(1)) * 2
        });
    let state = loop {
        match services.runs.load(LOCAL_TENANT, &submitted.run_id).await {
            Ok(Some(stored)) if stored.state.status.is_settled() => break Some(stored.state),
            Ok(_) if started.elapsed() > limit => break None,
            Ok(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(error) => {
                return json!({
                    "id": example.id, "line": example.line, "runId": submitted.run_id,
                    "passed": false, "status": null, "durationMs": started.elapsed().as_millis() as u64,
                    "checks": [check("loaded", false, error.to_string())],
                });
            }
        }
    };
    let duration_ms = started.elapsed().as_millis() as u64;
    let Some(state) = state else {
        return json!({
            "id": example.id, "line": example.line, "runId": submitted.run_id, "passed": false,
            "status": null, "durationMs": duration_ms,
            "checks": [check("settled", false, format!("the run had not settled after {} s", limit.as_secs()))],
        });
    };
    let status = state.status.as_str().to_string();
    let output = state.output.clone().unwrap_or(Value::Null);
    let cost = state.total_cost_usd();
    let usage = state.total_usage();
    let expect = &example.expect;
    let mut checks = Vec::new();
    let wanted = expect.status.clone().unwrap_or_else(|| "completed".into());
    checks.push(check(
        "status",
        status == wanted,
        format!("{status}, expected {wanted}"),
    ));
    if status == "completed" {
        checks.push(check(
            "contract",
            true,
            "the output met the envelope's output contract",
        ));
    }
    for (index, assertion) in expect.assertions.iter().enumerate() {
        let held = baton_core::logic::evaluate(assertion, &output);
        checks.push(check(
            &format!("assertions[{index}]"),
            held == Ok(true),
            match held {
                Ok(true) => "holds".to_string(),
                Ok(false) => format!("does not hold: {assertion}"),
                Err(error) => format!("cannot be evaluated: {error}"),
            },
        ));
    }
    let text = output.to_string().to_lowercase();
    for fact in &expect.mentions {
        checks.push(check(
            "mentions",
            text.contains(&fact.to_lowercase()),
            format!("`{fact}`"),
        ));
    }
    if let Some(bound) = expect.max_cost_usd {
        checks.push(match cost {
            Some(spent) => check(
                "maxCostUsd",
                spent <= bound,
                format!("${spent:.6} of ${bound}"),
            ),
            None => check("maxCostUsd", true, "no priced model call"),
        });
    }
    if let Some(bound) = expect.max_duration_ms {
        checks.push(check(
            "maxDurationMs",
            duration_ms <= bound,
            format!("{duration_ms} ms of {bound} ms"),
        ));
    }
    let mut not_run = Vec::new();
    if expect.min_judge_score.is_some() {
        not_run.push("minJudgeScore: judge panels are not run by `baton eval` yet");
    }
    let passed = checks.iter().all(|check| check["passed"] == true);
    let models: serde_json::Map<String, Value> = state
        .nodes
        .iter()
        .filter_map(|(node, record)| {
            record
                .model
                .as_ref()
                .map(|model| (node.clone(), Value::String(model.to_string())))
        })
        .collect();
    json!({
        "id": example.id,
        "line": example.line,
        "runId": submitted.run_id,
        "passed": passed,
        "status": status,
        "checks": checks,
        "notRun": not_run,
        "costUsd": cost,
        "tokens": {"prompt": usage.prompt_tokens, "completion": usage.completion_tokens},
        "durationMs": duration_ms,
        "modelByNode": models,
    })
}
