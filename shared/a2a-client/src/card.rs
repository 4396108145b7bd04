//! Reading an agent card (A2A 1.0): the agent's JSON-RPC interface.

use serde_json::Value;

/// Why a card names no interface Baton can call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CardProblem {
    #[error("the card is not a JSON object")]
    NotAnObject,
    #[error("the card has no `name`")]
    NoName,
    #[error(
        "the card is of A2A 0.3 (`url`, `preferredTransport`); Baton speaks A2A 1.0 (`supportedInterfaces`)"
    )]
    OlderProtocol,
    #[error(
        "the card names no JSON-RPC interface of A2A 1.0 (`supportedInterfaces[]` with `protocolBinding: JSONRPC`)"
    )]
    NoJsonRpcInterface,
    #[error("the card URL: {0}")]
    CardUrl(String),
    #[error("the interface URL `{url}`: {reason}")]
    InterfaceUrl { url: String, reason: String },
    #[error("the interface URL `{url}` is `{scheme}`, not http(s)")]
    NotHttp { url: String, scheme: String },
}

/// The JSON-RPC interface URL `card` names (the first `supportedInterfaces`
/// entry with `protocolBinding: JSONRPC` and a 1.x `protocolVersion`),
/// resolved against `card_url`; or why the card is refused.
pub fn json_rpc_interface(card: &Value, card_url: &str) -> Result<String, CardProblem> {
    let Some(fields) = card.as_object() else {
        return Err(CardProblem::NotAnObject);
    };
    if !fields.get("name").is_some_and(Value::is_string) {
        return Err(CardProblem::NoName);
    }
    let interfaces = fields
        .get("supportedInterfaces")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let json_rpc = interfaces.iter().find(|interface| {
        interface.get("protocolBinding").and_then(Value::as_str) == Some("JSONRPC")
            && interface
                .get("protocolVersion")
                .and_then(Value::as_str)
                .is_none_or(|version| version == "1" || version.starts_with("1."))
    });
    let Some(url) = json_rpc
        .and_then(|interface| interface.get("url"))
        .and_then(Value::as_str)
    else {
        if fields.contains_key("preferredTransport") || fields.contains_key("protocolVersion") {
            return Err(CardProblem::OlderProtocol);
        }
        return Err(CardProblem::NoJsonRpcInterface);
    };
    let base =
        reqwest::Url::parse(card_url).map_err(|error| CardProblem::CardUrl(error.to_string()))?;
    let resolved = base.join(url).map_err(|error| CardProblem::InterfaceUrl {
        url: url.to_string(),
        reason: error.to_string(),
    })?;
    match resolved.scheme() {
        "https" | "http" => Ok(resolved.to_string()),
        other => Err(CardProblem::NotHttp {
            url: resolved.to_string(),
            scheme: other.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::{CardProblem, json_rpc_interface};
    use serde_json::json;

    #[test]
    fn the_json_rpc_interface_of_a_one_point_o_card_is_found_and_resolved() {
        let card = json!({"name": "writer", "supportedInterfaces": [
            {"url": "grpc://agents.example.com", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
            {"url": "/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]});
        assert_eq!(
            json_rpc_interface(
                &card,
                "https://agents.example.com/.well-known/agent-card.json"
            ),
            Ok("https://agents.example.com/a2a".to_string())
        );
    }

    #[test]
    fn cards_without_a_usable_interface_are_refused_saying_why() {
        let legacy = json!({"name": "old", "url": "https://x.example.com", "protocolVersion": "0.3.0", "preferredTransport": "JSONRPC"});
        assert_eq!(
            json_rpc_interface(&legacy, "https://x.example.com/card").unwrap_err(),
            CardProblem::OlderProtocol
        );
        let rest_only = json!({"name": "rest", "supportedInterfaces": [{"url": "https://x.example.com", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}]});
        assert_eq!(
            json_rpc_interface(&rest_only, "https://x.example.com/card").unwrap_err(),
            CardProblem::NoJsonRpcInterface
        );
        assert_eq!(
            json_rpc_interface(&json!([1]), "https://x.example.com/card").unwrap_err(),
            CardProblem::NotAnObject
        );
        let nameless = json!({"supportedInterfaces": []});
        assert_eq!(
            json_rpc_interface(&nameless, "https://x.example.com/card").unwrap_err(),
            CardProblem::NoName
        );
    }
}
