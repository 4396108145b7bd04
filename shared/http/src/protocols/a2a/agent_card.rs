//! The agent card at `/.well-known/agent-card.json`: who Baton is to an
//! A2A client, where its JSON-RPC interface is, its skills (an envelope,
//! a chat message, the registry's capabilities) and its security scheme.

use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Json, Response};
use serde_json::json;

use super::protocol;
use crate::state::ApiState;

/// `GET /.well-known/agent-card.json`.
pub(crate) async fn agent_card(State(state): State<ApiState>, headers: HeaderMap) -> Response {
    let base = public_base_url(state.settings.public_url.as_deref(), &headers);
    let registry = state.capabilities.registry();
    let mut skills = vec![
        json!({
            "id": "run-envelope",
            "name": "Run a task envelope",
            "description": "A data part holding a task envelope (objective, inputs, constraints, policies, outputContract): Baton plans it over its registry, runs it, and answers with output that meets the contract as the `output` artifact.",
            "tags": ["envelope", "plan", "run"],
            "inputModes": ["application/json"],
            "outputModes": ["application/json"],
        }),
        json!({
            "id": "chat",
            "name": "Chat",
            "description": "Text parts: one chat message on the message's context (a thread), answered by Baton's orchestrator.",
            "tags": ["chat"],
            "inputModes": ["text/plain"],
            "outputModes": ["application/json", "text/plain"],
        }),
    ];
    skills.extend(registry.capabilities().map(|capability| {
        json!({
            "id": capability.capability_id,
            "name": capability.display_name,
            "description": capability.summary,
            "tags": [serde_json::to_value(capability.agent_type).unwrap_or_default(), "capability"],
            "inputModes": ["application/json"],
            "outputModes": ["application/json"],
        })
    }));
    let mut card = json!({
        "name": "Baton",
        "description": "A plan-driven multi-agent orchestrator: send a task envelope (or a chat message); Baton plans the work over AI, human and built-in capabilities and returns only output that meets the envelope's output contract.",
        "version": env!("CARGO_PKG_VERSION"),
        "supportedInterfaces": [{
            "url": format!("{base}/a2a"),
            "protocolBinding": "JSONRPC",
            "protocolVersion": protocol::PROTOCOL_VERSION,
        }],
        "capabilities": {"streaming": true, "pushNotifications": true},
        "defaultInputModes": ["application/json", "text/plain"],
        "defaultOutputModes": ["application/json", "text/plain"],
        "skills": skills,
    });
    if !state.authenticator.is_anonymous() {
        card["securitySchemes"] = json!({"bearer": {"httpAuthSecurityScheme": {
            "scheme": "Bearer",
            "description": "One of the API's tokens (BATON_API_TOKENS); its tenant owns the tasks.",
        }}});
        card["securityRequirements"] = json!([{"schemes": {"bearer": {"list": []}}}]);
    }
    ([(header::CACHE_CONTROL, "public, max-age=300")], Json(card)).into_response()
}

/// The URL clients reached this server at: `BATON_PUBLIC_URL` when set,
/// else the forwarded or direct host and scheme of the request.
fn public_base_url(configured: Option<&str>, headers: &HeaderMap) -> String {
    if let Some(url) = configured {
        return url.to_string();
    }
    let value = |name: &str| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(|value| value.split(',').next().unwrap_or(value).trim().to_string())
    };
    let host = value("x-forwarded-host")
        .or_else(|| value("host"))
        .unwrap_or_else(|| "localhost".into());
    let scheme = value("x-forwarded-proto").unwrap_or_else(|| "http".into());
    format!("{scheme}://{host}")
}
