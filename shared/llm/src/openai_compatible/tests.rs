//! The provider against the scripted OpenAI-compatible server (a test
//! double for the model endpoint).

use super::*;
use scripted_llm::{Behavior, ScriptedLlmServer, gap_between};
use std::time::Duration;

fn request() -> ModelRequest {
    ModelRequest {
        system_instruction: "be brief".into(),
        user_message: "{}".into(),
        schema_name: "answer".into(),
        output_schema: std::sync::Arc::new(
            json!({"type": "object", "required": ["greeting"], "properties": {"greeting": {"type": "string"}}}),
        ),
        model: None,
    }
}

fn provider(server: &ScriptedLlmServer) -> OpenAiCompatibleProvider {
    let mut config =
        OpenAiCompatibleConfig::new(server.base_url(), "scripted-model", Some("sk-test".into()));
    config.initial_backoff = Duration::from_millis(5);
    config.max_backoff = Duration::from_millis(20);
    OpenAiCompatibleProvider::new(config).unwrap()
}

#[tokio::test]
async fn streams_deltas_and_returns_the_whole_answer_with_usage() {
    let server = ScriptedLlmServer::start().await.unwrap();
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let answer = provider(&server)
        .complete(&request(), sender)
        .await
        .unwrap();
    let mut streamed = String::new();
    let mut pieces = 0;
    while let Ok(piece) = receiver.try_recv() {
        let ModelDelta::Text(piece) = piece else {
            unreachable!("nothing restarted")
        };
        streamed.push_str(&piece);
        pieces += 1;
    }
    assert_eq!(streamed, answer.content);
    assert!(pieces >= 2, "expected several deltas, got {pieces}");
    let parsed: Value = serde_json::from_str(&answer.content).unwrap();
    assert!(parsed["greeting"].is_string());
    assert!(answer.usage.completion_tokens > 0);
    let sent = &server.requests()[0].body;
    assert_eq!(sent["response_format"]["type"], "json_schema");
    assert_eq!(sent["stream"], true);
}

#[tokio::test]
async fn a_stream_cut_mid_answer_is_retried_and_voided_with_a_restart() {
    let server = ScriptedLlmServer::start().await.unwrap();
    server.push_behaviors([Behavior::BrokenStream { after_chunks: 2 }]);
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let answer = provider(&server)
        .complete(&request(), sender)
        .await
        .unwrap();
    let mut deltas = Vec::new();
    while let Ok(delta) = receiver.try_recv() {
        deltas.push(delta);
    }
    let restart = deltas
        .iter()
        .position(|delta| *delta == ModelDelta::Restarted)
        .unwrap();
    assert_eq!(restart, 2, "two chunks streamed before the cut");
    let after_restart: String = deltas[restart + 1..]
        .iter()
        .map(|delta| match delta {
            ModelDelta::Text(text) => text.as_str(),
            ModelDelta::Restarted | ModelDelta::FellBack(_) => unreachable!("one restart"),
        })
        .collect();
    assert_eq!(after_restart, answer.content);
    assert_eq!(server.request_count(), 2);
    assert!(serde_json::from_str::<Value>(&answer.content).is_ok());
}

#[tokio::test]
async fn retries_server_errors_then_succeeds() {
    let server = ScriptedLlmServer::start().await.unwrap();
    server.push_behaviors([
        Behavior::Status {
            status: 500,
            retry_after_seconds: None,
        },
        Behavior::Status {
            status: 503,
            retry_after_seconds: None,
        },
    ]);
    let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
    provider(&server)
        .complete(&request(), sender)
        .await
        .unwrap();
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn gives_up_after_the_attempt_bound() {
    let server = ScriptedLlmServer::start().await.unwrap();
    server.push_behaviors((0..5).map(|_| Behavior::Status {
        status: 500,
        retry_after_seconds: None,
    }));
    let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
    let error = provider(&server)
        .complete(&request(), sender)
        .await
        .unwrap_err();
    assert_eq!(
        error,
        LlmError::ServerError {
            status: 500,
            attempts: 5,
            body: r#"{"error":{"message":"scripted failure","type":"scripted"}}"#.into()
        }
    );
    assert_eq!(server.request_count(), 5);
}

#[tokio::test]
async fn honours_retry_after_on_429() {
    let server = ScriptedLlmServer::start().await.unwrap();
    server.push_behaviors([Behavior::Status {
        status: 429,
        retry_after_seconds: Some(1),
    }]);
    let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
    provider(&server)
        .complete(&request(), sender)
        .await
        .unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    // The backoff alone is at most 20 ms here; only Retry-After explains a wait near a second.
    assert!(gap_between(&requests[0], &requests[1]) >= Duration::from_millis(900));
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let server = ScriptedLlmServer::start().await.unwrap();
    server.push_behaviors([Behavior::Status {
        status: 400,
        retry_after_seconds: None,
    }]);
    let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
    let error = provider(&server)
        .complete(&request(), sender)
        .await
        .unwrap_err();
    assert!(matches!(
        error,
        LlmError::RequestRejected { status: 400, .. }
    ));
    assert!(!error.is_retryable());
    assert_eq!(server.request_count(), 1);
}

#[test]
fn backoff_grows_and_stays_under_the_cap() {
    let mut config = OpenAiCompatibleConfig::new("http://x/v1", "m", None);
    config.initial_backoff = Duration::from_millis(100);
    config.max_backoff = Duration::from_millis(1000);
    let provider = OpenAiCompatibleProvider::new(config).unwrap();
    for attempt in 1..10 {
        let delay = provider.retry_policy().backoff_delay(attempt, None);
        let ceiling = Duration::from_millis((100u64 << (attempt - 1)).min(1000));
        assert!(
            delay <= ceiling && delay >= ceiling / 2,
            "attempt {attempt}: {delay:?}"
        );
    }
    assert_eq!(
        provider
            .retry_policy()
            .backoff_delay(1, Some(Duration::from_secs(3))),
        Duration::from_secs(3)
    );
}

fn session() -> ToolSession {
    ToolSession {
        tools: vec![baton_core::records::conversation::OfferedTool {
            name: "registry_search".into(),
            description: "Searches the registry.".into(),
            parameters: std::sync::Arc::new(
                json!({"type": "object", "properties": {"query": {"type": "string"}}}),
            ),
        }],
        turns: Vec::new(),
        free_text: false,
    }
}

#[tokio::test]
async fn a_conversation_offers_its_tools_and_reads_the_calls_streamed_in_pieces() {
    let server = ScriptedLlmServer::start().await.unwrap();
    server.push_behaviors([Behavior::ToolCalls {
        calls: vec![
            scripted_llm::ScriptedToolCall {
                name: "registry_search".into(),
                arguments: json!({"query": "copy variants"}),
            },
            scripted_llm::ScriptedToolCall {
                name: "registry_search".into(),
                arguments: json!({"query": "review", "kind": "capability"}),
            },
        ],
    }]);
    let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
    let mut conversation = session();
    let asked = provider(&server)
        .converse(&request(), &conversation, sender.clone())
        .await
        .unwrap();
    assert_eq!(asked.content, "");
    assert_eq!(asked.tool_calls.len(), 2);
    assert_eq!(asked.tool_calls[0].id, "call_0");
    assert_eq!(asked.tool_calls[1].name, "registry_search");
    let arguments: Value = serde_json::from_str(&asked.tool_calls[1].arguments).unwrap();
    assert_eq!(arguments, json!({"query": "review", "kind": "capability"}));
    let sent = &server.requests()[0].body;
    assert_eq!(sent["tools"][0]["function"]["name"], "registry_search");
    assert_eq!(sent["tool_choice"], "auto");
    assert!(sent.get("response_format").is_some(), "a node answers JSON");

    // The next turn carries the calls and their results; the model answers.
    conversation.turns.push(SessionTurn::Assistant {
        content: String::new(),
        tool_calls: asked.tool_calls.clone(),
    });
    for call in &asked.tool_calls {
        conversation.turns.push(SessionTurn::Tool {
            call_id: call.id.clone(),
            content: json!({"total": 0}).to_string(),
        });
    }
    let answered = provider(&server)
        .converse(&request(), &conversation, sender)
        .await
        .unwrap();
    assert!(answered.tool_calls.is_empty());
    assert!(serde_json::from_str::<Value>(&answered.content).unwrap()["greeting"].is_string());
    let messages = server.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .clone();
    let roles: Vec<&str> = messages
        .iter()
        .map(|message| message["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "tool"]);
    assert_eq!(messages[2]["tool_calls"][1]["id"], "call_1");
    assert_eq!(messages[4]["tool_call_id"], "call_1");
}

#[tokio::test]
async fn a_chat_conversation_asks_for_free_text() {
    let server = ScriptedLlmServer::start().await.unwrap();
    server.push_behaviors([Behavior::Content {
        content: "Hello there.".into(),
    }]);
    let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
    let chat = ToolSession {
        free_text: true,
        ..session()
    };
    let answered = provider(&server)
        .converse(&request(), &chat, sender)
        .await
        .unwrap();
    assert_eq!(answered.content, "Hello there.");
    let sent = &server.requests()[0].body;
    assert!(sent.get("response_format").is_none(), "{sent}");
    assert_eq!(sent["tools"][0]["function"]["name"], "registry_search");
}

#[tokio::test]
async fn a_provider_without_tools_says_so() {
    struct Plain;
    #[async_trait]
    impl LlmProvider for Plain {
        fn model_name(&self) -> String {
            "plain".into()
        }
        async fn complete(
            &self,
            _request: &ModelRequest,
            _deltas: UnboundedSender<ModelDelta>,
        ) -> Result<ModelAnswer, LlmError> {
            Err(LlmError::Configuration("unused".into()))
        }
    }
    let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
    let refused = Plain.converse(&request(), &session(), sender).await;
    assert_eq!(
        refused,
        Err(LlmError::Configuration(
            "the model provider `plain` cannot call tools".into()
        ))
    );
}

#[test]
fn strict_mode_takes_closed_fully_required_schemas_only() {
    let closed = json!({"type": "object", "additionalProperties": false, "required": ["a", "b"],
        "properties": {"a": {"type": "string"},
                       "b": {"type": "array", "items": {"type": "object", "additionalProperties": false,
                                                        "required": ["c"], "properties": {"c": {"type": "number"}}}}}});
    assert!(strict_mode_accepts(&closed));
    let mut optional = closed.clone();
    optional["required"] = json!(["a"]);
    assert!(!strict_mode_accepts(&optional), "b is optional");
    let mut open_inner = closed.clone();
    open_inner["properties"]["b"]["items"]
        .as_object_mut()
        .unwrap()
        .remove("additionalProperties");
    assert!(!strict_mode_accepts(&open_inner), "an inner object is open");
    let mut refused_keyword = closed.clone();
    refused_keyword["properties"]["a"] = json!({"allOf": [{"type": "string"}]});
    assert!(!strict_mode_accepts(&refused_keyword));
    assert!(
        !strict_mode_accepts(&json!({"type": "string"})),
        "the root is not an object"
    );
}

#[tokio::test]
async fn strict_output_is_asked_only_of_a_model_that_has_it_and_a_schema_that_allows_it() {
    let server = ScriptedLlmServer::start().await.unwrap();
    let provider = provider(&server);
    let closed = json!({"type": "object", "additionalProperties": false, "required": ["text"],
                        "properties": {"text": {"type": "string"}}});
    let open =
        json!({"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}});
    let cases = [
        (true, closed.clone(), true),
        (false, closed, false),
        (true, open, false),
    ];
    for (model_has_it, schema, expected) in cases {
        let mut request = request();
        request.output_schema = std::sync::Arc::new(schema);
        request.model = Some(Box::new(
            baton_core::contracts::model_request::ModelTarget {
                name: "m".into(),
                provider: "openai".into(),
                model_id: "gpt-test".into(),
                strict_output: model_has_it,
                ..Default::default()
            },
        ));
        let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
        provider.complete(&request, sender).await.unwrap();
        let sent = server.requests().last().unwrap().body.clone();
        assert_eq!(
            sent["response_format"]["json_schema"]["strict"],
            json!(expected),
            "model has it: {model_has_it}"
        );
    }
}
