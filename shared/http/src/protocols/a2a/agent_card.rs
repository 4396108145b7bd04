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
pub(crate) async fn agent_card(
    State(state): State<ApiState>,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> Response {
    let base = public_base_url(state.settings.public_url.as_deref(), &uri, &headers);
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
    // Built from the request's own Host when no public URL is configured,
    // the card differs per Host: no shared cache may keep it.
    let cache_control = if state.settings.public_url.is_some() {
        "public, max-age=300"
    } else {
        "private, no-cache"
    };
    (
        [
            (header::CACHE_CONTROL, cache_control),
            (header::VARY, "Host"),
        ],
        Json(card),
    )
        .into_response()
}

/// The URL clients reached this server at: `BATON_PUBLIC_URL` when set,
/// else the request's own absolute URI (the Lambda runtime builds it from
/// the function URL's domain, over https), else its `Host` over http.
/// Forwarded headers
/// (`X-Forwarded-Host`, `X-Forwarded-Proto`) are never read: whoever can
/// set them would choose where clients send their tokens. A server behind a
/// proxy sets `BATON_PUBLIC_URL`.
fn public_base_url(configured: Option<&str>, uri: &axum::http::Uri, headers: &HeaderMap) -> String {
    if let Some(url) = configured {
        return url.to_string();
    }
    if let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) {
        return format!("{scheme}://{authority}");
    }
    let host = headers
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .map(str::trim)
        .filter(|host| {
            !host.is_empty() && !host.contains(['/', '?', '#', '@', ' ', '"', '\\', '<', '>'])
        })
        .unwrap_or("localhost");
    format!("http://{host}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwarded_headers_do_not_choose_the_endpoint() {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, "127.0.0.1:8080".parse().unwrap());
        headers.insert("x-forwarded-host", "elsewhere.example".parse().unwrap());
        headers.insert("x-forwarded-proto", "https".parse().unwrap());
        let path_only: axum::http::Uri = "/.well-known/agent-card.json".parse().unwrap();
        assert_eq!(
            public_base_url(None, &path_only, &headers),
            "http://127.0.0.1:8080"
        );
        assert_eq!(
            public_base_url(Some("https://baton.example"), &path_only, &headers),
            "https://baton.example"
        );
        let absolute: axum::http::Uri =
            "https://abc.lambda-url.us-east-1.on.aws/.well-known/agent-card.json"
                .parse()
                .unwrap();
        assert_eq!(
            public_base_url(None, &absolute, &headers),
            "https://abc.lambda-url.us-east-1.on.aws"
        );
        let mut odd = HeaderMap::new();
        odd.insert(header::HOST, "a.example/evil".parse().unwrap());
        assert_eq!(public_base_url(None, &path_only, &odd), "http://localhost");
    }
}
