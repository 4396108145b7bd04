//! Runs as A2A tasks, and A2A messages as Baton work.
//!
//! - A task is a run: its id is the run id, its context the run's thread.
//! - States: queued → `submitted`; running → `working`; awaiting a person
//!   (a task, an approval, a question, a pause) → `input-required`;
//!   completed → `completed`; failed → `failed`; plan rejected →
//!   `rejected`; cancelled → `canceled`.
//! - A completed run's validated output is the task's one artifact
//!   (`output`, a data part); a parked run's status message carries what
//!   it waits for (the tasks with their output schemas, or the request).
//! - Whole numbers in a data part become integers (ProtoJSON sends `2.0`).
//! - A message without a task id starts work: its first data part that is
//!   a JSON object is an envelope; otherwise its text parts are a chat
//!   message on the message's context (a thread). A message naming a task
//!   that waits for a person is that person's answer (see [`answer_of`]).

use baton_core::records::governance::HitlKind;
use baton_core::state::run::{RunState, RunStatus};
use baton_core::state::tasks::HumanTask;
use baton_core::wire::event::EventFrame;
use baton_runtime::services::PersonInput;
use serde_json::{Value, json};

use super::protocol::{Artifact, Message, Part, Role, Task, TaskState, TaskStatus};

/// The A2A state of a run's status.
pub fn task_state(status: RunStatus) -> TaskState {
    match status {
        RunStatus::Queued => TaskState::TaskStateSubmitted,
        RunStatus::Running => TaskState::TaskStateWorking,
        RunStatus::AwaitingHuman | RunStatus::AwaitingHitl | RunStatus::Paused => {
            TaskState::TaskStateInputRequired
        }
        RunStatus::Completed => TaskState::TaskStateCompleted,
        RunStatus::Failed => TaskState::TaskStateFailed,
        RunStatus::PlanRejected => TaskState::TaskStateRejected,
        RunStatus::Cancelled => TaskState::TaskStateCanceled,
    }
}

/// The one run status an A2A state stands for (`input-required` stands
/// for three, so it filters nothing in the store).
pub fn run_status_of(state: TaskState) -> Option<RunStatus> {
    match state {
        TaskState::TaskStateSubmitted => Some(RunStatus::Queued),
        TaskState::TaskStateWorking => Some(RunStatus::Running),
        TaskState::TaskStateCompleted => Some(RunStatus::Completed),
        TaskState::TaskStateFailed => Some(RunStatus::Failed),
        TaskState::TaskStateCanceled => Some(RunStatus::Cancelled),
        TaskState::TaskStateRejected => Some(RunStatus::PlanRejected),
        _ => None,
    }
}

/// A listed run as a task: its state, its thread, when it was created;
/// no artifact or status message (`GetTask` reads them).
pub fn listed_task(listing: &baton_core::state::listing::RunListing) -> Task {
    Task {
        id: listing.run_id.clone(),
        context_id: listing.thread_id.clone(),
        status: TaskStatus {
            state: task_state(listing.status),
            message: None,
            timestamp: Some(listing.created_at.clone()),
        },
        artifacts: Vec::new(),
        history: Vec::new(),
        metadata: Some(serde_json::Map::from_iter([
            ("batonStatus".to_string(), json!(listing.status.as_str())),
            ("objective".to_string(), json!(listing.objective)),
        ])),
    }
}

/// An agent message of `parts` on the run's task.
pub fn agent_message(run: &RunState, parts: Vec<Part>) -> Message {
    Message {
        message_id: format!("{}:status:{}", run.run_id, run.status().as_str()),
        context_id: Some(run.thread_id.clone()),
        task_id: Some(run.run_id.clone()),
        role: Role::RoleAgent,
        parts,
        metadata: None,
    }
}

/// The run's validated output as the task's artifact.
pub fn output_artifact(run_id: &str, output: &Value) -> Artifact {
    Artifact {
        artifact_id: format!("{run_id}:output"),
        name: Some("output".into()),
        description: Some("The run's output, validated against the envelope's contract.".into()),
        parts: vec![Part::data(output.clone())],
    }
}

/// What the status message of a run says: the failure, or what a parked
/// run waits for (`waiting`: its tasks).
pub fn status_message(run: &RunState, waiting: &[HumanTask]) -> Option<Message> {
    match run.status() {
        RunStatus::AwaitingHuman | RunStatus::AwaitingHitl | RunStatus::Paused => {
            let mut parts = Vec::new();
            let request = run.governance.pending_request();
            let text = match (run.status(), request) {
                (RunStatus::Paused, _) => {
                    "The run is paused; answer `resume` (text) to resume it.".to_string()
                }
                (_, Some(request)) if request.kind == HitlKind::Clarify => format!(
                    "{} Answer with a text part on this task.",
                    request.operator_prompt
                ),
                (_, Some(request)) => format!(
                    "{} Answer `approve` or `reject` (text, or a data part {{\"decision\", \"note\"}}) on this task.",
                    request.operator_prompt
                ),
                _ => format!(
                    "The run waits for a person on {} task(s): answer with a data part matching the task's outputSchema (and metadata.nodeId when there are several).",
                    waiting.len()
                ),
            };
            parts.push(Part::text(text));
            parts.push(Part::data(json!({
                "status": run.status().as_str(),
                "tasks": waiting,
                "pendingRequest": request,
            })));
            Some(agent_message(run, parts))
        }
        RunStatus::Failed | RunStatus::PlanRejected | RunStatus::Cancelled => {
            let failure = run
                .failure
                .as_ref()
                .map(|failure| json!({"code": failure.code.as_str(), "message": failure.message}));
            let text = run
                .failure
                .as_ref()
                .map(|failure| format!("{}: {}", failure.code.as_str(), failure.message))
                .unwrap_or_else(|| run.status().as_str().to_string());
            Some(agent_message(
                run,
                vec![
                    Part::text(text),
                    Part::data(json!({"status": run.status().as_str(), "failure": failure})),
                ],
            ))
        }
        _ => None,
    }
}

/// The task of a run.
pub fn task_of(run: &RunState, waiting: &[HumanTask], timestamp: Option<String>) -> Task {
    let artifacts = match (&run.status(), &run.output) {
        (RunStatus::Completed, Some(output)) => vec![output_artifact(&run.run_id, output)],
        _ => Vec::new(),
    };
    Task {
        id: run.run_id.clone(),
        context_id: run.thread_id.clone(),
        status: TaskStatus {
            state: task_state(run.status()),
            message: status_message(run, waiting),
            timestamp,
        },
        artifacts,
        history: Vec::new(),
        metadata: Some(serde_json::Map::from_iter([(
            "batonStatus".to_string(),
            json!(run.status().as_str()),
        )])),
    }
}

/// A frame as a `working` status message: its type, node and message in
/// words, the frame itself as a data part.
pub fn frame_message(run_id: &str, thread_id: &str, frame: &EventFrame) -> Message {
    let mut line = frame.event_type.as_str().to_string();
    if let Some(node_id) = &frame.node_id {
        line.push_str(&format!(" {node_id}"));
    }
    if let Some(message) = &frame.message {
        line.push_str(&format!(": {message}"));
    }
    Message {
        message_id: format!("{run_id}:frame:{}", frame.id),
        context_id: Some(thread_id.to_string()),
        task_id: Some(run_id.to_string()),
        role: Role::RoleAgent,
        parts: vec![
            Part::text(line),
            Part::data(serde_json::to_value(frame).unwrap_or_default()),
        ],
        metadata: None,
    }
}

/// The message's first data part, its whole numbers integers.
fn first_data(message: &Message, only_objects: bool) -> Option<Value> {
    message
        .parts
        .iter()
        .filter_map(|part| part.data.as_ref())
        .find(|data| !only_objects || data.is_object())
        .map(|data| baton_core::basics::schema::whole_numbers_as_integers(data.clone()))
}

/// What a message that starts work asks for.
pub enum NewWork {
    /// A data part: an envelope.
    Envelope(Value),
    /// Text parts: a chat message.
    Chat(String),
}

/// The work a message without a task id starts, or the JSON path of what
/// is missing.
pub fn new_work(message: &Message) -> Result<NewWork, (String, String)> {
    if let Some(envelope) = first_data(message, true) {
        return Ok(NewWork::Envelope(envelope));
    }
    let text = message_text(message);
    if text.trim().is_empty() {
        return Err((
            "$.params.message.parts".into(),
            "no part Baton can run: a data part holding a task envelope (an object), or text parts for a chat message".into(),
        ));
    }
    Ok(NewWork::Chat(text))
}

/// The message's text parts, joined by new lines.
fn message_text(message: &Message) -> String {
    message
        .parts
        .iter()
        .filter_map(|part| part.text.as_deref())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A message on a task that waits for a person, as that person's input:
///
/// - awaiting a task: the first data part is the node's output (the node
///   named by `metadata.nodeId`, or the run's only waiting task);
/// - a clarifying question: the text is the answer;
/// - an approval: `approve`/`reject` as text, or `{"decision", "note"}`;
/// - paused: `resume`.
///
/// A message that fits none is refused, naming the JSON path.
pub fn answer_of(
    run: &RunState,
    waiting: &[HumanTask],
    message: &Message,
) -> Result<PersonInput, (String, String)> {
    let parts_path = "$.params.message.parts".to_string();
    let data = first_data(message, false);
    let text = message_text(message);
    if run.status() == RunStatus::Paused {
        return if text.trim().eq_ignore_ascii_case("resume") {
            Ok(PersonInput::ResumePaused {
                expected_plan_version: run.plan_version(),
            })
        } else {
            Err((parts_path, "the run is paused: answer `resume`".into()))
        };
    }
    if let Some(request) = run.governance.pending_request() {
        return match request.kind {
            HitlKind::Clarify if !text.trim().is_empty() => Ok(PersonInput::Clarify {
                request_id: Some(request.request_id.clone()),
                expected_plan_version: run.plan_version(),
                answer: text,
            }),
            HitlKind::Clarify => {
                Err((parts_path, "a clarifying question: answer with text".into()))
            }
            HitlKind::Approval => {
                let (decision, note) = match &data {
                    Some(data) => (
                        data.get("decision")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                        data.get("note").and_then(Value::as_str).map(str::to_string),
                    ),
                    None => (text.trim().to_string(), None),
                };
                let decision = match decision.to_ascii_lowercase().as_str() {
                    "approve" | "approved" => baton_core::engine::ApprovalDecision::Approve,
                    "reject" | "rejected" => baton_core::engine::ApprovalDecision::Reject,
                    other => {
                        return Err((
                            parts_path,
                            format!("an approval: answer `approve` or `reject`, not `{other}`"),
                        ));
                    }
                };
                Ok(PersonInput::Resolve {
                    request_id: request.request_id.clone(),
                    decision,
                    note,
                })
            }
        };
    }
    let named = message
        .metadata
        .as_ref()
        .and_then(|metadata| metadata.get("nodeId"))
        .and_then(Value::as_str);
    let task = match named {
        Some(node_id) => waiting
            .iter()
            .find(|task| task.node_id == node_id)
            .ok_or_else(|| {
                (
                    "$.params.message.metadata.nodeId".to_string(),
                    format!(
                        "no task waits on node `{node_id}`; waiting: {}",
                        node_list(waiting)
                    ),
                )
            })?,
        None => match waiting {
            [only] => only,
            [] => {
                return Err((
                    parts_path,
                    "the run waits on no task a message can answer".into(),
                ));
            }
            _ => {
                return Err((
                    "$.params.message.metadata.nodeId".into(),
                    format!(
                        "the run waits on several tasks: name one in metadata.nodeId ({})",
                        node_list(waiting)
                    ),
                ));
            }
        },
    };
    let Some(output) = data else {
        return Err((
            parts_path,
            format!(
                "answer task `{}` with a data part matching its outputSchema",
                task.task_id
            ),
        ));
    };
    Ok(PersonInput::Answer {
        node_id: task.node_id.clone(),
        expected_plan_version: task.plan_version,
        output,
    })
}

fn node_list(waiting: &[HumanTask]) -> String {
    waiting
        .iter()
        .map(|task| task.node_id.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}
