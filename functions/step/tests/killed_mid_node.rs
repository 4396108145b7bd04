//! A step Lambda killed mid-node loses no run. The real `step` binary runs
//! as Lambda runs it: each execution environment is one process with its
//! own Runtime API (emulated here: `next` hands out an invocation, the
//! function posts its response), and the SQS event source mapping is
//! emulated by one poller per environment that receives batches of up to
//! 10 (the template's `BatchSize`), invokes, and deletes every record the
//! response does not report failed. DynamoDB and SQS come from moto, with
//! the queue, redrive policy, node lease, model timeout and function
//! timeout the template ships (`infra/template.yaml`'s `Timeouts`); the
//! scripted OpenAI-compatible server stands in for the model.
//!
//! Three environments serve 30 runs; five times, one of them is SIGKILLed
//! while it holds a batch mid-node, and a fresh one takes its place (as
//! Lambda starts a new environment). Every run completes exactly once
//! within 90 s of the last restart: the dead environment's records come
//! back within one node lease (the handler holds each record one lease at
//! a time), not after the queue's 1,800 s visibility timeout.
//!
//! The Runtime API and the poller are test doubles of the Lambda service;
//! the function, the store and the queue are the real ones.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod emulated_lambda;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use emulated_lambda::{
    Environment, Slot, api_services, poll_for, step_function_environment, wait_until_all_complete,
};
use moto_server::{MotoServer, unique_name};
use scripted_llm::{Behavior, ScriptedLlmServer};
use serde_json::Value;

const RUNS: usize = 30;
const KILLS: usize = 5;
const ENVIRONMENTS: usize = 3;

#[tokio::test(flavor = "multi_thread")]
async fn runs_survive_step_lambdas_sigkilled_mid_node() {
    let moto = MotoServer::start().unwrap();
    let configuration = moto.sdk_configuration().await;
    let table = unique_name("baton-step-kill");
    let queue = moto_server::create_shipped_step_queue(&configuration, "baton-step-kill")
        .await
        .unwrap();
    let services = api_services(&moto, &table, &queue).await;
    let model = ScriptedLlmServer::start().await.unwrap();
    model.set_default_behavior(Behavior::SlowValid { delay_ms: 4_000 });
    let function_environment = step_function_environment(&moto, &table, &queue, &model);
    let log = std::env::temp_dir().join(format!("{}.log", unique_name("baton-step-kill")));

    let stop = Arc::new(AtomicBool::new(false));
    let sqs = aws_sdk_sqs::Client::new(&configuration);
    let mut slots: Vec<Slot> = Vec::new();
    let mut pollers = Vec::new();
    for _ in 0..ENVIRONMENTS {
        let slot: Slot = Arc::new(Mutex::new(Some(
            Environment::start(&function_environment, &log).await,
        )));
        pollers.push(tokio::spawn(poll_for(
            slot.clone(),
            sqs.clone(),
            queue.queue_url.clone(),
            stop.clone(),
            None,
        )));
        slots.push(slot);
    }

    let envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    let mut run_ids = Vec::new();
    for _ in 0..RUNS {
        run_ids.push(services.runs.submit("t", &envelope).await.unwrap().run_id);
    }

    for kill in 0..KILLS {
        let slot = &slots[kill % ENVIRONMENTS];
        // Mid-node: the environment has held a batch for over a second
        // (its records are held and its model calls, 4 s each, under way).
        let waiting_since = Instant::now();
        loop {
            let running_for = slot
                .lock()
                .unwrap()
                .as_ref()
                .and_then(|environment| environment.api.running_for());
            if running_for.is_some_and(|running| running > Duration::from_millis(1_500)) {
                break;
            }
            assert!(
                waiting_since.elapsed() < Duration::from_secs(120),
                "kill {kill}: environment {} was never mid-invocation; log: {}",
                kill % ENVIRONMENTS,
                log.display()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut ended = 0;
        for run_id in &run_ids {
            let status = services
                .runs
                .load("t", run_id)
                .await
                .unwrap()
                .unwrap()
                .state
                .status();
            if status.is_terminal() {
                ended += 1;
            }
        }
        assert!(
            ended <= RUNS / 2,
            "kill {kill} would find most runs already ended, proving little: {ended} of {RUNS}"
        );
        let dead = slot.lock().unwrap().take().unwrap();
        dead.kill();
        eprintln!(
            "kill {kill}: environment {} SIGKILLed mid-node; {ended} of {RUNS} runs ended; {} model requests so far",
            kill % ENVIRONMENTS,
            model.request_count()
        );
        let fresh = Environment::start(&function_environment, &log).await;
        *slot.lock().unwrap() = Some(fresh);
    }
    // Within 90 s of the last restart: what the dead environments held is
    // back within one lease (30 s), not the queue's 1,800 s.
    model.set_default_behavior(Behavior::SlowValid { delay_ms: 200 });
    let took = wait_until_all_complete(&services, &run_ids, Duration::from_secs(90)).await;
    eprintln!(
        "every run completed {} ms after the last restart ({} model requests in all)",
        took.as_millis(),
        model.request_count()
    );
    let recovered_in = took;
    for run_id in &run_ids {
        let frames: Vec<Value> = services
            .runs
            .read_all_events_after("t", run_id, 0)
            .await
            .unwrap()
            .iter()
            .map(|frame| serde_json::to_value(frame).unwrap())
            .collect();
        baton_test_support::crash_checks::assert_completed_exactly_once(run_id, &frames);
    }
    baton_test_support::crash_checks::record_figures(
        "step-lambda-sigkill-mid-node",
        serde_json::json!({
            "store": "DynamoDB + SQS (moto)",
            "path": "step Lambda (emulated Runtime API and event source mapping)",
            "fault": format!("{KILLS} SIGKILLs of an execution environment holding a batch mid-node"),
            "runs": RUNS,
            "recoveryMs": recovered_in.as_millis() as u64,
            "recoveryLimitMs": 90_000,
            "modelRequests": model.request_count(),
            "checks": baton_test_support::crash_checks::EXACTLY_ONCE_HISTORY_CHECKS,
        }),
    );
    stop.store(true, Ordering::SeqCst);
    for poller in pollers {
        let _ = poller.await;
    }
    for slot in slots {
        if let Some(environment) = slot.lock().unwrap().take() {
            environment.kill();
        }
    }
    let _ = std::fs::remove_file(&log);
}
