//! Tool calls as the registry defines them, against a real local HTTP
//! server standing in for a tool endpoint (allow-listed, as for local
//! development): the URL template filled and encoded, the rest of the
//! arguments as the query or the JSON body, the credential from a named
//! variable reaching the server and never the outcome, the idempotency key
//! sent, errors the model can read; and the read-only registry search.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use baton_core::catalog::registry::Registry;
use baton_core::catalog::tools::ToolDefinition;
use baton_tools::{ToolCall, ToolOutcome, ToolRunner};
use serde_json::{Value, json};

/// What the tool endpoint saw.
#[derive(Default, Clone)]
struct Seen(Arc<Mutex<Vec<Value>>>);

async fn endpoint() -> (u16, Seen) {
    let seen = Seen::default();
    let app = Router::new()
        .route(
            "/items/{item}",
            get(
                |State(seen): State<Seen>, Path(item): Path<String>, RawQuery(query): RawQuery, headers: HeaderMap| async move {
                    seen.0.lock().unwrap().push(json!({
                        "item": item, "query": query,
                        "authorization": headers.get("authorization").and_then(|v| v.to_str().ok()),
                        "idempotencyKey": headers.get("idempotency-key").and_then(|v| v.to_str().ok()),
                    }));
                    axum::Json(json!({"found": item}))
                },
            ),
        )
        .route(
            "/notes",
            post(|State(seen): State<Seen>, body: Bytes| async move {
                let body: Value = serde_json::from_slice(&body).unwrap();
                seen.0.lock().unwrap().push(body);
                "stored"
            }),
        )
        .route(
            "/broken",
            get(|| async { (StatusCode::BAD_GATEWAY, "upstream down") }),
        )
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (port, seen)
}

fn tool(definition: Value) -> ToolDefinition {
    let tool: ToolDefinition = serde_json::from_value(definition).unwrap();
    tool.check().unwrap();
    tool
}

fn call(arguments: Value) -> ToolCall {
    ToolCall {
        call_id: "call_1".into(),
        arguments,
        idempotency_key: "run_1:node_1:2:call_1".into(),
    }
}

fn runner(allowed: &str) -> ToolRunner {
    // The variables this test's tools may read (a test double for the process environment).
    ToolRunner::new(
        Arc::new(Registry::default()),
        allowed,
        Arc::new(|name| (name == "ITEMS_TOKEN").then(|| "s3cr3t-value".to_string())),
    )
}

#[tokio::test]
async fn an_http_tool_fills_its_url_sends_its_credential_and_its_idempotency_key() {
    let (port, seen) = endpoint().await;
    let lookup = tool(json!({
        "name": "item_lookup", "description": "Looks an item up.",
        "parameters": {"type": "object", "properties": {"item": {"type": "string"}, "fields": {"type": "string"}, "limit": {"type": "integer"}}},
        "executor": {"kind": "http", "method": "GET", "url": format!("http://127.0.0.1:{port}/items/{{item}}"),
                     "headers": {"Authorization": {"env": "ITEMS_TOKEN", "prefix": "Bearer "}}}
    }));
    let outcome = runner("127.0.0.1")
        .run(
            &lookup,
            &call(json!({"item": "a b/c", "fields": "name", "limit": 3})),
        )
        .await;
    assert_eq!(outcome, ToolOutcome::Succeeded(json!({"found": "a b/c"})));
    let request = seen.0.lock().unwrap()[0].clone();
    assert_eq!(request["authorization"], "Bearer s3cr3t-value");
    assert_eq!(request["idempotencyKey"], "run_1:node_1:2:call_1");
    assert_eq!(request["query"], "fields=name&limit=3");

    // A credential that is not there fails naming the variable, never a value.
    let missing = tool(json!({
        "name": "item_lookup", "description": "Looks an item up.",
        "parameters": {"type": "object", "properties": {"item": {"type": "string"}}},
        "executor": {"kind": "http", "method": "GET", "url": format!("http://127.0.0.1:{port}/items/{{item}}"),
                     "headers": {"Authorization": {"env": "OTHER_TOKEN"}}}
    }));
    match runner("127.0.0.1")
        .run(&missing, &call(json!({"item": "x"})))
        .await
    {
        ToolOutcome::Failed { message, retryable } => {
            assert!(message.contains("OTHER_TOKEN") && !retryable, "{message}");
        }
        other => panic!("{other:?}"),
    }
    let unfilled = runner("127.0.0.1").run(&lookup, &call(json!({}))).await;
    assert!(matches!(unfilled, ToolOutcome::Failed { message, .. } if message.contains("`item`")));
}

#[tokio::test]
async fn a_post_tool_sends_its_arguments_as_json_and_errors_say_if_a_retry_may_help() {
    let (port, seen) = endpoint().await;
    let store = tool(json!({
        "name": "note_store", "description": "Stores a note.",
        "parameters": {"type": "object", "properties": {"title": {"type": "string"}, "tags": {"type": "array"}}},
        "executor": {"kind": "http", "method": "POST", "url": format!("http://127.0.0.1:{port}/notes")}
    }));
    let stored = runner("127.0.0.1")
        .run(&store, &call(json!({"title": "t", "tags": ["a", "b"]})))
        .await;
    assert_eq!(stored, ToolOutcome::Succeeded(json!({"text": "stored"})));
    assert_eq!(
        seen.0.lock().unwrap()[0],
        json!({"title": "t", "tags": ["a", "b"]})
    );
    let broken = tool(json!({
        "name": "broken", "description": "Fails.", "parameters": {"type": "object"},
        "executor": {"kind": "http", "method": "GET", "url": format!("http://127.0.0.1:{port}/broken")}
    }));
    assert_eq!(
        runner("127.0.0.1").run(&broken, &call(json!({}))).await,
        ToolOutcome::Failed {
            message: "HTTP 502: upstream down".into(),
            retryable: true
        }
    );
    // Without the allow-list the same endpoint is refused (http, loopback).
    match runner("").run(&broken, &call(json!({}))).await {
        ToolOutcome::Failed { message, retryable } => {
            assert!(
                message.contains("http to `127.0.0.1` is not allowed") && !retryable,
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn the_registry_search_builtin_reads_the_registry() {
    let registry = Registry::default();
    let search = tool(json!({
        "name": "registry_search", "description": "Searches the registry.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
        "executor": {"kind": "builtin", "operation": "registry_search"}
    }));
    let outcome = ToolRunner::new(Arc::new(registry), "", Arc::new(|_| None))
        .run(&search, &call(json!({"query": "anything"})))
        .await;
    assert_eq!(
        outcome,
        ToolOutcome::Succeeded(
            json!({"query": "anything", "total": 0, "matches": [], "searchedBy": "words"})
        )
    );
}
