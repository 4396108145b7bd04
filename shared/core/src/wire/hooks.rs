//! The stream rendered as an agent orchestrator's hook events (`--format
//! hooks`): the same frames, named the way hook-based orchestrators name
//! them. One table, kept here and in `events/README.md`:
//!
//! | frame | hook event | data |
//! | --- | --- | --- |
//! | `start` | `prompt:submit` | `prompt` (the objective), `runId` |
//! | `plan_requested` (the LLM planner) | `provider:request` | `planner`, `iteration` (the draft) |
//! | `plan_generated` / `plan_updated` / `plan_rejected` after it | `provider:response` | `planner`, `response` (the plan version, or the rejection), `usage`, `model` (the draft's; absent when the model failed and the deterministic planner planned) |
//! | `node_start` (AI) | `provider:request` | `nodeId`, `capabilityId`, `iteration` (the attempt), `model`, `messages` |
//! | `agent_state` `thinking` (an agent's model turn) | `provider:request` | `nodeId`, `iteration` (the turn), `model`, `messages` (the session so far) |
//! | `progress` after a judge's call (`judgeCall`) | `provider:request`, then `provider:response` (unless the model failed) | `nodeId`, `judgeId`, `iteration` (the round), `model`, `messages` (the judge's system prompt and question, which the renderers fill in from the panel round); `response` (`score`, or `error` when the answer was refused), `usage` |
//! | `delta` | `provider:stream` | `nodeId`, `chunk` |
//! | `tool_call` (the first of a turn) | `provider:response`, then `tool:pre` | `nodeId`, `response` (the calls asked for), `usage`, `model`; `tool_name`, `input` |
//! | `tool_call` (the others) | `tool:pre` | `tool_name`, `input` |
//! | `tool_result` | `tool:post` | `tool_name`, `result` |
//! | `message` (an agent's answer) | `provider:response` | `nodeId`, `response` (the text), `usage`, `model` |
//! | `node_complete` (an AI node, not `reused`; an agent's came with its `message`) | `provider:response` | `nodeId`, `response` (the output), `usage`, `model` |
//! | `complete` | `prompt:complete`, then `orchestrator:complete` | `response`; `orchestrator`, `turn_count`, `status: success` |
//! | `error` | `orchestrator:complete` | `orchestrator`, `turn_count`, `status: error` (`incomplete` for `agent_incomplete`: a guardrail ended an agent session), `code`, `error` (the error text) |
//! | (the stream stops on a run waiting for a person) | `orchestrator:complete` | `status: incomplete` |
//!
//! Every event's data is redacted by the rules snapshots follow: a
//! secret-named key's value (`apiKey`, `accessToken`, …) is replaced.
//!
//! `messages` are rebuilt from the frames (`{role, content}`: the node's
//! system instructions from its `node_start`, which the renderers fill in
//! from the run's plan, then each turn's tool calls and results); a node's
//! inputs are the outputs of the `node_complete` frames before it, and are
//! not repeated. Other frames have no hook event. `orchestrator:complete`
//! comes once and last; `turn_count` counts model requests (the planner's
//! drafts, AI nodes, agent turns, judges' calls). A judge that timed out has
//! no frame of its own call and is not counted.

use serde_json::{Value, json};

use crate::basics::redaction::redact;
use crate::wire::event::{EventFrame, EventType};

/// The orchestrator's name in `orchestrator:complete`.
pub const ORCHESTRATOR_NAME: &str = "baton";

/// One hook event.
#[derive(Debug, Clone, PartialEq)]
pub struct HookEvent {
    pub event: &'static str,
    pub data: Value,
}

impl HookEvent {
    /// As one NDJSON line: `{event, data, runId, id}` (`id`: the frame's sequence).
    pub fn to_line(&self, frame_id: u64, run_id: &str) -> String {
        json!({"event": self.event, "data": self.data, "runId": run_id, "id": frame_id}).to_string()
    }
}

/// Renders a run's frames in order.
#[derive(Debug, Default)]
pub struct HookRenderer {
    turns: u32,
    ended: bool,
    /// Each agent node's session so far, as `{role, content}` messages.
    sessions: std::collections::BTreeMap<String, Vec<Value>>,
    /// A planner draft was requested and not answered yet.
    planning: bool,
}

impl HookRenderer {
    fn ended(&mut self, status: &str, extra: &[(&str, Value)]) -> HookEvent {
        self.ended = true;
        let mut data =
            json!({"orchestrator": ORCHESTRATOR_NAME, "turn_count": self.turns, "status": status});
        for (key, value) in extra {
            data[*key] = value.clone();
        }
        HookEvent {
            event: "orchestrator:complete",
            data,
        }
    }

    /// The hook events of `frame` (none for most frames).
    pub fn render(&mut self, frame: &EventFrame) -> Vec<HookEvent> {
        // A child run's relayed frames are its own story, not this orchestrator's.
        if self.ended || frame.forwarded {
            return Vec::new();
        }
        let payload = frame
            .payload
            .as_ref()
            .map_or(Value::Null, |payload| payload.value().clone());
        let node = frame.node_id.clone().unwrap_or_default();
        // Secret-named keys (a tool's `apiKey` argument, a result's token)
        // are redacted as in snapshots (`basics::redaction`).
        let event = |event: &'static str, data: Value| HookEvent {
            event,
            data: redact(&data),
        };
        match frame.event_type {
            EventType::Start => vec![event(
                "prompt:submit",
                json!({"prompt": payload["objective"], "runId": frame.run_id}),
            )],
            EventType::PlanRequested if payload["planner"] == "llm" => {
                self.turns += 1;
                self.planning = true;
                vec![event(
                    "provider:request",
                    json!({"planner": "llm", "iteration": payload["attempt"]}),
                )]
            }
            EventType::PlanGenerated | EventType::PlanUpdated | EventType::PlanRejected
                if self.planning =>
            {
                self.planning = false;
                let response = match frame.event_type {
                    EventType::PlanGenerated => {
                        json!({"planVersion": payload["planVersion"], "nodes": payload["nodes"]})
                    }
                    EventType::PlanUpdated => {
                        json!({"planVersion": payload["version"], "nodes": payload["nodes"]})
                    }
                    _ => json!({"rejected": frame.message.clone().unwrap_or_default()}),
                };
                vec![event(
                    "provider:response",
                    json!({"planner": "llm", "response": response, "usage": payload["response"]["usage"], "model": payload["response"]["model"]}),
                )]
            }
            EventType::NodeStart if payload["executorType"] == "ai" => {
                self.turns += 1;
                vec![event(
                    "provider:request",
                    json!({
                        "nodeId": node,
                        "capabilityId": payload["capabilityId"],
                        "iteration": payload["attempt"],
                        "model": payload["model"],
                        "messages": opening_messages(&payload),
                    }),
                )]
            }
            EventType::NodeStart if payload["executorType"] == "agent" => {
                self.sessions.insert(node, opening_messages(&payload));
                Vec::new()
            }
            EventType::AgentState if payload["state"] == "thinking" => {
                self.turns += 1;
                let messages = self.sessions.get(&node).cloned().unwrap_or_default();
                vec![event(
                    "provider:request",
                    json!({"nodeId": node, "iteration": payload["turn"], "model": payload["model"], "messages": messages}),
                )]
            }
            EventType::Progress if payload["judgeCall"].is_object() => {
                self.turns += 1;
                let call = &payload["judgeCall"];
                let answer = if call["error"].is_null() {
                    json!({"score": call["score"]})
                } else {
                    json!({"error": call["error"]})
                };
                let mut events = vec![event(
                    "provider:request",
                    json!({"nodeId": node, "judgeId": call["judgeId"], "iteration": call["round"], "model": call["response"]["model"], "messages": call["messages"]}),
                )];
                if !call["response"].is_null() {
                    events.push(event(
                        "provider:response",
                        json!({"nodeId": node, "judgeId": call["judgeId"], "response": answer, "usage": call["response"]["usage"], "model": call["response"]["model"]}),
                    ));
                }
                events
            }
            EventType::Delta => vec![event(
                "provider:stream",
                json!({"nodeId": node, "chunk": frame.message.clone().unwrap_or_default()}),
            )],
            EventType::Message => {
                let text = frame.message.clone().unwrap_or_default();
                self.remember(&node, json!({"role": "assistant", "content": text}));
                vec![event(
                    "provider:response",
                    json!({"nodeId": node, "response": text, "usage": payload["response"]["usage"], "model": payload["response"]["model"]}),
                )]
            }
            EventType::NodeComplete
                if !self.sessions.contains_key(&node) && payload["reused"] != true =>
            {
                vec![event(
                    "provider:response",
                    json!({"nodeId": node, "response": payload["output"], "usage": payload["usage"], "model": payload["model"]}),
                )]
            }
            EventType::ToolCall => {
                let call = json!({"name": payload["toolName"], "input": payload["args"]});
                self.remember(
                    &node,
                    json!({"role": "assistant", "content": Value::Null, "toolCall": call}),
                );
                let mut events = Vec::new();
                if !payload["response"].is_null() {
                    events.push(event(
                        "provider:response",
                        json!({"nodeId": node, "response": {"toolCall": call}, "usage": payload["response"]["usage"], "model": payload["response"]["model"]}),
                    ));
                }
                events.push(event(
                    "tool:pre",
                    json!({"tool_name": payload["toolName"], "input": payload["args"]}),
                ));
                events
            }
            EventType::ToolResult => {
                let result = if payload["error"].is_null() {
                    payload["result"].clone()
                } else {
                    payload["error"].clone()
                };
                self.remember(
                    &node,
                    json!({"role": "tool", "name": payload["toolName"], "content": result}),
                );
                vec![event(
                    "tool:post",
                    json!({"tool_name": payload["toolName"], "result": payload["result"]}),
                )]
            }
            EventType::Complete => vec![
                event("prompt:complete", json!({"response": payload["output"]})),
                self.ended("success", &[]),
            ],
            EventType::Error => {
                let status = if payload["code"] == "agent_incomplete" {
                    "incomplete"
                } else {
                    "error"
                };
                let mut extra = vec![("code", payload["code"].clone())];
                if let Some(message) = &frame.message {
                    extra.push(("error", Value::String(message.clone())));
                }
                vec![self.ended(status, &extra)]
            }
            _ => Vec::new(),
        }
    }

    /// Adds `message` to an agent node's session.
    fn remember(&mut self, node: &str, message: Value) {
        if let Some(session) = self.sessions.get_mut(node) {
            session.push(message);
        }
    }

    /// The stream stopped without an ending (the run waits for a person):
    /// `orchestrator:complete` with `status: incomplete`, unless one came.
    pub fn finish_unended(&mut self) -> Option<HookEvent> {
        (!self.ended).then(|| self.ended("incomplete", &[]))
    }
}

/// A node's first messages, from its `node_start`: its instructions as
/// the system message, its inputs as the user's.
fn opening_messages(node_start: &Value) -> Vec<Value> {
    let mut messages = Vec::new();
    if let Some(instructions) = node_start["instructions"].as_str() {
        messages.push(json!({"role": "system", "content": instructions}));
    }
    if !node_start["inputs"].is_null() {
        messages.push(json!({"role": "user", "content": node_start["inputs"].to_string()}));
    }
    messages
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(event_type: EventType, node: Option<&str>, payload: Value) -> EventFrame {
        let mut draft = crate::wire::event::EventDraft::new(event_type, "2026-01-01T00:00:00Z", 1)
            .message("chunk")
            .payload(payload);
        if let Some(node) = node {
            draft = draft.node(node);
        }
        draft.into_frame(1, "run_1", "c")
    }

    #[test]
    fn a_run_renders_as_hook_events_ending_once_with_orchestrator_complete() {
        let mut renderer = HookRenderer::default();
        let frames = [
            frame(EventType::Start, None, json!({"objective": "o"})),
            frame(EventType::Phase, None, json!({"phase": "planning"})),
            frame(
                EventType::NodeStart,
                Some("node_1"),
                json!({"executorType": "ai", "capabilityId": "c", "attempt": 1}),
            ),
            frame(EventType::Delta, Some("node_1"), Value::Null),
            frame(
                EventType::ToolCall,
                Some("node_1"),
                json!({"toolName": "t", "args": {"a": 1}}),
            ),
            frame(
                EventType::ToolResult,
                Some("node_1"),
                json!({"toolName": "t", "result": {"b": 2}}),
            ),
            frame(
                EventType::NodeComplete,
                Some("node_1"),
                json!({"output": {"x": 1}}),
            ),
            frame(
                EventType::NodeStart,
                Some("node_2"),
                json!({"executorType": "builtin"}),
            ),
            frame(EventType::Complete, None, json!({"output": {"x": 1}})),
            frame(EventType::Error, None, json!({"code": "cancelled"})),
        ];
        let events: Vec<HookEvent> = frames
            .iter()
            .flat_map(|frame| renderer.render(frame))
            .collect();
        let names: Vec<&str> = events.iter().map(|event| event.event).collect();
        assert_eq!(
            names,
            [
                "prompt:submit",
                "provider:request",
                "provider:stream",
                "tool:pre",
                "tool:post",
                "provider:response",
                "prompt:complete",
                "orchestrator:complete"
            ]
        );
        assert_eq!(
            events.last().unwrap().data,
            json!({"orchestrator": "baton", "turn_count": 1, "status": "success"})
        );
        assert_eq!(events[3].data, json!({"tool_name": "t", "input": {"a": 1}}));
        assert_eq!(renderer.finish_unended(), None, "it ended once");
    }

    #[test]
    fn a_failed_or_parked_run_ends_with_its_status() {
        let mut failed = HookRenderer::default();
        let mut rejected = frame(
            EventType::Error,
            None,
            json!({"code": "plan_rejected", "status": "plan_rejected"}),
        );
        rejected.message = Some("no plan makes `copyVariants`".into());
        let events = failed.render(&rejected);
        assert_eq!(
            events[0].data,
            json!({"orchestrator": "baton", "turn_count": 0, "status": "error", "code": "plan_rejected", "error": "no plan makes `copyVariants`"})
        );
        let mut stopped = HookRenderer::default();
        stopped.render(&frame(
            EventType::AgentState,
            Some("node_1"),
            json!({"state": "thinking", "turn": 0}),
        ));
        let events = stopped.render(&frame(
            EventType::Error,
            None,
            json!({"code": "agent_incomplete", "status": "failed"}),
        ));
        assert_eq!(
            events[0].data,
            json!({"orchestrator": "baton", "turn_count": 1, "status": "incomplete", "code": "agent_incomplete", "error": "chunk"})
        );
        let mut parked = HookRenderer::default();
        parked.render(&frame(EventType::Start, None, json!({"objective": "o"})));
        let last = parked.finish_unended().unwrap();
        assert_eq!(last.data["status"], "incomplete");
        assert_eq!(
            last.to_line(7, "run_1"),
            json!({"event": "orchestrator:complete", "data": last.data, "runId": "run_1", "id": 7})
                .to_string()
        );
    }

    #[test]
    fn secret_named_keys_are_redacted_in_every_event() {
        let mut renderer = HookRenderer::default();
        renderer.render(&frame(
            EventType::NodeStart,
            Some("n"),
            json!({"executorType": "agent", "instructions": "Look things up."}),
        ));
        let events = renderer.render(&frame(
            EventType::ToolCall,
            Some("n"),
            json!({"toolName": "lookup", "args": {"query": "q", "apiKey": "sk-live-1"}, "callId": "c", "turn": 0}),
        ));
        assert_eq!(events[0].event, "tool:pre");
        assert_eq!(events[0].data["input"]["apiKey"], "[redacted]");
        assert_eq!(events[0].data["input"]["query"], "q");
        let next = renderer.render(&frame(
            EventType::AgentState,
            Some("n"),
            json!({"state": "thinking", "turn": 1}),
        ));
        let said = next[0].data["messages"].to_string();
        assert!(!said.contains("sk-live-1"), "{said}");
    }
}
