//! The real `api` binary under an emulated Lambda Runtime API: it fetches a
//! function-URL event (`events/lambda/api-list-capabilities.json`), runs it
//! through lambda_http and the shared router, and posts the HTTP response
//! back. The capability listing reads the tenant's registrations, so the
//! table lives in the moto server (DynamoDB emulated).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde_json::Value;
use tokio::sync::Notify;

#[derive(Clone, Default)]
struct Emulator {
    events: Arc<Mutex<Vec<Value>>>,
    responses: Arc<Mutex<Vec<Value>>>,
    responded: Arc<Notify>,
}

async fn next_invocation(State(emulator): State<Emulator>) -> impl IntoResponse {
    let event = loop {
        if let Some(event) = emulator.events.lock().unwrap().pop() {
            break event;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let mut headers = HeaderMap::new();
    headers.insert(
        "lambda-runtime-aws-request-id",
        "test-request".parse().unwrap(),
    );
    headers.insert(
        "lambda-runtime-deadline-ms",
        "4102444800000".parse().unwrap(),
    );
    headers.insert(
        "lambda-runtime-invoked-function-arn",
        "arn:aws:lambda:us-east-1:123456789012:function:api"
            .parse()
            .unwrap(),
    );
    (headers, axum::Json(event))
}

async fn invocation_response(
    State(emulator): State<Emulator>,
    UrlPath(_id): UrlPath<String>,
    body: String,
) -> &'static str {
    emulator
        .responses
        .lock()
        .unwrap()
        .push(serde_json::from_str(&body).unwrap_or(Value::Null));
    emulator.responded.notify_one();
    "{}"
}

async fn invoke(emulator: &Emulator, event: Value) -> Value {
    let before = emulator.responses.lock().unwrap().len();
    emulator.events.lock().unwrap().push(event);
    while emulator.responses.lock().unwrap().len() == before {
        tokio::time::timeout(Duration::from_secs(30), emulator.responded.notified())
            .await
            .expect("the function did not respond");
    }
    emulator.responses.lock().unwrap().last().cloned().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_api_function_serves_function_url_events() {
    let emulator = Emulator::default();
    let app = Router::new()
        .route("/2018-06-01/runtime/invocation/next", get(next_invocation))
        .route(
            "/2018-06-01/runtime/invocation/{id}/response",
            post(invocation_response),
        )
        .with_state(emulator.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let runtime_api = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let moto = moto_server::MotoServer::start().unwrap();
    let table = moto_server::unique_name("baton-api-function");
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    baton_aws::DynamoRunStore::new(&connection, &table)
        .create_table_if_missing()
        .await
        .unwrap();

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_api"))
        .current_dir(&root)
        .env("AWS_LAMBDA_RUNTIME_API", &runtime_api)
        .env("AWS_LAMBDA_FUNCTION_NAME", "api")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_ENDPOINT_URL", &moto.endpoint)
        .env("BATON_TABLE", &table)
        .env("BATON_QUEUE_URL", "http://127.0.0.1:9/queue")
        .env("BATON_LLM_BASE_URL", "http://127.0.0.1:9/v1")
        .env("BATON_LLM_MODEL", "unused")
        .env("BATON_REGISTRY_DIR", root.join("registry"))
        .env(
            "BATON_API_TOKENS",
            format!("local:{}", sha256_hex("local-dev-token")),
        )
        .env("BATON_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();

    let sample: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("events/lambda/api-list-capabilities.json")).unwrap(),
    )
    .unwrap();
    let listed = invoke(&emulator, sample.clone()).await;
    assert_eq!(listed["statusCode"], 200, "{listed}");
    let body: Value = serde_json::from_str(listed["body"].as_str().unwrap()).unwrap();
    assert!(body["capabilities"].as_array().unwrap().len() >= 11);

    let mut wrong_token = sample;
    wrong_token["headers"]["authorization"] = "Bearer not-the-token".into();
    let refused = invoke(&emulator, wrong_token).await;
    assert_eq!(refused["statusCode"], 401, "{refused}");

    let _ = child.kill();
    let _ = child.wait();
}

/// SHA-256 hex of `text`, as `BATON_API_TOKENS` expects (computed with the system tool to stay independent of the code under test).
fn sha256_hex(text: &str) -> String {
    let output = std::process::Command::new("python3")
        .args([
            "-c",
            "import hashlib,sys; print(hashlib.sha256(sys.argv[1].encode()).hexdigest())",
            text,
        ])
        .output()
        .unwrap();
    String::from_utf8(output.stdout).unwrap().trim().to_string()
}
