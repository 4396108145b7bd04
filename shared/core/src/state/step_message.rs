//! The queue message: one step of one run, and the command it carries.
//! A message's id is deterministic per (run, command), so duplicates
//! share it and a store can consume each once.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a step message asks the worker to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StepCommand {
    Plan,
    /// The planner model drafts plan `version` to replace the current one
    /// (`RunState::pending_replan` says why); only under the LLM planner.
    Replan {
        version: u32,
    },
    ExecuteNode {
        #[serde(rename = "nodeId")]
        node_id: String,
        attempt: u32,
    },
    /// One judge of a panel node scores (or discusses) one round.
    AskJudge {
        #[serde(rename = "nodeId")]
        node_id: String,
        attempt: u32,
        round: u32,
        #[serde(rename = "judgeId")]
        judge_id: String,
    },
    /// Model turn `turn` of an agent node's session (its first turn is
    /// the node's own step).
    AgentTurn {
        #[serde(rename = "nodeId")]
        node_id: String,
        attempt: u32,
        turn: u32,
    },
    /// One tool call the model asked for in `turn`.
    RunTool {
        #[serde(rename = "nodeId")]
        node_id: String,
        attempt: u32,
        turn: u32,
        #[serde(rename = "callId")]
        call_id: String,
    },
    /// A child run that a session's `agent_create_plan` call started has
    /// ended: `summary` (status, output, usage) is the call's result.
    ChildRunEnded {
        #[serde(rename = "nodeId")]
        node_id: String,
        attempt: u32,
        turn: u32,
        #[serde(rename = "callId")]
        call_id: String,
        summary: Value,
    },
    /// A durable timer comes due (its message carries `notBefore`).
    FireTimer {
        #[serde(rename = "timerId")]
        timer_id: String,
    },
    /// The run's parent ended (any way: completed, failed, cancelled, over
    /// budget): this run, which the parent's agent session was waiting
    /// for, is cancelled too. Written in the parent's ending commit, so
    /// the cascade is as durable as the parent's end.
    CancelRun {
        reason: String,
    },
    /// A chat run settled (ended, or parked for a person): its thread's
    /// lane lets the next queued message's run start. `release` counts the
    /// run's settlings (a run parked and resumed settles again), so each
    /// release is a message of its own. Written in the settling commit,
    /// so a process that dies before the release leaves it to redelivery
    /// or the sweeper, never to the next message on the thread.
    ReleaseThreadLane {
        #[serde(rename = "threadId")]
        thread_id: String,
        release: u32,
    },
    /// One attempt at writing a completed run's remembered facets to the
    /// tenant's memory (`remembering`).
    Remember {
        attempt: u32,
    },
    /// One delivery attempt of a completion notification (`notifications`).
    Notify {
        #[serde(rename = "notificationId")]
        notification_id: String,
        attempt: u32,
    },
}

/// The queue message: one step of one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepMessage {
    /// Deterministic per (run, command): duplicates share it.
    pub message_id: String,
    pub tenant_id: String,
    pub run_id: String,
    pub command: StepCommand,
    /// The step must not run before (a timer; RFC 3339 on the wire, and a
    /// message whose `notBefore` is not a time is malformed, never "due
    /// now"). The queue delays it as far as it can; a worker that gets it
    /// early defers it again.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::basics::instant::rfc3339_option"
    )]
    pub not_before: Option<crate::basics::instant::Instant>,
    /// The W3C `traceparent` the step continues (the run's root span as
    /// its parent), stamped on the message when its write is committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

impl StepCommand {
    /// The node the command is about, if any.
    pub fn node_id(&self) -> Option<&str> {
        match self {
            StepCommand::ExecuteNode { node_id, .. }
            | StepCommand::AskJudge { node_id, .. }
            | StepCommand::AgentTurn { node_id, .. }
            | StepCommand::RunTool { node_id, .. }
            | StepCommand::ChildRunEnded { node_id, .. } => Some(node_id),
            StepCommand::Plan
            | StepCommand::Replan { .. }
            | StepCommand::FireTimer { .. }
            | StepCommand::CancelRun { .. }
            | StepCommand::ReleaseThreadLane { .. }
            | StepCommand::Notify { .. }
            | StepCommand::Remember { .. } => None,
        }
    }

    /// The command's kind as its wire `kind` says it (a step span's name).
    pub fn kind_name(&self) -> &'static str {
        match self {
            StepCommand::Plan => "plan",
            StepCommand::Replan { .. } => "replan",
            StepCommand::ExecuteNode { .. } => "execute_node",
            StepCommand::AskJudge { .. } => "ask_judge",
            StepCommand::AgentTurn { .. } => "agent_turn",
            StepCommand::RunTool { .. } => "run_tool",
            StepCommand::ChildRunEnded { .. } => "child_run_ended",
            StepCommand::FireTimer { .. } => "fire_timer",
            StepCommand::Notify { .. } => "notify",
            StepCommand::Remember { .. } => "remember",
            StepCommand::CancelRun { .. } => "cancel_run",
            StepCommand::ReleaseThreadLane { .. } => "release_thread_lane",
        }
    }
}

impl StepMessage {
    /// The run this step is of, as the stores address it.
    pub fn run_key(&self) -> crate::basics::ids::RunKey<'_> {
        crate::basics::ids::RunKey::new(&self.tenant_id, &self.run_id)
    }

    pub fn new(tenant_id: &str, run_id: &str, command: StepCommand) -> Self {
        let message_id = match &command {
            // The ids every run's steps take are joined by hand: `format!`
            // costs several times as much, on every node step.
            StepCommand::Plan => [run_id, ":plan"].concat(),
            StepCommand::Replan { version } => format!("{run_id}:replan:{version}"),
            StepCommand::ExecuteNode { node_id, attempt } => [
                run_id,
                ":",
                node_id,
                ":",
                itoa::Buffer::new().format(*attempt),
            ]
            .concat(),
            StepCommand::AskJudge {
                node_id,
                attempt,
                round,
                judge_id,
            } => format!("{run_id}:{node_id}:{attempt}:judge:{judge_id}:{round}"),
            StepCommand::AgentTurn {
                node_id,
                attempt,
                turn,
            } => format!("{run_id}:{node_id}:{attempt}:turn:{turn}"),
            StepCommand::RunTool {
                node_id,
                attempt,
                turn,
                call_id,
            } => format!("{run_id}:{node_id}:{attempt}:tool:{turn}:{call_id}"),
            StepCommand::ChildRunEnded {
                node_id,
                attempt,
                turn,
                call_id,
                ..
            } => format!("{run_id}:{node_id}:{attempt}:child:{turn}:{call_id}"),
            StepCommand::FireTimer { timer_id } => format!("{run_id}:timer:{timer_id}"),
            StepCommand::Notify {
                notification_id,
                attempt,
            } => format!("{run_id}:notify:{notification_id}:{attempt}"),
            StepCommand::Remember { attempt } => format!("{run_id}:remember:{attempt}"),
            StepCommand::CancelRun { .. } => [run_id, ":cancel"].concat(),
            StepCommand::ReleaseThreadLane { release, .. } => {
                format!("{run_id}:release_lane:{release}")
            }
        };
        StepMessage {
            message_id,
            tenant_id: tenant_id.to_string(),
            run_id: run_id.to_string(),
            command,
            not_before: None,
            traceparent: None,
        }
    }

    /// The message of a timer that fires at `due_at`.
    pub fn timer(
        tenant_id: &str,
        run_id: &str,
        timer_id: &str,
        due_at: crate::basics::instant::Instant,
    ) -> Self {
        let mut message = StepMessage::new(
            tenant_id,
            run_id,
            StepCommand::FireTimer {
                timer_id: timer_id.to_string(),
            },
        );
        message.not_before = Some(due_at);
        message
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::basics::schema::{collect_violations, compile_schema};

    #[test]
    fn step_messages_match_the_published_schema_and_have_deterministic_ids() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../events/schemas/step-message.schema.json"
        );
        let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let validator = compile_schema(&schema, path).unwrap();
        for command in [
            StepCommand::Plan,
            StepCommand::Replan { version: 2 },
            StepCommand::ExecuteNode {
                node_id: "node_1".into(),
                attempt: 2,
            },
            StepCommand::AskJudge {
                node_id: "node_2".into(),
                attempt: 1,
                round: 0,
                judge_id: "j1".into(),
            },
            StepCommand::AgentTurn {
                node_id: "node_3".into(),
                attempt: 1,
                turn: 2,
            },
            StepCommand::RunTool {
                node_id: "node_3".into(),
                attempt: 1,
                turn: 1,
                call_id: "call_9".into(),
            },
            StepCommand::ChildRunEnded {
                node_id: "node_3".into(),
                attempt: 1,
                turn: 0,
                call_id: "call_9".into(),
                summary: serde_json::json!({"runId": "run_1.node_3.0.call_9", "status": "completed"}),
            },
            StepCommand::Notify {
                notification_id: "completed-1".into(),
                attempt: 2,
            },
            StepCommand::Remember { attempt: 1 },
            StepCommand::FireTimer {
                timer_id: "sla:node_1:1".into(),
            },
            StepCommand::CancelRun {
                reason: "its parent run run_0 ended failed".into(),
            },
            StepCommand::ReleaseThreadLane {
                thread_id: "thread_1".into(),
                release: 1,
            },
        ] {
            let mut message = StepMessage::new("tenant", "run_1", command.clone());
            let twin = StepMessage::new("tenant", "run_1", command);
            assert_eq!(message.message_id, twin.message_id);
            message.traceparent =
                Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into());
            let json = serde_json::to_value(&message).unwrap();
            assert!(collect_violations(&validator, &json).is_empty(), "{json}");
            assert_eq!(json["command"]["kind"], message.command.kind_name());
        }
        let timer = StepMessage::timer(
            "tenant",
            "run_1",
            "policy:p",
            crate::basics::instant::Instant::parse_rfc3339("2026-01-01T00:00:00.000Z").unwrap(),
        );
        let json = serde_json::to_value(&timer).unwrap();
        assert_eq!(json["notBefore"], "2026-01-01T00:00:00Z");
        assert!(collect_violations(&validator, &json).is_empty(), "{json}");
        let read_back: StepMessage = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(read_back, timer);

        // A time that is not a time is a malformed message, never "due now".
        let mut garbled = json;
        garbled["notBefore"] = "tomorrow-ish".into();
        let error = serde_json::from_value::<StepMessage>(garbled).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("`tomorrow-ish` is not an RFC 3339 time"),
            "{error}"
        );
    }
}
