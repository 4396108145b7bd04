//! Tool calling for the offline model, which has no tool-call protocol of
//! its own: the offered tools are described in the system prompt, and the
//! answer is decoded under one grammar that allows exactly "a call of one
//! of the offered tools, its arguments under that tool's schema" or "the
//! final answer" (`{"tool", "arguments"}` or `{"answer"}`), so every call the
//! model makes is valid by construction. Earlier turns are replayed as chat
//! messages (a tool's result as a user message naming the tool).

use baton_core::records::conversation::{SessionAnswer, SessionTurn, ToolCallRequest, ToolSession};
use baton_core::state::context::ModelRequest;
use baton_core::state::run::TokenUsage;
use serde_json::{Value, json};

/// How many tool results the session holds (the tool rounds it made).
pub fn tool_rounds(session: &ToolSession) -> u32 {
    let rounds = session
        .turns
        .iter()
        .filter(|turn| matches!(turn, SessionTurn::Tool { .. }))
        .count();
    u32::try_from(rounds).unwrap_or(u32::MAX)
}

/// The decoding schema of a turn: one of the tools' calls (while
/// `tools_allowed`), or the answer (free text in chat, else the request's
/// output schema).
pub fn turn_schema(request: &ModelRequest, session: &ToolSession, tools_allowed: bool) -> Value {
    let answer = if session.free_text {
        json!({"type": "string"})
    } else {
        request.output_schema.as_ref().clone()
    };
    let offered = if tools_allowed {
        session.tools.as_slice()
    } else {
        &[]
    };
    let mut choices: Vec<Value> = offered
        .iter()
        .map(|tool| {
            json!({"type": "object", "required": ["tool", "arguments"], "additionalProperties": false,
                   "properties": {"tool": {"const": tool.name}, "arguments": tool.parameters.as_ref()}})
        })
        .collect();
    choices.push(
        json!({"type": "object", "required": ["answer"], "additionalProperties": false,
                        "properties": {"answer": answer}}),
    );
    json!({"oneOf": choices})
}

/// The chat messages of a turn: the system prompt with the tools and how to
/// call them, the first user message, then the session's turns.
pub fn turn_messages(request: &ModelRequest, session: &ToolSession) -> Vec<(String, String)> {
    let mut system = request.system_instruction.clone();
    if !session.tools.is_empty() {
        system.push_str("\n\nYou may call one of these tools before you answer:");
        for tool in &session.tools {
            system.push_str(&format!(
                "\n- {}: {} Arguments: {}",
                tool.name, tool.description, tool.parameters
            ));
        }
        system.push_str(
            "\nTo call a tool, reply {\"tool\": <name>, \"arguments\": {...}}; its result comes back in the next message. When you can answer, reply {\"answer\": ...}.",
        );
    }
    let mut messages = vec![
        ("system".to_string(), system),
        ("user".to_string(), request.user_message.clone()),
    ];
    let mut names = std::collections::BTreeMap::new();
    for turn in &session.turns {
        match turn {
            SessionTurn::User { content } => messages.push(("user".into(), content.clone())),
            SessionTurn::Assistant {
                content,
                tool_calls,
            } => {
                for call in tool_calls {
                    names.insert(call.id.clone(), call.name.clone());
                    let arguments: Value =
                        serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
                    messages.push((
                        "assistant".into(),
                        json!({"tool": call.name, "arguments": arguments}).to_string(),
                    ));
                }
                if tool_calls.is_empty() {
                    messages.push(("assistant".into(), content.clone()));
                }
            }
            SessionTurn::Tool { call_id, content } => {
                let name = names.get(call_id).cloned().unwrap_or_default();
                messages.push(("user".into(), format!("Result of {name}: {content}")));
            }
        }
    }
    messages
}

/// Why a decoded turn is unreadable.
#[derive(Debug, thiserror::Error)]
pub enum UnreadableTurn {
    #[error("not JSON: {0}")]
    NotJson(#[from] serde_json::Error),
    #[error("neither a tool call nor an answer")]
    NeitherToolNorAnswer,
}

/// Reads a decoded turn (`{"tool", "arguments"}` or `{"answer"}`).
pub fn read_turn(
    decoded: &str,
    session: &ToolSession,
    usage: TokenUsage,
    model: String,
) -> Result<SessionAnswer, UnreadableTurn> {
    let value: Value = serde_json::from_str(decoded)?;
    if let Some(name) = value.get("tool").and_then(Value::as_str) {
        let turn = session
            .turns
            .iter()
            .filter(|turn| matches!(turn, SessionTurn::Assistant { .. }))
            .count();
        return Ok(SessionAnswer {
            content: String::new(),
            tool_calls: vec![ToolCallRequest {
                id: format!("call_{turn}"),
                name: name.to_string(),
                arguments: value["arguments"].to_string(),
            }],
            usage,
            model,
        });
    }
    let answer = value
        .get("answer")
        .ok_or(UnreadableTurn::NeitherToolNorAnswer)?;
    let content = match (session.free_text, answer) {
        (true, Value::String(text)) => text.clone(),
        _ => answer.to_string(),
    };
    Ok(SessionAnswer {
        content,
        tool_calls: Vec::new(),
        usage,
        model,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use baton_core::records::conversation::OfferedTool;

    use super::*;

    fn session() -> ToolSession {
        ToolSession {
            tools: vec![OfferedTool {
                name: "lookup".into(),
                description: "Looks a word up.".into(),
                parameters: Arc::new(json!({"type": "object", "required": ["word"],
                                            "properties": {"word": {"type": "string"}}})),
            }],
            turns: Vec::new(),
            free_text: true,
        }
    }

    fn request() -> ModelRequest {
        ModelRequest {
            system_instruction: "Help.".into(),
            user_message: "What is a baton?".into(),
            schema_name: "chat".into(),
            output_schema: Arc::new(json!({"type": "object"})),
            model: None,
        }
    }

    #[test]
    fn a_turn_is_a_call_of_an_offered_tool_or_the_answer() {
        let schema = turn_schema(&request(), &session(), true);
        let answer_only =
            jsonschema::validator_for(&turn_schema(&request(), &session(), false)).unwrap();
        assert!(!answer_only.is_valid(&json!({"tool": "lookup", "arguments": {"word": "baton"}})));
        assert!(answer_only.is_valid(&json!({"answer": "A stick."})));
        let validator = jsonschema::validator_for(&schema).unwrap();
        assert!(validator.is_valid(&json!({"tool": "lookup", "arguments": {"word": "baton"}})));
        assert!(validator.is_valid(&json!({"answer": "A stick."})));
        assert!(!validator.is_valid(&json!({"tool": "lookup", "arguments": {}})));
        assert!(!validator.is_valid(&json!({"tool": "other", "arguments": {"word": "x"}})));
        let call = read_turn(
            r#"{"tool": "lookup", "arguments": {"word": "baton"}}"#,
            &session(),
            TokenUsage::default(),
            "m".into(),
        )
        .unwrap();
        assert_eq!(call.tool_calls[0].name, "lookup");
        let answer = read_turn(
            r#"{"answer": "A stick."}"#,
            &session(),
            TokenUsage::default(),
            "m".into(),
        )
        .unwrap();
        assert_eq!(
            (answer.content.as_str(), answer.tool_calls.len()),
            ("A stick.", 0)
        );
    }

    #[test]
    fn earlier_turns_are_replayed_with_the_tool_named() {
        let mut session = session();
        session.turns = vec![
            SessionTurn::Assistant {
                content: String::new(),
                tool_calls: vec![ToolCallRequest {
                    id: "call_0".into(),
                    name: "lookup".into(),
                    arguments: json!({"word": "baton"}).to_string(),
                }],
            },
            SessionTurn::Tool {
                call_id: "call_0".into(),
                content: json!({"meaning": "a stick"}).to_string(),
            },
        ];
        let messages = turn_messages(&request(), &session);
        assert!(messages[0].1.contains("lookup: Looks a word up."));
        assert_eq!(messages[2].0, "assistant");
        assert_eq!(
            messages[3],
            (
                "user".to_string(),
                r#"Result of lookup: {"meaning":"a stick"}"#.to_string()
            )
        );
    }
}
