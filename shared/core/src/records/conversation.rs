//! A model conversation with tools: the tools offered, the turns so far
//! (assistant tool calls, their results, text), and what a turn answered.
//! The engine keeps these in the run state between steps; the model port
//! (`LlmProvider::converse`) sends them.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::basics::usage::TokenUsage;

/// A tool offered to the model (its definition as the provider sends it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OfferedTool {
    pub name: String,
    pub description: String,
    pub parameters: Arc<Value>,
}

/// A call the model asked for; `arguments` is the JSON text it wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallRequest {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// One earlier turn of the conversation, after the system instruction and
/// the first user message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum SessionTurn {
    User {
        content: String,
    },
    Assistant {
        #[serde(default)]
        content: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCallRequest>,
    },
    /// A tool call's result (or error) as the model reads it.
    Tool {
        call_id: String,
        content: String,
    },
}

/// The tools and turns of a conversation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSession {
    pub tools: Vec<OfferedTool>,
    pub turns: Vec<SessionTurn>,
    /// The answer is free text (chat), not JSON under the request's schema.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub free_text: bool,
}

/// What one model turn answered: text, or tool calls (or both).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionAnswer {
    pub content: String,
    pub tool_calls: Vec<ToolCallRequest>,
    pub usage: TokenUsage,
    pub model: String,
}

/// One call of a tool as its executor receives it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInvocation {
    pub call_id: String,
    /// Checked against the tool's schema before the call is made.
    pub arguments: Value,
    /// `runId:nodeId:turn:callId`: the same for every retry of the call.
    pub idempotency_key: String,
}

/// What a tool call produced: a result for the model, or an error it can read.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutcome {
    Succeeded(Value),
    Failed { message: String, retryable: bool },
}

impl ToolOutcome {
    /// A failure that the same call would meet again.
    pub fn failed(message: impl Into<String>) -> Self {
        ToolOutcome::Failed {
            message: message.into(),
            retryable: false,
        }
    }
}

/// One tool-use block of a provider's answer (Anthropic, Bedrock).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolUse {
    pub id: String,
    pub name: String,
    /// The input as JSON text (streamed in pieces, joined).
    pub input: String,
}

/// A turn's text and tool calls from a provider that answers through an
/// answer tool: a call of `answer_tool` is the answer (unless the session
/// answers in free text), any other call a tool call.
pub fn turn_of_tool_uses(
    text: String,
    tool_uses: Vec<ToolUse>,
    answer_tool: &str,
    free_text: bool,
    wrapped: bool,
) -> Result<(String, Vec<ToolCallRequest>), serde_json::Error> {
    let mut content = text;
    let mut tool_calls = Vec::new();
    for tool_use in tool_uses {
        if !free_text && tool_use.name == answer_tool {
            content =
                crate::contracts::model_request::answer_from_tool_input(&tool_use.input, wrapped)?;
        } else {
            tool_calls.push(ToolCallRequest {
                id: tool_use.id,
                name: tool_use.name,
                arguments: if tool_use.input.trim().is_empty() {
                    "{}".into()
                } else {
                    tool_use.input
                },
            });
        }
    }
    Ok((content, tool_calls))
}

#[cfg(test)]
mod tool_use_tests {
    use super::*;

    fn tool_use(name: &str, input: &str) -> ToolUse {
        ToolUse {
            id: format!("id-{name}"),
            name: name.into(),
            input: input.into(),
        }
    }

    #[test]
    fn the_answer_tool_is_the_answer_and_other_tools_are_calls() {
        let (content, calls) = turn_of_tool_uses(
            "thinking".into(),
            vec![
                tool_use("search", ""),
                tool_use("brief", "{\"text\": \"t\"}"),
            ],
            "brief",
            false,
            false,
        )
        .unwrap();
        assert_eq!(content, "{\"text\": \"t\"}");
        assert_eq!(
            calls,
            vec![ToolCallRequest {
                id: "id-search".into(),
                name: "search".into(),
                arguments: "{}".into()
            }]
        );
        // In free text (chat) a tool named like the answer is still a call.
        let (content, calls) = turn_of_tool_uses(
            "Hi.".into(),
            vec![tool_use("brief", "{}")],
            "brief",
            true,
            false,
        )
        .unwrap();
        assert_eq!((content.as_str(), calls.len()), ("Hi.", 1));
    }
}
