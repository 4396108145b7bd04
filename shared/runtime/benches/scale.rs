//! Scale on one machine: N runs submitted at once on the embedded default
//! (in-memory store and queue, one worker process), each the five-node
//! linear plan of `node_step_overhead`, against a test double for the
//! model endpoint that answers after a delay (a precomputed valid answer
//! per capability). Everything else is the real engine and worker
//! (`run_worker_with_bound`).
//!
//! Prints: submission time, wall time until every run completed, runs and
//! node steps per second, the single run's wall time for comparison (the
//! ratio is how far concurrency is from free), p50/p99 of a node step's
//! time from its step message's commit to its node's completion (model
//! delay included) and the engine's part of it, peak RSS, and RSS per run
//! in flight (at the peak) and per finished run (kept in the store).
//!
//! `cargo bench -p baton-runtime --bench scale` (10,000 runs, 200 ms model).
//! `BATON_SCALE_RUNS`, `BATON_SCALE_MODEL_DELAY_MS` and
//! `BATON_SCALE_MAX_IN_FLIGHT` (the worker's bound) change the defaults.
//!
//! `-- --check-ceiling`: exits 1 when the peak RSS is over the ceiling in
//! `benches/scale_ceiling.json` (or `BATON_SCALE_CEILING_MIB`, which the
//! CI stage sets low once to see the check fail). `.ci/run` runs it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench code: a failed unwrap is a failed run

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use baton_core::state::context::ModelRequest;
use baton_core::state::run::TokenUsage;
use baton_runtime::error::LlmError;
use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta, StepQueue};
use baton_runtime::services::{OrchestratorSettings, Services};
use baton_test_support::TestServices;
use baton_test_support::five_stages::{five_stage_envelope, five_stage_registry};
use tokio::sync::mpsc::UnboundedSender;

/// The same allocator the shipped binaries use.
#[global_allocator]
static GLOBAL_ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Test double for the model endpoint: a valid answer after `delay`.
struct DelayedProvider {
    answers_by_schema_name: HashMap<String, String>,
    delay: Duration,
}

#[async_trait]
impl LlmProvider for DelayedProvider {
    fn model_name(&self) -> String {
        "delayed".into()
    }
    async fn complete(
        &self,
        request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        tokio::time::sleep(self.delay).await;
        Ok(ModelAnswer {
            content: self
                .answers_by_schema_name
                .get(&request.schema_name)
                .cloned()
                .unwrap_or_default(),
            usage: TokenUsage {
                prompt_tokens: 10,
                completion_tokens: 10,
                cached_prompt_tokens: 0,
                cache_write_prompt_tokens: 0,
            },
            model: "delayed".into(),
        })
    }
}

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(default)
}

/// Peak and current resident set size, in KiB (`VmHWM`, `VmRSS`).
fn rss_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|line| line.starts_with(name))
            .and_then(|line| line.split_whitespace().nth(1))
            .and_then(|value| value.parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

fn percentile(sorted: &[u64], share: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let index = ((sorted.len() as f64 - 1.0) * share).round() as usize;
    sorted[index]
}

struct Measured {
    wall: Duration,
    submit: Duration,
    node_millis: Vec<u64>,
    peak_in_flight_kib: u64,
}

async fn run_many(
    runs: usize,
    delay: Duration,
    max_in_flight: usize,
    baseline_kib: u64,
) -> Measured {
    let registry = Arc::new(five_stage_registry(&|role| format!("Act as the {role}.")));
    let provider: Arc<dyn LlmProvider> = Arc::new(DelayedProvider {
        answers_by_schema_name: baton_test_support::five_stages::five_stage_answers(&registry),
        delay,
    });
    let queue = Arc::new(InMemoryStepQueue::new());
    let services: Services = TestServices::with_model(provider)
        .registry(registry)
        .queue(queue.clone())
        .settings(OrchestratorSettings {
            stream_deltas: false,
            ..OrchestratorSettings::default()
        })
        .worker_id("scale")
        .build()
        .services;
    let envelope = five_stage_envelope();
    let started = Instant::now();
    let mut run_ids = Vec::with_capacity(runs);
    for _ in 0..runs {
        run_ids.push(
            services
                .runs
                .submit("scale", &envelope)
                .await
                .unwrap()
                .run_id,
        );
    }
    let submit = started.elapsed();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker_queue: Arc<dyn StepQueue> = queue.clone();
    let worker = tokio::spawn(baton_runtime::workers::run_worker_with_bound(
        services.steps.clone(),
        worker_queue,
        async {
            let _ = stopped.await;
        },
        max_in_flight,
    ));
    let mut pending = run_ids.clone();
    let mut peak_in_flight_kib = 0;
    while !pending.is_empty() {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (_, current) = rss_kib();
        peak_in_flight_kib = peak_in_flight_kib.max(current.saturating_sub(baseline_kib));
        let mut still = Vec::with_capacity(pending.len());
        for run_id in pending {
            let stored = services.runs.load("scale", &run_id).await.unwrap().unwrap();
            if !stored.state.status().is_settled() {
                still.push(run_id);
            }
        }
        pending = still;
        assert!(
            started.elapsed() < Duration::from_secs(1_800),
            "{} runs still going after 30 minutes",
            pending.len()
        );
    }
    let wall = started.elapsed();
    let _ = stop.send(());
    worker.await.unwrap();
    let mut node_millis = Vec::new();
    for run_id in &run_ids {
        let stored = services.runs.load("scale", run_id).await.unwrap().unwrap();
        assert_eq!(
            stored.state.status(),
            baton_core::state::run::RunStatus::Completed,
            "{run_id}"
        );
        for frame in services
            .runs
            .read_all_events_after("scale", run_id, 0)
            .await
            .unwrap()
        {
            if frame.event_type.as_str() == "node_complete"
                && let Some(millis) = frame
                    .payload
                    .as_ref()
                    .and_then(|p| p["durationMs"].as_u64())
            {
                node_millis.push(millis);
            }
        }
    }
    node_millis.sort_unstable();
    Measured {
        wall,
        submit,
        node_millis,
        peak_in_flight_kib,
    }
}

fn main() {
    let runs = usize::try_from(setting("BATON_SCALE_RUNS", 10_000)).unwrap();
    let delay = Duration::from_millis(setting("BATON_SCALE_MODEL_DELAY_MS", 200));
    let max_in_flight = usize::try_from(setting(
        "BATON_SCALE_MAX_IN_FLIGHT",
        baton_runtime::workers::DEFAULT_MAX_STEPS_IN_FLIGHT as u64,
    ))
    .unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let (_, baseline_kib) = rss_kib();
    let single = runtime.block_on(run_many(1, delay, max_in_flight, baseline_kib));
    let (_, after_single_kib) = rss_kib();
    let many = runtime.block_on(run_many(runs, delay, max_in_flight, after_single_kib));
    let (peak_kib, finished_kib) = rss_kib();
    let node_steps = many.node_millis.len();
    let engine_part: Vec<u64> = many
        .node_millis
        .iter()
        .map(|millis| millis.saturating_sub(delay.as_millis() as u64))
        .collect();
    println!(
        "scale: {runs} runs of 5 model nodes, model answering after {} ms, worker bound {max_in_flight}",
        delay.as_millis()
    );
    println!(
        "  submitted in           {:>10.2} s ({:.0} runs/s)",
        many.submit.as_secs_f64(),
        runs as f64 / many.submit.as_secs_f64()
    );
    println!(
        "  all completed in       {:>10.2} s (from the first submission)",
        many.wall.as_secs_f64()
    );
    println!(
        "  one run alone          {:>10.2} s",
        single.wall.as_secs_f64()
    );
    println!(
        "  ratio to one run       {:>10.2} x",
        many.wall.as_secs_f64() / single.wall.as_secs_f64()
    );
    println!(
        "  runs per second        {:>10.0}",
        runs as f64 / many.wall.as_secs_f64()
    );
    println!(
        "  node steps per second  {:>10.0}",
        node_steps as f64 / many.wall.as_secs_f64()
    );
    println!(
        "  node step p50 / p99    {:>6} / {} ms (model delay included)",
        percentile(&many.node_millis, 0.5),
        percentile(&many.node_millis, 0.99)
    );
    println!(
        "  engine part p50 / p99  {:>6} / {} ms (node step minus the model's delay)",
        percentile(&engine_part, 0.5),
        percentile(&engine_part, 0.99)
    );
    println!(
        "  peak RSS               {:>10.1} MiB",
        peak_kib as f64 / 1024.0
    );
    println!(
        "  RSS per run in flight  {:>10.1} KiB (peak while running, over the baseline, / runs)",
        many.peak_in_flight_kib as f64 / runs as f64
    );
    println!(
        "  RSS per finished run   {:>10.1} KiB (after, over the baseline, / runs; finished runs are kept)",
        finished_kib.saturating_sub(after_single_kib) as f64 / runs as f64
    );
    if std::env::args().any(|argument| argument == "--check-ceiling") {
        let ceiling_mib = memory_ceiling_mib();
        let peak_mib = peak_kib as f64 / 1024.0;
        if peak_mib > ceiling_mib {
            eprintln!(
                "scale: peak RSS {peak_mib:.1} MiB is over the ceiling of {ceiling_mib:.1} MiB (benches/scale_ceiling.json)"
            );
            std::process::exit(1);
        }
        println!("  under the ceiling      {ceiling_mib:>10.1} MiB");
    }
}

/// The peak RSS ceiling: `BATON_SCALE_CEILING_MIB`, else the checked-in
/// `benches/scale_ceiling.json`'s `peak_rss_mib`.
fn memory_ceiling_mib() -> f64 {
    if let Some(mib) = std::env::var("BATON_SCALE_CEILING_MIB")
        .ok()
        .and_then(|text| text.parse().ok())
    {
        return mib;
    }
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/scale_ceiling.json");
    let text = std::fs::read_to_string(path).unwrap();
    let ceiling: serde_json::Value = serde_json::from_str(&text).unwrap();
    ceiling["peak_rss_mib"].as_f64().unwrap()
}
