//! A served evaluation on the Lambda functions' terms: no process lives
//! long enough to wait on it. The API's port (`served_by_passes`, what
//! the `api` function serves) keeps it in DynamoDB and runs its first
//! pass in the accepting request; then the sweeper's passes
//! (`EvaluationPasses::SWEEPER_FUNCTION`, what the `sweeper` function runs
//! each time its schedule fires) take it to its end. DynamoDB and SQS come
//! from moto, with the step queue the template ships; a step worker in
//! this process stands in for the step function, and the scripted
//! OpenAI-compatible server stands in for the model (judges score 8 by a
//! prompt rule). The built functions are started by
//! `infra/check-deploy.sh`, which posts an evaluation to the built `api`.
//!
//! Shown: the first pass started the first examples (their run ids are in
//! the record at once); the sweeper's invocations, one a minute as the
//! template schedules them, complete the evaluation with one run per
//! example and one panel run per judged example, each judged 8 (the
//! third example's assertion fails: the template asks for two variants);
//! the record and request are in the table.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_aws::{DynamoRunStore, SqsStepQueue};
use baton_evaluation::served::EvaluationStatus;
use baton_llm::{OpenAiCompatibleConfig, OpenAiCompatibleProvider};
use baton_runtime::clock::SystemClock;
use baton_runtime::ports::StepQueue;
use baton_runtime::ports::evaluation_ports::EvaluationRecords;
use baton_runtime::services::RunRetention;
use baton_runtime::services::dataset_evaluations::{DatasetEvaluations, EvaluationPasses};
use baton_test_support::TestServices;
use moto_server::{MotoServer, unique_name};
use scripted_llm::{PromptRule, ScriptedLlmServer};
use serde_json::{Value, json};

fn read_json(relative: &str) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(baton_test_support::repository_path(relative)).unwrap(),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_served_evaluation_completes_by_the_sweepers_passes() {
    let moto = MotoServer::start().unwrap();
    let configuration = moto.sdk_configuration().await;
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let table = unique_name("baton-evaluation-passes");
    let store = Arc::new(DynamoRunStore::new(&connection, &table));
    store.create_table_if_missing().await.unwrap();
    let shipped = moto_server::create_shipped_step_queue(&configuration, "baton-eval-passes")
        .await
        .unwrap();
    let sweeper_every = Duration::from_secs(shipped.timings.sweeper_every_seconds.into());
    let queue: Arc<dyn StepQueue> = Arc::new(SqsStepQueue::new(&connection, shipped.queue_url));
    let model = ScriptedLlmServer::start().await.unwrap();
    model.add_prompt_rule(PromptRule {
        contains: "Score the content from 0 (worst) to 10 (best)".into(),
        pointer: "/score".into(),
        values: vec![json!(8.0)],
    });
    let provider = OpenAiCompatibleProvider::new(OpenAiCompatibleConfig::new(
        model.base_url(),
        "scripted",
        None,
    ))
    .unwrap();
    let built = TestServices::with_model(Arc::new(provider))
        .store(store.clone())
        .queue(queue.clone())
        .threads(store.clone())
        .worker_id("evaluation-passes")
        .build();
    let services = built.services;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = tokio::spawn(baton_runtime::workers::run_worker_until(
        services.steps.clone(),
        queue,
        async move {
            let _ = stopped.await;
        },
    ));

    let records: Arc<dyn EvaluationRecords> = Arc::new(DynamoRunStore::new(&connection, &table));
    let evaluations = Arc::new(DatasetEvaluations::new(
        records.clone(),
        services.runs.clone(),
        services.capabilities.registry().clone(),
        Ok(()),
        Arc::new(SystemClock),
        RunRetention::default(),
    ));
    let api = baton_bootstrap::evaluations::served_by_passes(evaluations.clone());
    let body = json!({
        "name": "variants",
        "template": read_json("registry/examples/seed-10.0.1-stream-contract-variants.json"),
        "judges": read_json("registry/examples/datasets/copy-judges.json"),
        "concurrency": 2,
        "dataset": [
            {"id": "as-shipped", "inputs": {}, "expect": {"assertions": [{"!!": [{"var": "copyVariants.1.callToAction"}]}], "minJudgeScore": 7}},
            {"id": "hiring", "inputs": {"goal": "attract_new_employees"}},
            {"id": "three", "inputs": {}, "expect": {"assertions": [{"!!": [{"var": "copyVariants.2"}]}]}}
        ]
    });
    let accepted = api.start("acme", &body).await.unwrap();
    assert_eq!(accepted.status, EvaluationStatus::Running);
    let evaluation_id = accepted.evaluation_id.clone();
    let after_first_pass = api.get("acme", &evaluation_id).await.unwrap();
    assert_eq!(
        after_first_pass
            .in_flight
            .iter()
            .map(|flight| flight.id.as_str())
            .collect::<Vec<_>>(),
        ["as-shipped", "hiring"],
        "the accepting request's pass started the first two examples: {after_first_pass:?}"
    );

    // The sweeper's invocations, a minute apart as the template schedules
    // them; the first comes right after the evaluation was accepted.
    let started = Instant::now();
    let mut invocations = 0;
    let record = loop {
        invocations += 1;
        let report = EvaluationPasses::SWEEPER_FUNCTION
            .run(&evaluations)
            .await
            .unwrap();
        eprintln!(
            "sweeper invocation {invocations} at {:.1} s: {report:?}",
            started.elapsed().as_secs_f64()
        );
        let record = api.get("acme", &evaluation_id).await.unwrap();
        if record.status != EvaluationStatus::Running {
            break record;
        }
        assert!(
            invocations < 5,
            "five sweeper invocations did not end the evaluation: {record:?}"
        );
        tokio::time::sleep(sweeper_every.saturating_sub(EvaluationPasses::SWEEPER_FUNCTION.budget))
            .await;
    };
    eprintln!(
        "the evaluation completed in {invocations} sweeper invocation(s), {:.1} s after it was accepted",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(record.status, EvaluationStatus::Completed, "{record:?}");
    assert_eq!((record.total, record.finished), (3, 3));
    assert!(record.in_flight.is_empty(), "{record:?}");
    assert!(record.summary.is_some());
    for result in &record.results {
        assert_eq!(result.status.as_deref(), Some("completed"), "{result:?}");
        let judged = result
            .judge
            .as_ref()
            .expect("every completed example is judged");
        assert!((judged.score - 8.0).abs() < 1e-9, "{result:?}");
        // The template asks for two variants: a third is not there.
        assert_eq!(result.passed, result.id != "three", "{result:?}");
    }
    assert_eq!(record.passed, 2);

    // One run per example and one panel run per example, nothing twice.
    let listed = services
        .runs
        .list(
            "acme",
            &baton_core::state::listing::RunListQuery {
                status: None,
                limit: 50,
                cursor: None,
                forked_from: None,
            },
        )
        .await
        .unwrap();
    eprintln!("{} runs of the tenant", listed.runs.len());
    assert_eq!(
        listed.runs.len(),
        6,
        "three examples and three panels: {listed:?}"
    );
    assert!(
        records
            .get_request("acme", &evaluation_id)
            .await
            .unwrap()
            .is_some()
    );

    let _ = stop.send(());
    worker.await.unwrap();
}
