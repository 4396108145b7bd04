//! Scale over emulated AWS: N runs submitted at once on the DynamoDB store
//! and the SQS queue (moto), each the five-node linear plan of the runtime's
//! `scale` bench, against the scripted OpenAI-compatible server (the test
//! double for the model endpoint) answering after a delay; one worker
//! process (`run_worker_with_bound`) does every step.
//!
//! Prints wall time, runs and node steps per second, and p50/p99 of a node
//! step (model delay included). The emulator, one Python process, is what
//! bounds this figure: it says that the path holds at this scale (every run
//! completes once, over the real adapters), not what AWS would do.
//!
//! `BATON_SCALE_RUNS`, `BATON_SCALE_MODEL_DELAY_MS`, and
//! `BATON_SCALE_MAX_IN_FLIGHT` (the worker's bound on steps in flight; the
//! default lets every run's step wait at once, which the one-process
//! emulator answers one request at a time).
//!
//!   cargo bench -p baton-aws --bench scale_moto
//!
//! `BATON_SCALE_RUNS` (default 1,000) and `BATON_SCALE_MODEL_DELAY_MS`
//! (default 200). Needs `moto_server` on the PATH (`pip install "moto[server]"`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench code

use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_aws::{DynamoRunStore, SqsStepQueue};
use baton_core::basics::ids::RunKey;
use baton_core::state::run::RunStatus;
use baton_llm::{OpenAiCompatibleConfig, OpenAiCompatibleProvider};
use baton_runtime::ports::{RunStore, StepQueue};
use baton_test_support::TestServices;
use baton_test_support::five_stages::{five_stage_envelope, five_stage_registry};
use moto_server::{MotoServer, unique_name};
use scripted_llm::{Behavior, ScriptedLlmServer};

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[u64], share: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() as f64 - 1.0) * share).round() as usize]
}

fn main() {
    let runs = usize::try_from(setting("BATON_SCALE_RUNS", 1_000)).unwrap();
    let delay_ms = setting("BATON_SCALE_MODEL_DELAY_MS", 200);
    let max_in_flight = usize::try_from(setting(
        "BATON_SCALE_MAX_IN_FLIGHT",
        baton_runtime::workers::DEFAULT_MAX_STEPS_IN_FLIGHT as u64,
    ))
    .unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let moto = MotoServer::start().unwrap();
        let configuration = moto.sdk_configuration().await;
        let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
        let store = DynamoRunStore::new(&connection, unique_name("baton-scale"));
        store.create_table_if_missing().await.unwrap();
        let queue_url = moto_server::create_unique_queue(&configuration, "baton-scale-steps", Some(60))
            .await
            .unwrap();
        let store: Arc<dyn RunStore> = Arc::new(store);
        let queue: Arc<dyn StepQueue> = Arc::new(SqsStepQueue::new(&connection, queue_url));
        let model = ScriptedLlmServer::start().await.unwrap();
        model.set_default_behavior(Behavior::SlowValid { delay_ms });
        let provider = OpenAiCompatibleProvider::new(OpenAiCompatibleConfig::new(
            model.base_url(),
            "scripted",
            None,
        ))
        .unwrap();
        let services = TestServices::with_model(Arc::new(provider))
            .registry(Arc::new(five_stage_registry(&|role| format!("Act as the {role}."))))
            .store(store.clone())
            .queue(queue.clone())
            .worker_id("scale-moto")
            .build()
            .services;
        let envelope = five_stage_envelope();
        let started = Instant::now();
        let mut run_ids = Vec::with_capacity(runs);
        for _ in 0..runs {
            run_ids.push(services.runs.submit("scale", &envelope).await.unwrap().run_id);
        }
        let submitted = started.elapsed();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let worker = tokio::spawn(baton_runtime::workers::run_worker_with_bound(
            services.steps.clone(),
            queue.clone(),
            async {
                let _ = stopped.await;
            },
            max_in_flight,
        ));
        // Every run's five model calls were made: then look at the runs.
        while model.request_count() < runs * 5 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            assert!(
                started.elapsed() < Duration::from_secs(3_600),
                "{} of {} model calls after an hour",
                model.request_count(),
                runs * 5
            );
        }
        let mut pending = run_ids.clone();
        while !pending.is_empty() {
            let mut still = Vec::new();
            for run_id in pending {
                let stored = store.load_run(RunKey::new("scale", &run_id)).await.unwrap().unwrap();
                if !stored.state.status().is_settled() {
                    still.push(run_id);
                }
            }
            pending = still;
            if !pending.is_empty() {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        let wall = started.elapsed();
        let _ = stop.send(());
        worker.await.unwrap();
        let mut node_millis = Vec::new();
        for run_id in &run_ids {
            let stored = store.load_run(RunKey::new("scale", run_id)).await.unwrap().unwrap();
            assert_eq!(stored.state.status(), RunStatus::Completed, "{run_id}");
            for frame in services
                .runs
                .read_all_events_after("scale", run_id, 0)
                .await
                .unwrap()
            {
                if frame.event_type.as_str() == "node_complete"
                    && let Some(millis) = frame.payload.as_ref().and_then(|p| p["durationMs"].as_u64())
                {
                    node_millis.push(millis);
                }
            }
        }
        node_millis.sort_unstable();
        assert_eq!(node_millis.len(), runs * 5, "one node_complete per node");
        println!("scale over moto: {runs} runs of 5 model nodes, model answering after {delay_ms} ms, one worker, at most {max_in_flight} steps in flight");
        println!("  submitted in           {:>10.2} s", submitted.as_secs_f64());
        println!("  all completed in       {:>10.2} s", wall.as_secs_f64());
        println!("  runs per second        {:>10.1}", runs as f64 / wall.as_secs_f64());
        println!("  node steps per second  {:>10.1}", node_millis.len() as f64 / wall.as_secs_f64());
        println!("  node step p50 / p99    {:>6} / {} ms (model delay included)", percentile(&node_millis, 0.5), percentile(&node_millis, 0.99));
        println!("  model calls            {:>10} (5 per run: none repeated)", model.request_count());
    });
}
