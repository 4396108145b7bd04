//! Humans in the loop end to end, on each store `baton serve` offers: the
//! real binary, its HTTP API and its in-process worker, over memory, SQLite
//! and DynamoDB with SQS (the moto server). The same scenarios run on each
//! (`serve_support::people`); the scripted OpenAI-compatible server stands
//! in for the model.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod serve_support;

use moto_server::MotoServer;
use scripted_llm::ScriptedLlmServer;
use serve_support::people::{People, every_scenario, registry_with_a_clarifying_capability};
use serve_support::{dynamodb_environment, model_environment, start_serve};

async fn scenarios_on(store: &str, mut environment: Vec<(String, String)>) {
    let model = ScriptedLlmServer::start().await.unwrap();
    environment.extend(model_environment(&model));
    let folder = tempfile::tempdir().unwrap();
    let registry = registry_with_a_clarifying_capability(folder.path());
    let store = store.replace("{folder}", &folder.path().display().to_string());
    let serve = start_serve(
        &["--store", &store, "--registry", registry.to_str().unwrap()],
        &environment,
    )
    .await;
    let people = People {
        base: &serve.base,
        model: &model,
        client: reqwest::Client::new(),
    };
    every_scenario(&people).await;
    serve.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn people_in_the_loop_on_the_memory_store() {
    scenarios_on("memory", Vec::new()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn people_in_the_loop_on_sqlite() {
    scenarios_on("sqlite:{folder}/runs.sqlite3", Vec::new()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn people_in_the_loop_on_dynamodb_and_sqs() {
    let moto = MotoServer::start().unwrap();
    let environment = dynamodb_environment(&moto).await;
    scenarios_on("dynamodb", environment).await;
}
