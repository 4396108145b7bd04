//! Amazon Bedrock's Converse API (`ConverseStream`) as a model provider,
//! signed with the process's AWS credentials (the function's IAM role):
//! text streamed as deltas, structured output as a forced answer tool (a
//! schema that is not an object wrapped under `answer`), tool use in agent
//! sessions, the system prompt followed by a `cachePoint` (where the catalog
//! says the model caches prompts), and usage with
//! cache reads and writes.
//!
//! The SDK's own retries are off: a failed call (throttled, unavailable,
//! timed out, a broken stream) is retried here, the same way for the first
//! response and mid-stream, with `ModelDelta::Restarted` told to readers of
//! streamed text. SDK types stay in this crate.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_bedrockruntime::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_bedrockruntime::operation::converse_stream::ConverseStreamError;
use aws_sdk_bedrockruntime::types::{
    CachePointBlock, CachePointType, ContentBlock, ContentBlockDelta, ContentBlockStart,
    ConversationRole, ConverseStreamOutput, InferenceConfiguration, Message, SpecificToolChoice,
    SystemContentBlock, Tool, ToolChoice, ToolConfiguration, ToolInputSchema, ToolResultBlock,
    ToolResultContentBlock, ToolSpecification, ToolUseBlock,
};
use aws_smithy_types::{Document, Number};
use baton_core::contracts::model_request::answer_from_tool_input;
use baton_core::records::conversation::{
    SessionAnswer, SessionTurn, ToolSession, ToolUse, turn_of_tool_uses,
};
use baton_core::state::context::ModelRequest;
use baton_core::state::run::TokenUsage;
use baton_runtime::error::LlmError;
use baton_runtime::models::retries::{AttemptFailure, RetryPolicy};
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

/// How a Bedrock provider calls and retries.
#[derive(Debug, Clone, Copy)]
pub struct BedrockSettings {
    /// `maxTokens` of every request.
    pub max_tokens: u32,
    /// Calls per request, the first included.
    pub max_attempts: u32,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// The longest one call may take, its stream included; a call that
    /// takes longer is a timeout, retried.
    pub request_timeout: Duration,
}

impl Default for BedrockSettings {
    fn default() -> Self {
        BedrockSettings {
            max_tokens: 4096,
            max_attempts: 5,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(20),
            request_timeout: Duration::from_secs(120),
        }
    }
}

/// Converse with the models of Amazon Bedrock.
pub struct BedrockProvider {
    /// Made at once from a given connection, or from the environment on
    /// first use (so a process that never calls Bedrock never loads it).
    client: tokio::sync::OnceCell<aws_sdk_bedrockruntime::Client>,
    settings: BedrockSettings,
}

/// Why one call failed.
/// What one streamed message held.
#[derive(Default)]
struct Streamed {
    text: String,
    /// Tool-use blocks by their content index.
    tool_uses: Vec<(i32, ToolUse)>,
    usage: TokenUsage,
}

impl BedrockProvider {
    /// The provider reached through `connection` (its region and
    /// credentials).
    pub fn new(connection: &crate::AwsConnection, settings: BedrockSettings) -> Self {
        BedrockProvider {
            client: tokio::sync::OnceCell::new_with(Some(connection.bedrock_client())),
            settings,
        }
    }

    /// The provider over a client a test configured itself (an
    /// interceptor that records its calls): the `testing` feature only.
    #[cfg(feature = "testing")]
    pub fn over_client(client: aws_sdk_bedrockruntime::Client, settings: BedrockSettings) -> Self {
        BedrockProvider {
            client: tokio::sync::OnceCell::new_with(Some(client)),
            settings,
        }
    }

    /// The provider reached through the environment's AWS configuration
    /// (region, the function's role), loaded on first use.
    pub fn from_environment(settings: BedrockSettings) -> Self {
        BedrockProvider {
            client: tokio::sync::OnceCell::new(),
            settings,
        }
    }

    async fn client(&self) -> &aws_sdk_bedrockruntime::Client {
        self.client
            .get_or_init(|| async {
                crate::AwsConnection::from_environment()
                    .await
                    .bedrock_client()
            })
            .await
    }

    /// Calls through the one retry skeleton every provider shares
    /// (`baton_runtime::models::retries`), each call bounded by the
    /// request timeout.
    async fn call_with_retries(
        &self,
        request: &ModelRequest,
        session: Option<&ToolSession>,
        deltas: &UnboundedSender<ModelDelta>,
    ) -> Result<(Streamed, bool), LlmError> {
        let policy = RetryPolicy {
            max_attempts: self.settings.max_attempts,
            initial_backoff: self.settings.initial_backoff,
            max_backoff: self.settings.max_backoff,
            ..RetryPolicy::default()
        };
        policy
            .run(deltas, || async move {
                let mut streamed_text = false;
                let call = self.call_once(request, session, deltas, &mut streamed_text);
                let answered = tokio::time::timeout(self.settings.request_timeout, call)
                    .await
                    .unwrap_or(Err(AttemptFailure::Timeout));
                (answered, streamed_text)
            })
            .await
    }

    async fn call_once(
        &self,
        request: &ModelRequest,
        session: Option<&ToolSession>,
        deltas: &UnboundedSender<ModelDelta>,
        streamed_text: &mut bool,
    ) -> Result<(Streamed, bool), AttemptFailure> {
        let model_id = model_id_of(request).ok_or_else(|| {
            AttemptFailure::Fatal(LlmError::Configuration(
                "a Bedrock request names no model (the catalog's modelId)".into(),
            ))
        })?;
        let (answer_tool, wrapped) = answer_tool(request).map_err(AttemptFailure::Fatal)?;
        let answer_name = request.answer_tool_name().to_string();
        let free_text = session.is_some_and(|session| session.free_text);
        let mut tools = Vec::new();
        if let Some(session) = session {
            for tool in &session.tools {
                tools.push(
                    tool_spec(&tool.name, &tool.description, &tool.parameters)
                        .map_err(AttemptFailure::Fatal)?,
                );
            }
        }
        if !free_text {
            tools.push(answer_tool);
        }
        let choice = match session {
            None => ToolChoice::Tool(
                SpecificToolChoice::builder()
                    .name(answer_name.clone())
                    .build()
                    .map_err(build_failure)?,
            ),
            Some(_) if free_text => {
                ToolChoice::Auto(aws_sdk_bedrockruntime::types::AutoToolChoice::builder().build())
            }
            Some(_) => {
                ToolChoice::Any(aws_sdk_bedrockruntime::types::AnyToolChoice::builder().build())
            }
        };
        let mut call = self
            .client()
            .await
            .converse_stream()
            .model_id(model_id)
            .system(SystemContentBlock::Text(request.system_instruction.clone()))
            .set_messages(Some(
                messages(request, session).map_err(AttemptFailure::Fatal)?,
            ))
            .inference_config(
                InferenceConfiguration::builder()
                    .max_tokens(i32::try_from(self.settings.max_tokens).unwrap_or(i32::MAX))
                    .build(),
            );
        if request.marks_prompt_cache() {
            // Bedrock refuses a cache point on a model without caching, so
            // only where the catalog says the model has it.
            call = call.system(SystemContentBlock::CachePoint(
                CachePointBlock::builder()
                    .r#type(CachePointType::Default)
                    .build()
                    .map_err(build_failure)?,
            ));
        }
        if !tools.is_empty() {
            call = call.tool_config(
                ToolConfiguration::builder()
                    .set_tools(Some(tools))
                    .tool_choice(choice)
                    .build()
                    .map_err(build_failure)?,
            );
        }
        let mut output = call.send().await.map_err(classify_call_error)?;
        let mut streamed = Streamed::default();
        let mut finished = false;
        loop {
            let event = match output.stream.recv().await {
                Ok(Some(event)) => event,
                Ok(None) => break,
                Err(error) => return Err(classify_stream_error(&error)),
            };
            match event {
                ConverseStreamOutput::ContentBlockStart(start) => {
                    if let Some(ContentBlockStart::ToolUse(tool_use)) = start.start {
                        streamed.tool_uses.push((
                            start.content_block_index,
                            ToolUse {
                                id: tool_use.tool_use_id,
                                name: tool_use.name,
                                input: String::new(),
                            },
                        ));
                    }
                }
                ConverseStreamOutput::ContentBlockDelta(delta) => {
                    let piece = match delta.delta {
                        Some(ContentBlockDelta::Text(text)) => {
                            streamed.text.push_str(&text);
                            text
                        }
                        Some(ContentBlockDelta::ToolUse(tool_use)) => {
                            if let Some(block) = streamed
                                .tool_uses
                                .iter_mut()
                                .find(|block| block.0 == delta.content_block_index)
                            {
                                block.1.input.push_str(&tool_use.input);
                            }
                            tool_use.input
                        }
                        _ => String::new(),
                    };
                    if !piece.is_empty() {
                        *streamed_text = true;
                        let _ = deltas.send(ModelDelta::Text(piece));
                    }
                }
                ConverseStreamOutput::MessageStop(_) => finished = true,
                ConverseStreamOutput::Metadata(metadata) => {
                    if let Some(usage) = metadata.usage {
                        let count = |tokens: i32| u64::try_from(tokens).unwrap_or(0);
                        let read = usage.cache_read_input_tokens.map_or(0, count);
                        let written = usage.cache_write_input_tokens.map_or(0, count);
                        streamed.usage = TokenUsage {
                            prompt_tokens: count(usage.input_tokens) + read + written,
                            completion_tokens: count(usage.output_tokens),
                            cached_prompt_tokens: read,
                            cache_write_prompt_tokens: written,
                        };
                    }
                }
                _ => {}
            }
        }
        if !finished {
            return Err(AttemptFailure::Transport(
                "the stream ended before the message stopped".into(),
            ));
        }
        Ok((streamed, wrapped))
    }
}

fn build_failure(error: impl std::fmt::Display) -> AttemptFailure {
    AttemptFailure::Fatal(LlmError::Configuration(format!(
        "the Bedrock request cannot be built: {error}"
    )))
}

fn classify_call_error(
    error: SdkError<ConverseStreamError, aws_smithy_runtime_api::http::Response>,
) -> AttemptFailure {
    match &error {
        SdkError::ServiceError(service) => {
            let status = service.raw().status().as_u16();
            let message = service.err().message().unwrap_or_default().to_string();
            match service.err() {
                ConverseStreamError::ThrottlingException(_) => {
                    AttemptFailure::RateLimited { retry_after: None }
                }
                ConverseStreamError::ServiceUnavailableException(_)
                | ConverseStreamError::InternalServerException(_)
                | ConverseStreamError::ModelNotReadyException(_)
                | ConverseStreamError::ModelTimeoutException(_)
                | ConverseStreamError::ModelStreamErrorException(_) => AttemptFailure::Server {
                    status,
                    body: message,
                    retry_after: None,
                },
                ConverseStreamError::AccessDeniedException(_) => {
                    AttemptFailure::Fatal(LlmError::Configuration(format!(
                        "Bedrock refused the call (HTTP {status}): the role needs bedrock:InvokeModelWithResponseStream on this model: {message}"
                    )))
                }
                _ if service.err().meta().code() == Some("UnrecognizedClientException")
                    || status == 401 =>
                {
                    AttemptFailure::Fatal(LlmError::Configuration(format!(
                        "Bedrock refused the credentials (HTTP {status}): give the function a role, or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) to valid credentials: {message}"
                    )))
                }
                _ => AttemptFailure::Fatal(LlmError::RequestRejected {
                    status,
                    body: message,
                }),
            }
        }
        SdkError::TimeoutError(_) => AttemptFailure::Timeout,
        other => AttemptFailure::Transport(baton_core::basics::error::with_causes(other)),
    }
}

fn classify_stream_error(error: &dyn std::error::Error) -> AttemptFailure {
    let text = baton_core::basics::error::with_causes(error);
    if text.contains("hrottl") {
        AttemptFailure::RateLimited { retry_after: None }
    } else {
        AttemptFailure::Transport(format!("the stream broke: {text}"))
    }
}

/// The answer tool, and whether the schema was wrapped under `answer`.
fn answer_tool(request: &ModelRequest) -> Result<(Tool, bool), LlmError> {
    let (input_schema, wrapped) = request.answer_tool_schema();
    let tool = tool_spec(
        request.answer_tool_name(),
        "Give your answer: its input is the answer, exactly under this schema.",
        &input_schema,
    )?;
    Ok((tool, wrapped))
}

fn tool_spec(name: &str, description: &str, schema: &Value) -> Result<Tool, LlmError> {
    ToolSpecification::builder()
        .name(name)
        .description(description)
        .input_schema(ToolInputSchema::Json(document_of(schema)))
        .build()
        .map(Tool::ToolSpec)
        .map_err(|error| LlmError::Configuration(format!("tool `{name}`: {error}")))
}

/// The first user message and the session's turns as Converse messages (a
/// tool's result goes back in a user message; consecutive results share it).
fn messages(
    request: &ModelRequest,
    session: Option<&ToolSession>,
) -> Result<Vec<Message>, LlmError> {
    let build = |role: ConversationRole, content: Vec<ContentBlock>| {
        Message::builder()
            .role(role)
            .set_content(Some(content))
            .build()
            .map_err(|error| LlmError::Configuration(format!("a message: {error}")))
    };
    let mut turns: Vec<(ConversationRole, Vec<ContentBlock>)> = vec![(
        ConversationRole::User,
        vec![ContentBlock::Text(request.user_message.clone())],
    )];
    for turn in session
        .map(|session| session.turns.as_slice())
        .unwrap_or_default()
    {
        match turn {
            SessionTurn::User { content } => {
                turns.push((
                    ConversationRole::User,
                    vec![ContentBlock::Text(content.clone())],
                ));
            }
            SessionTurn::Assistant {
                content,
                tool_calls,
            } => {
                let mut blocks = Vec::new();
                if !content.is_empty() {
                    blocks.push(ContentBlock::Text(content.clone()));
                }
                for call in tool_calls {
                    let input: Value =
                        serde_json::from_str(&call.arguments).unwrap_or_else(|_| json!({}));
                    blocks.push(ContentBlock::ToolUse(
                        ToolUseBlock::builder()
                            .tool_use_id(&call.id)
                            .name(&call.name)
                            .input(document_of(&input))
                            .build()
                            .map_err(|error| {
                                LlmError::Configuration(format!("a tool call: {error}"))
                            })?,
                    ));
                }
                turns.push((ConversationRole::Assistant, blocks));
            }
            SessionTurn::Tool { call_id, content } => {
                let result = ContentBlock::ToolResult(
                    ToolResultBlock::builder()
                        .tool_use_id(call_id)
                        .content(ToolResultContentBlock::Text(content.clone()))
                        .build()
                        .map_err(|error| {
                            LlmError::Configuration(format!("a tool result: {error}"))
                        })?,
                );
                match turns.last_mut() {
                    Some((ConversationRole::User, blocks))
                        if blocks.last().is_some_and(ContentBlock::is_tool_result) =>
                    {
                        blocks.push(result);
                    }
                    _ => turns.push((ConversationRole::User, vec![result])),
                }
            }
        }
    }
    turns
        .into_iter()
        .map(|(role, content)| build(role, content))
        .collect()
}

/// JSON as a Smithy document.
fn document_of(value: &Value) -> Document {
    match value {
        Value::Null => Document::Null,
        Value::Bool(flag) => Document::Bool(*flag),
        Value::Number(number) => match (number.as_u64(), number.as_i64(), number.as_f64()) {
            (Some(whole), _, _) => Document::Number(Number::PosInt(whole)),
            (None, Some(negative), _) => Document::Number(Number::NegInt(negative)),
            (_, _, Some(float)) => Document::Number(Number::Float(float)),
            _ => Document::Null,
        },
        Value::String(text) => Document::String(text.clone()),
        Value::Array(items) => Document::Array(items.iter().map(document_of).collect()),
        Value::Object(fields) => Document::Object(
            fields
                .iter()
                .map(|(key, value)| (key.clone(), document_of(value)))
                .collect(),
        ),
    }
}

/// An answer tool's input that is not JSON.
fn unreadable(error: serde_json::Error) -> LlmError {
    LlmError::UnexpectedResponse(format!("the answer tool's input is not JSON: {error}"))
}

/// The provider's id of the model `request` goes to.
fn model_id_of(request: &ModelRequest) -> Option<String> {
    request.model.as_ref().map(|target| target.model_id.clone())
}

#[async_trait]
impl LlmProvider for BedrockProvider {
    fn model_name(&self) -> String {
        "bedrock".into()
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        let (streamed, wrapped) = self.call_with_retries(request, None, &deltas).await?;
        let input = streamed
            .tool_uses
            .first()
            .map(|block| block.1.input.clone())
            .ok_or_else(|| {
                LlmError::UnexpectedResponse("the message called no answer tool".into())
            })?;
        Ok(ModelAnswer {
            content: answer_from_tool_input(&input, wrapped).map_err(unreadable)?,
            usage: streamed.usage,
            model: model_id_of(request).unwrap_or_default(),
        })
    }

    async fn converse(
        &self,
        request: &ModelRequest,
        session: &ToolSession,
        deltas: UnboundedSender<ModelDelta>,
    ) -> Result<SessionAnswer, LlmError> {
        let (streamed, wrapped) = self
            .call_with_retries(request, Some(session), &deltas)
            .await?;
        let (content, tool_calls) = turn_of_tool_uses(
            streamed.text,
            streamed
                .tool_uses
                .into_iter()
                .map(|(_, tool_use)| tool_use)
                .collect(),
            request.answer_tool_name(),
            session.free_text,
            wrapped,
        )
        .map_err(unreadable)?;
        Ok(SessionAnswer {
            content,
            tool_calls,
            usage: streamed.usage,
            model: model_id_of(request).unwrap_or_default(),
        })
    }
}
