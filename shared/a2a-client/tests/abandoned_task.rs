//! A call abandoned before the agent's stream ended cancels the remote
//! task. The agent is a test double (an axum server speaking the A2A 1.0
//! JSON-RPC binding): its card, a stream that names its task and never
//! ends, and `CancelTask`, which it records.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use baton_a2a_client::RemoteAgents;
use baton_core::contracts::model_request::ModelTarget;
use baton_core::state::context::ModelRequest;
use baton_runtime::ports::LlmProvider;
use futures_util::StreamExt;
use serde_json::{Value, json};

#[derive(Clone, Default)]
struct Agent {
    cancelled: Arc<Mutex<Vec<String>>>,
    base: Arc<Mutex<String>>,
}

async fn card(State(agent): State<Agent>) -> Json<Value> {
    let base = agent.base.lock().unwrap().clone();
    Json(json!({
        "name": "slow agent",
        "supportedInterfaces": [{"url": format!("{base}/rpc"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
    }))
}

async fn rpc(State(agent): State<Agent>, Json(request): Json<Value>) -> Response {
    match request["method"].as_str() {
        Some("SendStreamingMessage") => {
            let first = json!({"jsonrpc": "2.0", "id": request["id"], "result": {"task": {
                "id": "remote-task-1", "contextId": "context-1", "status": {"state": "TASK_STATE_WORKING"}}}});
            let events = futures_util::stream::once(async move {
                Ok::<_, std::convert::Infallible>(Event::default().data(first.to_string()))
            })
            .chain(futures_util::stream::pending());
            Sse::new(events).into_response()
        }
        Some("CancelTask") => {
            let id = request["params"]["id"].as_str().unwrap_or_default().to_string();
            agent.cancelled.lock().unwrap().push(id.clone());
            Json(json!({"jsonrpc": "2.0", "id": request["id"], "result": {"id": id, "status": {"state": "TASK_STATE_CANCELED"}}}))
                .into_response()
        }
        _ => Json(json!({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "no such method"}})).into_response(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_abandoned_call_cancels_the_remote_task() {
    let agent = Agent::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    *agent.base.lock().unwrap() = base.clone();
    let app = axum::Router::new()
        .route("/.well-known/agent-card.json", get(card))
        .route("/rpc", post(rpc))
        .with_state(agent.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let agents = RemoteAgents::new("127.0.0.1");
    let request = ModelRequest {
        system_instruction: "Write.".into(),
        user_message: "{}".into(),
        schema_name: "answer".into(),
        output_schema: Arc::new(json!({"type": "object"})),
        model: Some(Box::new(ModelTarget {
            name: "agent:slow".into(),
            provider: "a2a".into(),
            model_id: format!("{base}/.well-known/agent-card.json"),
            ..ModelTarget::default()
        })),
    };
    let (deltas, _receiver) = tokio::sync::mpsc::unbounded_channel();
    // The step gives up on the call (its deadline): the future is dropped.
    let abandoned = tokio::time::timeout(
        Duration::from_millis(800),
        agents.complete(&request, deltas),
    )
    .await;
    assert!(abandoned.is_err(), "the agent never ends its stream");
    for _ in 0..50 {
        if !agent.cancelled.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(*agent.cancelled.lock().unwrap(), ["remote-task-1"]);
}
