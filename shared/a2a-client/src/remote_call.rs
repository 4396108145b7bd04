//! One `SendStreamingMessage` to a remote agent, read to its end.

use baton_core::state::context::ModelRequest;
use baton_outbound::{GuardedClient, OutboundRefusal};
use baton_runtime::error::LlmError;
use baton_runtime::ports::ModelDelta;
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use reqwest::Method;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

/// The agent's headers with their values read (credentials by reference),
/// and those values, which everything the agent answers is scrubbed of.
#[derive(Clone, Default)]
pub(crate) struct AgentCredentials {
    pub(crate) headers: HeaderMap,
    pub(crate) secret_values: Vec<String>,
}

impl AgentCredentials {
    fn values(&self) -> Vec<&str> {
        self.secret_values.iter().map(String::as_str).collect()
    }

    /// `headers` with the agent's headers added.
    fn added_to(&self, mut headers: HeaderMap) -> HeaderMap {
        for (name, value) in &self.headers {
            headers.insert(name.clone(), value.clone());
        }
        headers
    }
}

/// The message a node's request becomes: the instructions and the context
/// bundle as text, the output contract as the expected data part.
pub(crate) fn message_of(request: &ModelRequest, message_id: &str) -> Value {
    json!({
        "messageId": message_id,
        "role": "ROLE_USER",
        "parts": [
            {
                "text": format!("{}\n\n{}", request.system_instruction, request.user_message),
                "mediaType": "text/plain",
            },
            {
                "data": {"outputSchema": &*request.output_schema, "schemaName": request.schema_name},
                "mediaType": "application/json",
                "metadata": {"baton": "expected-output: answer with a data part matching outputSchema"},
            },
        ],
    })
}

fn refusal_error(refusal: OutboundRefusal) -> LlmError {
    match refusal {
        OutboundRefusal::Timeout(_) => LlmError::Timeout { attempts: 1 },
        OutboundRefusal::Transport(message) => LlmError::Transport {
            attempts: 1,
            message,
        },
        other => LlmError::Configuration(format!("the remote agent's URL: {other}")),
    }
}

/// What the agent said so far.
#[derive(Default)]
struct Reading {
    state: Option<String>,
    /// The last status message's text (why a task failed).
    status_text: String,
    /// The parts of its artifacts, then of its reply message.
    answer_parts: Vec<Value>,
}

impl Reading {
    /// One `StreamResponse` (the JSON-RPC result).
    fn take(&mut self, result: &Value, deltas: &UnboundedSender<ModelDelta>) {
        if let Some(task) = result.get("task") {
            self.state = state_of(task.get("status"));
            for artifact in task
                .get("artifacts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                self.answer_parts.extend(parts_of(artifact));
            }
        } else if let Some(update) = result.get("statusUpdate") {
            self.state = state_of(update.get("status"));
            let text = texts(
                update
                    .pointer("/status/message")
                    .map(parts_of)
                    .unwrap_or_default(),
            );
            if !text.is_empty() {
                let _ = deltas.send(ModelDelta::Text(format!("{text}\n")));
                self.status_text = text;
            }
        } else if let Some(update) = result.get("artifactUpdate") {
            if let Some(artifact) = update.get("artifact") {
                self.answer_parts.extend(parts_of(artifact));
            }
        } else if let Some(message) = result.get("message") {
            // A reply without a task: the answer itself.
            self.answer_parts.extend(parts_of(message));
            self.state = Some("TASK_STATE_COMPLETED".into());
        }
    }

    /// The answer text, or why there is none.
    fn answer(self) -> Result<String, LlmError> {
        let state = self.state.unwrap_or_default();
        let why = |what: &str| {
            let mut message = format!("the remote agent's task {what}");
            if !self.status_text.is_empty() {
                message.push_str(&format!(": {}", self.status_text));
            }
            message
        };
        match state.as_str() {
            "TASK_STATE_COMPLETED" => {}
            "TASK_STATE_FAILED" | "TASK_STATE_REJECTED" | "TASK_STATE_CANCELED" => {
                return Err(LlmError::UnexpectedResponse(why(&format!(
                    "ended {}",
                    state.trim_start_matches("TASK_STATE_").to_ascii_lowercase()
                ))));
            }
            "TASK_STATE_INPUT_REQUIRED" | "TASK_STATE_AUTH_REQUIRED" => {
                return Err(LlmError::UnexpectedResponse(why(
                    "asked for input, which Baton does not relay to a person",
                )));
            }
            other => {
                return Err(LlmError::UnexpectedResponse(format!(
                    "the remote agent's stream ended with its task {}",
                    if other.is_empty() {
                        "in no state"
                    } else {
                        other
                    }
                )));
            }
        }
        if let Some(data) = self.answer_parts.iter().find_map(|part| part.get("data")) {
            // A protobuf agent sends whole numbers as doubles (`2.0`).
            return Ok(
                baton_core::basics::schema::whole_numbers_as_integers(data.clone()).to_string(),
            );
        }
        let text = texts(self.answer_parts);
        if text.trim().is_empty() {
            return Err(LlmError::UnexpectedResponse(
                "the remote agent's task completed without an artifact or a reply".into(),
            ));
        }
        Ok(text)
    }
}

/// The remote task's id, from any event that names it.
fn task_id_of(result: &Value) -> Option<String> {
    result
        .pointer("/task/id")
        .or_else(|| result.pointer("/statusUpdate/taskId"))
        .or_else(|| result.pointer("/artifactUpdate/taskId"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn state_of(status: Option<&Value>) -> Option<String> {
    status
        .and_then(|status| status.get("state"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn parts_of(holder: &Value) -> Vec<Value> {
    holder
        .get("parts")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn texts(parts: Vec<Value>) -> String {
    parts
        .iter()
        .filter_map(|part| part.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A JSON-RPC error as a provider error: the request was refused.
fn rpc_error(error: &Value) -> LlmError {
    LlmError::RequestRejected {
        status: 200,
        body: format!(
            "JSON-RPC error {}: {}",
            error
                .get("code")
                .and_then(Value::as_i64)
                .unwrap_or_default(),
            error.get("message").and_then(Value::as_str).unwrap_or("")
        ),
    }
}

/// Cancels the remote task when the call is abandoned before its stream
/// ended (the step gave up at its deadline, or was dropped): a
/// `CancelTask` is sent in the background, once.
pub(crate) struct AbandonedTaskCanceller {
    /// The client to cancel with, the agent's interface and its headers.
    cancel_with: Option<(GuardedClient, String, HeaderMap)>,
    task_id: Option<String>,
}

impl AbandonedTaskCanceller {
    pub(crate) fn new(client: GuardedClient, interface: &str, headers: HeaderMap) -> Self {
        AbandonedTaskCanceller {
            cancel_with: Some((client, interface.to_string(), headers)),
            task_id: None,
        }
    }

    /// The stream ended: nothing to cancel.
    fn disarm(&mut self) {
        self.cancel_with = None;
    }
}

impl Drop for AbandonedTaskCanceller {
    fn drop(&mut self) {
        let (Some((client, interface, mut headers)), Some(task_id)) =
            (self.cancel_with.take(), self.task_id.take())
        else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let body = json!({"jsonrpc": "2.0", "id": format!("cancel-{task_id}"), "method": "CancelTask", "params": {"id": task_id}});
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            if let Err(refusal) = client
                .send(Method::POST, &interface, headers, Some(body.to_string().into_bytes()))
                .await
            {
                tracing::warn!(%refusal, task_id, "could not cancel an abandoned remote task");
            }
        });
    }
}

/// Sends `request` to the agent at `interface` and reads the stream to its
/// end: the answer text. Abandoned before the end, the remote task is
/// cancelled (`canceller`).
pub(crate) async fn send_streaming_message(
    client: &GuardedClient,
    interface: &str,
    request: &ModelRequest,
    deltas: &UnboundedSender<ModelDelta>,
    mut canceller: AbandonedTaskCanceller,
    credentials: &AgentCredentials,
) -> Result<String, LlmError> {
    let id = uuid::Uuid::new_v4().to_string();
    let body = json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "SendStreamingMessage",
        "params": {
            "message": message_of(request, &id),
            "configuration": {"acceptedOutputModes": ["application/json", "text/plain"]},
        },
    });
    let mut headers = credentials.added_to(HeaderMap::new());
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
    headers.insert(
        HeaderName::from_static("a2a-version"),
        HeaderValue::from_static("1.0"),
    );
    if let Some(traceparent) = baton_runtime::observe::run_traces::current_traceparent()
        && let Ok(value) = HeaderValue::from_str(&traceparent)
    {
        headers.insert(HeaderName::from_static("traceparent"), value);
    }
    let response = client
        .open(
            Method::POST,
            interface,
            headers,
            Some(body.to_string().into_bytes()),
        )
        .await
        .map_err(refusal_error)?;
    let status = response.status.as_u16();
    if status == 429 {
        return Err(LlmError::RateLimited { attempts: 1 });
    }
    let is_stream = response
        .headers
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"));
    if !(200..300).contains(&status) || !is_stream {
        let mut text = Vec::new();
        let mut body = response.body;
        while let Some(chunk) = body.next().await {
            text.extend_from_slice(&chunk.map_err(refusal_error)?);
        }
        let text = baton_core::basics::redaction::scrub_text(
            &String::from_utf8_lossy(&text),
            &credentials.values(),
        );
        if let Ok(answer) = serde_json::from_str::<Value>(&text)
            && let Some(error) = answer.get("error")
        {
            return Err(rpc_error(error));
        }
        return Err(if status >= 500 {
            LlmError::ServerError {
                status,
                attempts: 1,
                body: text,
            }
        } else {
            LlmError::RequestRejected {
                status,
                body: format!("not an event stream: {text}"),
            }
        });
    }
    let mut reading = Reading::default();
    let mut events = response.body.eventsource();
    while let Some(event) = events.next().await {
        let event = event.map_err(|error| LlmError::Transport {
            attempts: 1,
            message: format!("the remote agent's stream: {error}"),
        })?;
        if event.data.trim().is_empty() {
            continue;
        }
        let mut answer: Value = serde_json::from_str(&event.data).map_err(|error| {
            LlmError::UnexpectedResponse(format!(
                "an event of the remote agent is not JSON: {error}"
            ))
        })?;
        baton_core::basics::redaction::scrub_values(&mut answer, &credentials.values());
        if let Some(error) = answer.get("error") {
            return Err(rpc_error(error));
        }
        if let Some(result) = answer.get("result") {
            if canceller.task_id.is_none() {
                canceller.task_id = task_id_of(result);
            }
            reading.take(result, deltas);
        }
    }
    canceller.disarm();
    reading.answer()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading_of(results: &[Value]) -> (Result<String, LlmError>, Vec<ModelDelta>) {
        let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
        let mut reading = Reading::default();
        for result in results {
            reading.take(result, &sender);
        }
        drop(sender);
        let mut deltas = Vec::new();
        while let Ok(delta) = receiver.try_recv() {
            deltas.push(delta);
        }
        (reading.answer(), deltas)
    }

    #[test]
    fn progress_is_streamed_and_the_artifacts_data_part_is_the_answer() {
        let (answer, deltas) = reading_of(&[
            json!({"task": {"id": "t", "status": {"state": "TASK_STATE_SUBMITTED"}}}),
            json!({"statusUpdate": {"status": {"state": "TASK_STATE_WORKING", "message": {"parts": [{"text": "drafting"}]}}}}),
            json!({"artifactUpdate": {"artifact": {"parts": [{"data": {"headline": "Hi"}}]}}}),
            json!({"statusUpdate": {"status": {"state": "TASK_STATE_COMPLETED"}}}),
        ]);
        assert_eq!(answer.unwrap(), r#"{"headline":"Hi"}"#);
        assert_eq!(deltas, vec![ModelDelta::Text("drafting\n".into())]);
    }

    #[test]
    fn a_failed_or_questioning_or_empty_task_is_an_error_never_an_answer() {
        let failed = reading_of(&[
            json!({"statusUpdate": {"status": {"state": "TASK_STATE_FAILED", "message": {"parts": [{"text": "quota"}]}}}}),
        ])
        .0
        .unwrap_err();
        assert!(
            failed.to_string().contains("ended failed: quota"),
            "{failed}"
        );
        let asks = reading_of(&[
            json!({"statusUpdate": {"status": {"state": "TASK_STATE_INPUT_REQUIRED"}}}),
        ])
        .0
        .unwrap_err();
        assert!(asks.to_string().contains("asked for input"), "{asks}");
        let empty =
            reading_of(&[json!({"statusUpdate": {"status": {"state": "TASK_STATE_COMPLETED"}}})])
                .0
                .unwrap_err();
        assert!(empty.to_string().contains("without an artifact"), "{empty}");
        let cut =
            reading_of(&[json!({"statusUpdate": {"status": {"state": "TASK_STATE_WORKING"}}})])
                .0
                .unwrap_err();
        assert!(cut.to_string().contains("TASK_STATE_WORKING"), "{cut}");
    }

    #[test]
    fn a_reply_message_is_the_answer_when_there_is_no_task() {
        let (answer, _) = reading_of(&[json!({"message": {"parts": [{"text": "{\"a\": 1}"}]}})]);
        assert_eq!(answer.unwrap(), "{\"a\": 1}");
    }
}
