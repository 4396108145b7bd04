//! One conformance suite for every model provider Baton ships.
//!
//! Each scenario is a function over a [`Harness`]: a provider of one kind
//! (OpenAI-compatible, Anthropic Messages, Bedrock ConverseStream) pointed
//! at the scripted double of its own wire protocol (`scripted-llm`, a test
//! double for the provider's endpoint, never for Baton's code). The test
//! file `tests/providers.rs` runs every scenario against every provider, so
//! a provider added later gets the whole suite by adding one harness.
//!
//! The scenarios: plain text, a schema answer, deltas in order, tool calls
//! streamed in pieces, usage with cached tokens, 429 then success, 500
//! retried, 401 not retried with a message naming the credential variable,
//! a timeout retried and a timeout given up, a cut stream restarted, a
//! session round (a tool call, its result, the answer).
//!
//! Invariant: a scenario asserts on what the provider returned and on what
//! the double received (the model id on the wire, the number of calls),
//! never on the double's own bookkeeping alone.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::time::Duration;

use baton_core::contracts::model_request::ModelTarget;
use baton_core::records::conversation::{OfferedTool, SessionTurn, ToolSession};
use baton_core::state::context::ModelRequest;
use baton_runtime::error::LlmError;
use baton_runtime::ports::{LlmProvider, ModelDelta};
use scripted_llm::{Behavior, ScriptedLlmServer, ScriptedToolCall, WireProtocol};
use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

/// The longest one call may take before the provider calls it a timeout.
const CALL_TIMEOUT: Duration = Duration::from_millis(500);
/// Calls per request, the first included.
const ATTEMPTS: u32 = 3;

/// A provider under test and the double it talks to.
pub struct Harness {
    pub protocol: WireProtocol,
    pub server: ScriptedLlmServer,
    pub provider: Box<dyn LlmProvider>,
    /// The model id requests name (the double sees it on the wire).
    pub model_id: &'static str,
    /// What a refused credential's error must name.
    pub credential_hint: &'static str,
}

impl Harness {
    /// A provider speaking `protocol`, against a fresh double.
    pub async fn new(protocol: WireProtocol) -> Harness {
        let server = ScriptedLlmServer::start().await.expect("the double starts");
        let backoff = Duration::from_millis(5);
        let (provider, model_id, credential_hint): (Box<dyn LlmProvider>, _, _) = match protocol {
            WireProtocol::OpenAiChat => {
                let mut config = baton_llm::OpenAiCompatibleConfig::new(
                    server.base_url(),
                    "the-default",
                    Some("sk-test".into()),
                );
                config.api_key_variable = "GROQ_API_KEY".into();
                config.max_attempts = ATTEMPTS;
                config.initial_backoff = backoff;
                config.max_backoff = backoff * 4;
                config.request_timeout = CALL_TIMEOUT;
                (
                    Box::new(baton_llm::OpenAiCompatibleProvider::new(config).unwrap()),
                    "gpt-test-1",
                    "GROQ_API_KEY",
                )
            }
            WireProtocol::AnthropicMessages => {
                let mut config = baton_llm::anthropic::AnthropicConfig::new(
                    server.root_url(),
                    Some("sk-ant-test".into()),
                    "ANTHROPIC_API_KEY",
                );
                config.retry.max_attempts = ATTEMPTS;
                config.retry.initial_backoff = backoff;
                config.retry.max_backoff = backoff * 4;
                config.request_timeout = CALL_TIMEOUT;
                (
                    Box::new(baton_llm::anthropic::AnthropicProvider::new(config).unwrap()),
                    "claude-test-1",
                    "ANTHROPIC_API_KEY",
                )
            }
            WireProtocol::BedrockConverseStream => {
                let connection = baton_aws::AwsConnection::to_emulator(&server.root_url()).await;
                let settings = baton_aws::bedrock::BedrockSettings {
                    max_tokens: 1024,
                    max_attempts: ATTEMPTS,
                    initial_backoff: backoff,
                    max_backoff: backoff * 4,
                    request_timeout: CALL_TIMEOUT,
                };
                (
                    Box::new(baton_aws::bedrock::BedrockProvider::new(
                        &connection,
                        settings,
                    )),
                    "anthropic.claude-test-v1:0",
                    "AWS_ACCESS_KEY_ID",
                )
            }
        };
        Harness {
            protocol,
            server,
            provider,
            model_id,
            credential_hint,
        }
    }

    /// A request for a structured brief, to this harness's model.
    fn request(&self, system_instruction: &str) -> ModelRequest {
        ModelRequest {
            system_instruction: system_instruction.to_string(),
            user_message: "{\"topic\": \"tide tables\"}".into(),
            schema_name: "brief".into(),
            output_schema: Arc::new(brief_schema()),
            model: Some(Box::new(ModelTarget {
                name: "under-test".into(),
                provider: format!("{:?}", self.protocol),
                model_id: self.model_id.into(),
                fallbacks: Vec::new(),
                strict_output: true,
                prompt_cache: true,
                remote_headers: Default::default(),
            })),
        }
    }

    /// Every request the double saw named this harness's model.
    fn assert_model_on_the_wire(&self) {
        let requests = self.server.requests();
        assert!(!requests.is_empty(), "{:?}: no request", self.protocol);
        for request in requests {
            assert_eq!(request.protocol, self.protocol);
            assert_eq!(request.model, self.model_id, "{:?}", self.protocol);
        }
    }
}

fn brief_schema() -> Value {
    json!({"type": "object", "required": ["title", "points"], "additionalProperties": false,
           "properties": {"title": {"type": "string", "minLength": 3},
                          "points": {"type": "array", "minItems": 2, "items": {"type": "string"}}}})
}

fn lookup_tool() -> OfferedTool {
    OfferedTool {
        name: "lookup".into(),
        description: "Looks a term up.".into(),
        parameters: Arc::new(
            json!({"type": "object", "required": ["term"], "properties": {"term": {"type": "string"}}}),
        ),
    }
}

fn drain(mut receiver: UnboundedReceiver<ModelDelta>) -> Vec<ModelDelta> {
    let mut deltas = Vec::new();
    while let Ok(delta) = receiver.try_recv() {
        deltas.push(delta);
    }
    deltas
}

fn assert_is_a_brief(content: &str, protocol: WireProtocol) {
    let answer: Value = serde_json::from_str(content).unwrap_or_else(|error| {
        panic!("{protocol:?}: the answer is not JSON ({error}): {content}")
    });
    assert!(
        jsonschema::is_valid(&brief_schema(), &answer),
        "{protocol:?}: the answer breaks the schema: {answer}"
    );
}

/// Free text: a chat reply with no tools comes back as text.
pub async fn plain_text(harness: &Harness) {
    let session = ToolSession {
        tools: Vec::new(),
        turns: Vec::new(),
        free_text: true,
    };
    let (sender, receiver) = unbounded_channel();
    let answer = harness
        .provider
        .converse(&harness.request("Reply to the person."), &session, sender)
        .await
        .unwrap();
    assert_eq!(
        answer.content, "A scripted reply.",
        "{:?}",
        harness.protocol
    );
    assert!(answer.tool_calls.is_empty());
    let streamed: String = drain(receiver)
        .into_iter()
        .filter_map(|delta| match delta {
            ModelDelta::Text(text) => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(streamed, answer.content, "{:?}", harness.protocol);
    harness.assert_model_on_the_wire();
}

/// A schema answer: the content meets the request's schema and the usage
/// counts both directions.
pub async fn schema_answer(harness: &Harness) {
    let (sender, _receiver) = unbounded_channel();
    let answer = harness
        .provider
        .complete(&harness.request("Write a brief."), sender)
        .await
        .unwrap();
    assert_is_a_brief(&answer.content, harness.protocol);
    assert!(answer.usage.prompt_tokens > 0, "{:?}", harness.protocol);
    assert!(answer.usage.completion_tokens > 0, "{:?}", harness.protocol);
    assert_eq!(harness.server.request_count(), 1);
    harness.assert_model_on_the_wire();
}

/// Deltas arrive in pieces, in order: joined, they are the answer.
pub async fn deltas_in_order(harness: &Harness) {
    let (sender, receiver) = unbounded_channel();
    let answer = harness
        .provider
        .complete(&harness.request("Write a brief."), sender)
        .await
        .unwrap();
    let pieces: Vec<String> = drain(receiver)
        .into_iter()
        .map(|delta| match delta {
            ModelDelta::Text(text) => text,
            other => panic!("{:?}: unexpected delta {other:?}", harness.protocol),
        })
        .collect();
    assert!(
        pieces.len() > 1,
        "{:?}: one piece only: {pieces:?}",
        harness.protocol
    );
    let joined: Value = serde_json::from_str(&pieces.concat()).unwrap();
    let answered: Value = serde_json::from_str(&answer.content).unwrap();
    assert_eq!(joined, answered, "{:?}", harness.protocol);
}

/// Tool calls streamed in pieces come back whole, each with its own id.
pub async fn tool_calls_in_pieces(harness: &Harness) {
    harness.server.push_behaviors([Behavior::ToolCalls {
        calls: vec![
            ScriptedToolCall {
                name: "lookup".into(),
                arguments: json!({"term": "neap tide"}),
            },
            ScriptedToolCall {
                name: "lookup".into(),
                arguments: json!({"term": "spring tide — ünïcödé"}),
            },
        ],
    }]);
    let session = ToolSession {
        tools: vec![lookup_tool()],
        turns: Vec::new(),
        free_text: false,
    };
    let (sender, _receiver) = unbounded_channel();
    let answer = harness
        .provider
        .converse(&harness.request("Research, then answer."), &session, sender)
        .await
        .unwrap();
    assert_eq!(answer.tool_calls.len(), 2, "{:?}", harness.protocol);
    let terms: Vec<Value> = answer
        .tool_calls
        .iter()
        .map(|call| {
            assert_eq!(call.name, "lookup");
            serde_json::from_str::<Value>(&call.arguments).unwrap()["term"].clone()
        })
        .collect();
    assert_eq!(terms, [json!("neap tide"), json!("spring tide — ünïcödé")]);
    assert_ne!(answer.tool_calls[0].id, answer.tool_calls[1].id);
    assert!(!answer.tool_calls[0].id.is_empty());
    // The tools were offered on the wire.
    let body = harness.server.requests()[0].body.to_string();
    assert!(body.contains("lookup"), "{:?}: {body}", harness.protocol);
}

/// A long stable prefix is cached: the second identical request reads
/// what the first wrote (or, where the provider caches on its own, what it
/// saw), and the usage says so.
pub async fn usage_with_cached_tokens(harness: &Harness) {
    let long_instruction = "Follow the house style guide. ".repeat(200);
    let request = harness.request(&long_instruction);
    let (sender, _receiver) = unbounded_channel();
    let first = harness
        .provider
        .complete(&request, sender.clone())
        .await
        .unwrap();
    let second = harness.provider.complete(&request, sender).await.unwrap();
    assert_eq!(
        first.usage.cached_prompt_tokens, 0,
        "{:?}",
        harness.protocol
    );
    assert!(
        second.usage.cached_prompt_tokens >= 1024,
        "{:?}: {:?}",
        harness.protocol,
        second.usage
    );
    match harness.protocol {
        // OpenAI caches on its own and bills no write.
        WireProtocol::OpenAiChat => assert_eq!(first.usage.cache_write_prompt_tokens, 0),
        _ => assert_eq!(
            first.usage.cache_write_prompt_tokens, second.usage.cached_prompt_tokens,
            "{:?}: what was written is what is read",
            harness.protocol
        ),
    }
    for usage in [&first.usage, &second.usage] {
        assert!(
            usage.prompt_tokens >= usage.cached_prompt_tokens + usage.cache_write_prompt_tokens,
            "{:?}: prompt tokens count the cached ones: {usage:?}",
            harness.protocol
        );
    }
}

/// A 429 is retried and the next call answers.
pub async fn rate_limited_then_answers(harness: &Harness) {
    harness.server.push_behaviors([Behavior::Status {
        status: 429,
        retry_after_seconds: Some(0),
    }]);
    let (sender, _receiver) = unbounded_channel();
    let answer = harness
        .provider
        .complete(&harness.request("Write a brief."), sender)
        .await
        .unwrap();
    assert_is_a_brief(&answer.content, harness.protocol);
    assert_eq!(harness.server.request_count(), 2, "{:?}", harness.protocol);
}

/// A 500 is retried; one that never ends gives up with the attempt count.
pub async fn server_error_retried(harness: &Harness) {
    harness.server.push_behaviors([Behavior::Status {
        status: 500,
        retry_after_seconds: None,
    }]);
    let (sender, _receiver) = unbounded_channel();
    let answer = harness
        .provider
        .complete(&harness.request("Write a brief."), sender.clone())
        .await
        .unwrap();
    assert_is_a_brief(&answer.content, harness.protocol);
    assert_eq!(harness.server.request_count(), 2, "{:?}", harness.protocol);
    harness.server.set_default_behavior(Behavior::Status {
        status: 500,
        retry_after_seconds: None,
    });
    let error = harness
        .provider
        .complete(&harness.request("Write a brief."), sender)
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            LlmError::ServerError {
                attempts: ATTEMPTS,
                ..
            }
        ),
        "{:?}: {error:?}",
        harness.protocol
    );
    assert_eq!(harness.server.request_count(), 2 + ATTEMPTS as usize);
}

/// A refused credential is not retried and the error says what to set.
pub async fn refused_credential_not_retried(harness: &Harness) {
    harness.server.push_behaviors([Behavior::Status {
        status: 401,
        retry_after_seconds: None,
    }]);
    let (sender, _receiver) = unbounded_channel();
    let error = harness
        .provider
        .complete(&harness.request("Write a brief."), sender)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, LlmError::Configuration(message) if message.contains(harness.credential_hint)),
        "{:?}: {error}",
        harness.protocol
    );
    assert_eq!(harness.server.request_count(), 1, "{:?}", harness.protocol);
}

/// A call slower than the timeout is retried; one always slower gives up
/// as a timeout.
pub async fn timeout_retried_then_given_up(harness: &Harness) {
    let slow = Behavior::SlowValid {
        delay_ms: 4 * CALL_TIMEOUT.as_millis() as u64,
    };
    harness.server.push_behaviors([slow.clone()]);
    let (sender, _receiver) = unbounded_channel();
    let answer = harness
        .provider
        .complete(&harness.request("Write a brief."), sender.clone())
        .await
        .unwrap();
    assert_is_a_brief(&answer.content, harness.protocol);
    assert_eq!(harness.server.request_count(), 2, "{:?}", harness.protocol);
    harness.server.set_default_behavior(slow);
    let error = harness
        .provider
        .complete(&harness.request("Write a brief."), sender)
        .await
        .unwrap_err();
    assert!(
        matches!(error, LlmError::Timeout { attempts: ATTEMPTS }),
        "{:?}: {error:?}",
        harness.protocol
    );
}

/// A stream cut mid-answer is asked again; readers are told to drop what
/// they streamed before the answer that counts.
pub async fn cut_stream_restarted(harness: &Harness) {
    harness
        .server
        .push_behaviors([Behavior::BrokenStream { after_chunks: 2 }]);
    let (sender, receiver) = unbounded_channel();
    let answer = harness
        .provider
        .complete(&harness.request("Write a brief."), sender)
        .await
        .unwrap();
    assert_is_a_brief(&answer.content, harness.protocol);
    assert_eq!(harness.server.request_count(), 2, "{:?}", harness.protocol);
    let deltas = drain(receiver);
    let restart = deltas
        .iter()
        .position(|delta| *delta == ModelDelta::Restarted)
        .unwrap_or_else(|| panic!("{:?}: no restart in {deltas:?}", harness.protocol));
    let after: String = deltas[restart + 1..]
        .iter()
        .filter_map(|delta| match delta {
            ModelDelta::Text(text) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&after).unwrap(),
        serde_json::from_str::<Value>(&answer.content).unwrap(),
        "{:?}: what streams after the restart is the answer",
        harness.protocol
    );
}

/// A session round: the model calls a tool, gets its result, then answers
/// (through the answer tool or the response format) with no further call.
pub async fn session_round_trip(harness: &Harness) {
    harness.server.push_behaviors([Behavior::ToolCalls {
        calls: vec![ScriptedToolCall {
            name: "lookup".into(),
            arguments: json!({"term": "slack water"}),
        }],
    }]);
    let mut session = ToolSession {
        tools: vec![lookup_tool()],
        turns: Vec::new(),
        free_text: false,
    };
    let request = harness.request("Research, then answer.");
    let (sender, _receiver) = unbounded_channel();
    let first = harness
        .provider
        .converse(&request, &session, sender.clone())
        .await
        .unwrap();
    assert_eq!(first.tool_calls.len(), 1, "{:?}", harness.protocol);
    let call = first.tool_calls[0].clone();
    session.turns.push(SessionTurn::Assistant {
        content: first.content.clone(),
        tool_calls: vec![call.clone()],
    });
    session.turns.push(SessionTurn::Tool {
        call_id: call.id.clone(),
        content: "the still water at the turn of the tide".into(),
    });
    let second = harness
        .provider
        .converse(&request, &session, sender)
        .await
        .unwrap();
    assert!(second.tool_calls.is_empty(), "{:?}", harness.protocol);
    assert_is_a_brief(&second.content, harness.protocol);
    let sent = harness.server.requests()[1].body.to_string();
    assert!(
        sent.contains("the still water at the turn of the tide") && sent.contains(&call.id),
        "{:?}: the tool result travels with its call id: {sent}",
        harness.protocol
    );
}
