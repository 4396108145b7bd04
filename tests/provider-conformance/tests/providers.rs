//! Every scenario of the provider conformance suite, against every provider
//! through the scripted double of its wire protocol (a test double for the
//! provider's endpoint: OpenAI chat completions, Anthropic Messages SSE,
//! Bedrock ConverseStream event-stream frames).

use provider_conformance::*;
use scripted_llm::WireProtocol;

macro_rules! conformance {
    ($($scenario:ident),* $(,)?) => {
        mod openai_compatible {
            $(
                #[tokio::test]
                async fn $scenario() {
                    let harness = super::Harness::new(super::WireProtocol::OpenAiChat).await;
                    super::$scenario(&harness).await;
                }
            )*
        }
        mod anthropic_messages {
            $(
                #[tokio::test]
                async fn $scenario() {
                    let harness = super::Harness::new(super::WireProtocol::AnthropicMessages).await;
                    super::$scenario(&harness).await;
                }
            )*
        }
        mod bedrock_converse_stream {
            $(
                #[tokio::test]
                async fn $scenario() {
                    let harness = super::Harness::new(super::WireProtocol::BedrockConverseStream).await;
                    super::$scenario(&harness).await;
                }
            )*
        }
    };
}

conformance!(
    plain_text,
    schema_answer,
    deltas_in_order,
    tool_calls_in_pieces,
    usage_with_cached_tokens,
    rate_limited_then_answers,
    server_error_retried,
    refused_credential_not_retried,
    timeout_retried_then_given_up,
    cut_stream_restarted,
    session_round_trip,
);
