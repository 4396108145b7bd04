//! A step Lambda that dies between the event source mapping's receive and
//! its handler's first hold loses no run, and the queue is not what saves
//! it. Such a batch stays hidden for the queue's whole visibility timeout
//! (1,800 s as the template ships it): nothing in the queue brings it back
//! sooner. The sweeper does: an outbox entry quiet for two node leases
//! with no live lease in its run is re-sent, and the commit protocol makes
//! a duplicate harmless.
//!
//! The real `step` binary runs in emulated execution environments (see
//! `emulated_lambda`); DynamoDB and SQS come from moto with the queue,
//! redrive policy, node lease and timeouts the template ships; the
//! scripted OpenAI-compatible server stands in for the model. Up to three
//! times (the first always; the others while runs are under way),
//! an environment dies right after a batch was received for it, before its
//! handler runs, and a fresh one takes its place. The sweeper's use case
//! runs in this process as the `sweeper` function runs it (the same
//! `OutboxSweeper` over the same table and queue), on the template's
//! schedule (every minute) and with its `BATON_SWEEP_AFTER_SECONDS`; the
//! built function itself is started by `infra/check-deploy.sh`.
//!
//! Every run completes exactly once within two leases and one sweeper
//! period (plus 60 s for the steps left) of the last death, far inside the
//! visibility timeout, and the lost records are still hidden in the queue
//! at the end.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod emulated_lambda;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use baton_runtime::clock::SystemClock;
use baton_runtime::ports::{RunStore, StepQueue};
use baton_runtime::services::OutboxSweeper;
use emulated_lambda::{
    DeathsAfterReceive, Fleet, Slot, api_services, poll_for, step_function_environment,
    wait_until_all_complete,
};
use moto_server::{MotoServer, unique_name};
use scripted_llm::{Behavior, ScriptedLlmServer};
use serde_json::Value;

const RUNS: usize = 20;
const ENVIRONMENTS: usize = 3;
/// Environments that die after a receive, before their first hold.
const DEATHS: usize = 3;

#[tokio::test(flavor = "multi_thread")]
async fn runs_whose_batch_died_before_its_first_hold_are_re_driven_by_the_sweeper() {
    let moto = MotoServer::start().unwrap();
    let configuration = moto.sdk_configuration().await;
    let table = unique_name("baton-before-hold");
    let queue = moto_server::create_shipped_step_queue(&configuration, "baton-before-hold")
        .await
        .unwrap();
    let timings = queue.timings;
    let services = api_services(&moto, &table, &queue).await;
    let model = ScriptedLlmServer::start().await.unwrap();
    // Slow enough that runs are still under way when the later deaths come.
    model.set_default_behavior(Behavior::SlowValid { delay_ms: 1_500 });
    let function_environment = step_function_environment(&moto, &table, &queue, &model);
    let fleet = Arc::new(Fleet {
        function_environment,
        log: std::env::temp_dir().join(format!("{}.log", unique_name("baton-before-hold"))),
    });

    // The sweeper, as the `sweeper` function runs it, every period.
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let sweeper_store: Arc<dyn RunStore> =
        Arc::new(baton_aws::DynamoRunStore::new(&connection, &table));
    let sweeper_queue: Arc<dyn StepQueue> = Arc::new(baton_aws::SqsStepQueue::new(
        &connection,
        queue.queue_url.clone(),
    ));
    let sweeper = OutboxSweeper::new(sweeper_store, sweeper_queue, Arc::new(SystemClock));
    let sweep_after = Duration::from_secs(timings.sweep_after_seconds.into());
    let sweeper_every = Duration::from_secs(timings.sweeper_every_seconds.into());
    let stop = Arc::new(AtomicBool::new(false));
    let resent_by_sweeper = Arc::new(AtomicUsize::new(0));
    let sweeping = {
        let (stop, resent) = (stop.clone(), resent_by_sweeper.clone());
        tokio::spawn(async move {
            let mut every = tokio::time::interval_at(
                tokio::time::Instant::now() + sweeper_every,
                sweeper_every,
            );
            while !stop.load(Ordering::SeqCst) {
                every.tick().await;
                let swept = sweeper.sweep(sweep_after, 1_000).await.unwrap();
                resent.fetch_add(swept.resent, Ordering::SeqCst);
                eprintln!("sweeper tick: {swept:?}");
            }
        })
    };

    let deaths = DeathsAfterReceive {
        pending: Arc::new(AtomicUsize::new(1)),
        records_lost: Arc::new(AtomicUsize::new(0)),
        fleet: fleet.clone(),
    };
    let sqs = aws_sdk_sqs::Client::new(&configuration);
    let mut slots: Vec<Slot> = Vec::new();
    let mut pollers = Vec::new();
    for _ in 0..ENVIRONMENTS {
        let slot: Slot = Arc::new(Mutex::new(Some(fleet.start().await)));
        pollers.push(tokio::spawn(poll_for(
            slot.clone(),
            sqs.clone(),
            queue.queue_url.clone(),
            stop.clone(),
            Some(deaths.clone()),
        )));
        slots.push(slot);
    }

    let envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    let mut run_ids = Vec::new();
    for _ in 0..RUNS {
        run_ids.push(services.runs.submit("t", &envelope).await.unwrap().run_id);
    }
    // The first death takes a batch of first steps; the others, armed at
    // once, take the next batches, of runs under way. Whatever has not
    // struck within 20 s is disarmed: a re-sent step must not die too (that
    // is a second stall, with twice the wait).
    let armed_at = Instant::now();
    while deaths.pending.load(Ordering::SeqCst) > 0 {
        assert!(
            armed_at.elapsed() < Duration::from_secs(60),
            "no batch was ever received"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    deaths.pending.store(DEATHS - 1, Ordering::SeqCst);
    let later = Instant::now();
    while deaths.pending.load(Ordering::SeqCst) > 0 && later.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let deaths_struck = DEATHS - deaths.pending.swap(0, Ordering::SeqCst);
    let records_lost = deaths.records_lost.load(Ordering::SeqCst);
    eprintln!(
        "{deaths_struck} environments died between receive and hold, {records_lost} records with them, {:.1} s after the first submission",
        armed_at.elapsed().as_secs_f64()
    );

    // Two leases of quiet, then the sweeper's next tick, then the steps
    // left: far inside the queue's visibility timeout.
    let limit = sweep_after + sweeper_every + Duration::from_secs(60);
    assert!(limit < Duration::from_secs(timings.queue_visibility_seconds.into()));
    let took = wait_until_all_complete(&services, &run_ids, limit).await;
    let resent = resent_by_sweeper.load(Ordering::SeqCst);
    eprintln!(
        "every run completed {} ms after the last death (limit {} s; the sweeper re-sent {resent}; {} model requests)",
        took.as_millis(),
        limit.as_secs(),
        model.request_count()
    );
    assert!(
        resent >= 1,
        "the sweeper re-drove the stalled runs (it re-sent nothing)"
    );
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
    // The lost records never came back: the queue still hides them.
    let attributes = sqs
        .get_queue_attributes()
        .queue_url(&queue.queue_url)
        .attribute_names(
            aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
        )
        .send()
        .await
        .unwrap();
    let hidden: usize = attributes
        .attributes()
        .and_then(|attributes| {
            attributes
                .get(&aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        })
        .and_then(|count| count.parse().ok())
        .unwrap_or(0);
    assert!(
        hidden >= records_lost,
        "the {records_lost} records received before the deaths are still hidden ({hidden} are): \
         the runs completed without them"
    );

    baton_test_support::crash_checks::record_figures(
        "step-lambda-death-between-receive-and-hold",
        serde_json::json!({
            "store": "DynamoDB + SQS (moto)",
            "path": "step Lambda (emulated Runtime API and event source mapping), sweeper on the template's schedule",
            "fault": format!("{deaths_struck} environments dead after a receive, before their first hold ({records_lost} records hidden for the queue's {} s)", timings.queue_visibility_seconds),
            "runs": RUNS,
            "recoveryMs": took.as_millis() as u64,
            "recoveryLimitMs": limit.as_millis() as u64,
            "resentBySweeper": resent,
            "modelRequests": model.request_count(),
            "checks": baton_test_support::crash_checks::EXACTLY_ONCE_HISTORY_CHECKS,
        }),
    );
    stop.store(true, Ordering::SeqCst);
    sweeping.abort();
    for poller in pollers {
        let _ = poller.await;
    }
    for slot in slots {
        if let Some(environment) = slot.lock().unwrap().take() {
            environment.kill();
        }
    }
    let _ = std::fs::remove_file(&fleet.log);
}
