//! Baton as an A2A agent (the Agent2Agent protocol, version 1.0, JSON-RPC
//! binding): what agent frameworks that speak A2A call to run work on
//! Baton. On `baton serve` and the `api` function:
//!
//! - `GET /.well-known/agent-card.json`, public: the agent card. Its skills
//!   are a task envelope as a data part, a chat message as text, and the
//!   registry's capabilities (never a tenant's registrations); its security
//!   scheme is the bearer token when the API has tokens.
//! - `POST /a2a`, behind the bearer tokens (the tenant of the token), the
//!   JSON-RPC methods `SendMessage`, `SendStreamingMessage`, `GetTask`,
//!   `ListTasks`, `CancelTask` and `SubscribeToTask` (see [`task_mapping`] for how runs
//!   are tasks). A streamed run sends the task, one `working` status update
//!   per frame, the validated output as the `output` artifact, and the
//!   final status; a run parked for a person ends its stream
//!   `input-required`, and the answer is the next message on the task.
//! - Push notifications: `configuration.taskPushNotificationConfig.url` of
//!   a message that starts a run becomes the envelope's `callbackUrl`, the
//!   signed completion webhook (its body is Baton's completion notification,
//!   not an A2A task). Configs set after the fact are refused
//!   (`PushNotificationNotSupportedError`, saying so).
//!
//! Invariants: a JSON-RPC error is answered with HTTP 200 and the A2A code
//! (never a 500); a bad parameter names its JSON path in the error's
//! `ErrorInfo` metadata; another tenant's run is `TaskNotFoundError`.

mod agent_card;
mod authorization;
pub mod protocol;
pub mod task_mapping;
mod task_stream;

pub(crate) use agent_card::agent_card;

use std::time::Duration;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::Event;
use axum::response::{IntoResponse, Json, Response};
use baton_core::state::run::RunStatus;
use baton_core::state::tasks::human_tasks;
use baton_runtime::RuntimeError;
use baton_runtime::services::{ChatRequest, PersonInputOutcome, Submitter};
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::auth::{Principal, Tenant};
use crate::state::{ApiState, StreamOf};
use authorization::{method_scope, missing_scope_answer};
use protocol::{
    JsonRpcError, JsonRpcRequest, SendMessageRequest, StreamResponse, Task, TaskIdRequest,
    TaskState, codes,
};
use task_mapping::{NewWork, answer_of, new_work, task_of};

/// How long a blocking `SendMessage` waits for its run to end or park
/// before answering with the task as it stands (under the API's 30 s).
pub const BLOCKING_SEND_WAIT: Duration = Duration::from_secs(25);

/// A JSON-RPC failure: code, message, and the JSON path at fault.
#[derive(Debug)]
pub struct RpcFailure {
    code: i64,
    message: String,
    path: Option<String>,
}

impl RpcFailure {
    fn new(code: i64, message: impl Into<String>) -> Self {
        RpcFailure {
            code,
            message: message.into(),
            path: None,
        }
    }

    fn at(code: i64, path: impl Into<String>, message: impl Into<String>) -> Self {
        RpcFailure {
            code,
            message: message.into(),
            path: Some(path.into()),
        }
    }

    fn task_not_found(run_id: &str) -> Self {
        RpcFailure::at(
            codes::TASK_NOT_FOUND,
            "$.params.id",
            format!("no task `{run_id}`"),
        )
    }

    /// The error object; `data` holds a `google.rpc.ErrorInfo` whose
    /// metadata names the path (as the A2A SDKs read it).
    fn to_error(&self) -> JsonRpcError {
        let data = self.path.as_ref().map(|path| {
            json!([{
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "INVALID_ARGUMENT",
                "domain": "baton",
                "metadata": {"path": path},
            }])
        });
        JsonRpcError {
            code: self.code,
            message: match &self.path {
                Some(path) => format!("{path}: {}", self.message),
                None => self.message.clone(),
            },
            data,
        }
    }
}

impl From<RuntimeError> for RpcFailure {
    fn from(error: RuntimeError) -> Self {
        match error {
            RuntimeError::InvalidInput { path, message } => {
                // Paths of an envelope are the data part's.
                let path = match path.strip_prefix('$') {
                    Some(rest) => format!("$.params.message.parts[data]{rest}"),
                    None => path,
                };
                RpcFailure::at(codes::INVALID_PARAMS, path, message)
            }
            other => {
                let api = crate::error::ApiError::from(other);
                let code = if api.status.is_server_error() {
                    codes::INTERNAL_ERROR
                } else if api.status == axum::http::StatusCode::NOT_FOUND {
                    codes::TASK_NOT_FOUND
                } else {
                    codes::INVALID_REQUEST
                };
                RpcFailure::new(code, format!("{}: {}", api.code, api.message))
            }
        }
    }
}

fn rpc_result(id: &Value, result: impl serde::Serialize) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn rpc_error(id: &Value, failure: &RpcFailure) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": failure.to_error()})
}

/// The params as `T`, or `InvalidParams` naming the JSON path.
fn params<T: serde::de::DeserializeOwned>(params: Value) -> Result<T, RpcFailure> {
    serde_path_to_error::deserialize(params).map_err(|error| {
        let path = match error.path().to_string().as_str() {
            "." => "$.params".to_string(),
            inner => format!("$.params.{inner}"),
        };
        RpcFailure::at(codes::INVALID_PARAMS, path, error.inner().to_string())
    })
}

/// `POST /a2a`: one JSON-RPC request.
pub(crate) async fn json_rpc(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    Extension(principal): Extension<Principal>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request: JsonRpcRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(error) => {
            let failure = if serde_json::from_slice::<Value>(&body).is_ok() {
                RpcFailure::at(codes::INVALID_REQUEST, "$", error.to_string())
            } else {
                RpcFailure::new(codes::PARSE_ERROR, format!("not JSON: {error}"))
            };
            return Json(rpc_error(&Value::Null, &failure)).into_response();
        }
    };
    if request.jsonrpc.as_deref() != Some("2.0") {
        let failure = RpcFailure::at(codes::INVALID_REQUEST, "$.jsonrpc", "must be \"2.0\"");
        return Json(rpc_error(&request.id, &failure)).into_response();
    }
    if let Some(scope) = method_scope(&request.method, &request.params)
        && !principal.holds(scope)
    {
        return missing_scope_answer(&request.id, scope, &principal);
    }
    let server = A2aServer {
        state,
        tenant: tenant.0,
        submitter: crate::trace_header::submitter_of(&headers, &principal).unwrap_or_default(),
        answerer: principal.answerer(),
    };
    let id = request.id.clone();
    let answer = match request.method.as_str() {
        "SendStreamingMessage" | "SubscribeToTask" => {
            let streamed = if request.method == "SubscribeToTask" {
                server.subscribe(request.params).await
            } else {
                server.send_streaming(request.params).await
            };
            return match streamed {
                Ok(events) => {
                    let heartbeat = server.state.settings.heartbeat;
                    let id = id.clone();
                    crate::sse::sse_events_response(
                        events.map(move |event| {
                            Event::default().data(rpc_result(&id, event).to_string())
                        }),
                        heartbeat,
                    )
                }
                Err(failure) => Json(rpc_error(&id, &failure)).into_response(),
            };
        }
        "SendMessage" => server
            .send(request.params)
            .await
            .map(|task| json!({"task": task})),
        "GetTask" => server.get(request.params).await.map(|task| json!(task)),
        "CancelTask" => server.cancel(request.params).await.map(|task| json!(task)),
        "CreateTaskPushNotificationConfig"
        | "GetTaskPushNotificationConfig"
        | "ListTaskPushNotificationConfigs"
        | "DeleteTaskPushNotificationConfig" => Err(RpcFailure::new(
            codes::PUSH_NOTIFICATION_NOT_SUPPORTED,
            "a task's push notification is set when it starts: configuration.taskPushNotificationConfig.url of the SendMessage that starts the run becomes its signed completion webhook (callbackUrl)",
        )),
        "ListTasks" => server.list(request.params).await,
        other => Err(RpcFailure::at(
            codes::METHOD_NOT_FOUND,
            "$.method",
            format!(
                "no method `{other}`; served: SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask, SubscribeToTask"
            ),
        )),
    };
    Json(match answer {
        Ok(result) => rpc_result(&id, result),
        Err(failure) => rpc_error(&id, &failure),
    })
    .into_response()
}

type Events = futures_util::stream::BoxStream<'static, StreamResponse>;

/// One request's view: the services and the caller's tenant.
struct A2aServer {
    state: ApiState,
    tenant: String,
    submitter: Submitter,
    /// The caller as one who answers tasks (a message on a task).
    answerer: baton_core::state::tasks::Answerer,
}

impl A2aServer {
    /// The run as a task, with the tasks it waits for.
    async fn task(&self, run_id: &str) -> Result<Task, RpcFailure> {
        let stored = self
            .state
            .runs
            .load(&self.tenant, run_id)
            .await?
            .ok_or_else(|| RpcFailure::task_not_found(run_id))?;
        // What it waits for is read off the run (no query of the tenant's tasks).
        let waiting = human_tasks(&stored.state);
        let updated = stored.state.updated_at.rfc3339();
        Ok(task_of(&stored.state, &waiting, Some(updated)))
    }

    /// Starts the work a message asks for, or answers the task it names;
    /// the run id and the frame to follow from.
    async fn start(&self, request: SendMessageRequest) -> Result<(String, u64), RpcFailure> {
        let message = request.message;
        if let Some(run_id) = &message.task_id {
            return self
                .answer(run_id, &message)
                .await
                .map(|after| (run_id.clone(), after));
        }
        let push_url = request
            .configuration
            .task_push_notification_config
            .map(|config| config.url)
            .filter(|url| !url.is_empty());
        let submitted = match new_work(&message)
            .map_err(|(path, why)| RpcFailure::at(codes::INVALID_PARAMS, path, why))?
        {
            NewWork::Envelope(mut envelope) => {
                if let (Some(context_id), Some(fields)) =
                    (&message.context_id, envelope.as_object_mut())
                {
                    fields
                        .entry("threadId")
                        .or_insert_with(|| json!(context_id));
                }
                if let (Some(url), Some(fields)) = (push_url, envelope.as_object_mut()) {
                    fields.insert("callbackUrl".into(), json!(url));
                }
                self.state
                    .runs
                    .submit_traced(&self.tenant, &envelope, self.submitter.clone())
                    .await?
            }
            NewWork::Chat(text) => {
                if push_url.is_some() {
                    return Err(RpcFailure::at(
                        codes::PUSH_NOTIFICATION_NOT_SUPPORTED,
                        "$.params.configuration.taskPushNotificationConfig",
                        "a chat message has no completion webhook; send an envelope (a data part) to be notified",
                    ));
                }
                let mut chat = ChatRequest {
                    message: text,
                    thread_id: message.context_id.clone(),
                    agent: None,
                    context_type: None,
                    inputs: serde_json::Map::new(),
                    entity_id: None,
                    multitask_strategy: Default::default(),
                    user: None,
                };
                match self.state.runs.submit_chat(&self.tenant, &chat).await {
                    // A context the client made up starts a thread of its own.
                    Err(RuntimeError::ThreadNotFound(_)) => {
                        chat.thread_id = None;
                        self.state.runs.submit_chat(&self.tenant, &chat).await?
                    }
                    other => other?,
                }
            }
        };
        Ok((submitted.run_id, 0))
    }

    /// A person's answer to the parked run `run_id`; the last frame before
    /// it (the stream goes on from there).
    async fn answer(&self, run_id: &str, message: &protocol::Message) -> Result<u64, RpcFailure> {
        let stored = self
            .state
            .runs
            .load(&self.tenant, run_id)
            .await?
            .ok_or_else(|| {
                RpcFailure::at(
                    codes::TASK_NOT_FOUND,
                    "$.params.message.taskId",
                    format!("no task `{run_id}`"),
                )
            })?;
        let run = &stored.state;
        if !run.status().awaits_people() {
            let why = if run.status().is_terminal() {
                format!(
                    "task `{run_id}` has ended ({}); send a message without taskId to start new work",
                    run.status().as_str()
                )
            } else {
                format!("task `{run_id}` is working and waits for no input")
            };
            return Err(RpcFailure::at(
                codes::UNSUPPORTED_OPERATION,
                "$.params.message.taskId",
                why,
            ));
        }
        let input = answer_of(run, &human_tasks(run), message)
            .map_err(|(path, why)| RpcFailure::at(codes::INVALID_PARAMS, path, why))?;
        let last_frame = self.state.runs.last_event_id(&self.tenant, run_id).await?;
        match self
            .state
            .people
            .apply_as(&self.tenant, run_id, input, &self.answerer)
            .await?
        {
            PersonInputOutcome::Applied { .. } => Ok(last_frame),
            PersonInputOutcome::Refused(why) => {
                let api = crate::error::ApiError::from(why);
                Err(RpcFailure::at(
                    codes::INVALID_PARAMS,
                    "$.params.message.parts",
                    format!("the answer was not applied: {}: {}", api.code, api.message),
                ))
            }
            PersonInputOutcome::RunNotFound => Err(RpcFailure::task_not_found(run_id)),
        }
    }

    /// `SendMessage`: blocks until the run ends or parks (at most
    /// [`BLOCKING_SEND_WAIT`]) unless `returnImmediately`.
    async fn send(&self, raw: Value) -> Result<Task, RpcFailure> {
        let request: SendMessageRequest = params(raw)?;
        let return_immediately = request.configuration.return_immediately;
        let (run_id, after) = self.start(request).await?;
        if !return_immediately {
            let frames = self.state.runs.follow(
                &self.tenant,
                &run_id,
                after,
                self.state.settings.poll_interval,
            );
            let _ = tokio::time::timeout(BLOCKING_SEND_WAIT, frames.for_each(|_| async {})).await;
        }
        self.task(&run_id).await
    }

    /// `SendStreamingMessage`.
    async fn send_streaming(&self, raw: Value) -> Result<Events, RpcFailure> {
        let request: SendMessageRequest = params(raw)?;
        let ticket = self
            .state
            .open_stream(&self.tenant, StreamOf::RunNotStartedYet)
            .await?;
        let (run_id, after) = self.start(request).await?;
        self.stream_from(run_id, after, ticket).await
    }

    /// `SubscribeToTask`: a task that has not ended, streamed from now.
    async fn subscribe(&self, raw: Value) -> Result<Events, RpcFailure> {
        let TaskIdRequest { id } = params(raw)?;
        let task = self.task(&id).await?;
        if matches!(
            task.status.state,
            TaskState::TaskStateCompleted
                | TaskState::TaskStateFailed
                | TaskState::TaskStateCanceled
                | TaskState::TaskStateRejected
        ) {
            return Err(RpcFailure::at(
                codes::UNSUPPORTED_OPERATION,
                "$.params.id",
                format!("task `{id}` has ended; GetTask reads it"),
            ));
        }
        let after = self.state.runs.last_event_id(&self.tenant, &id).await?;
        let ticket = self
            .state
            .open_stream(&self.tenant, StreamOf::Run(&id))
            .await?;
        self.stream_from(id, after, ticket).await
    }

    /// `ListTasks`: the tenant's runs, newest first, as tasks without
    /// artifacts (`GetTask` reads one whole); `pageSize` (1–100, default
    /// 50) and `pageToken` page as `GET /runs` does. A `status` of one run
    /// status filters in the store; `input-required` and `contextId`
    /// filter within the page.
    async fn list(&self, raw: Value) -> Result<Value, RpcFailure> {
        let request: protocol::ListTasksRequest = params(raw)?;
        let cursor = match request
            .page_token
            .as_deref()
            .filter(|token| !token.is_empty())
        {
            None => None,
            Some(token) => Some(
                baton_core::state::listing::ListCursor::parse(token).ok_or_else(|| {
                    RpcFailure::at(
                        codes::INVALID_PARAMS,
                        "$.params.pageToken",
                        "not a token this list handed out (pass nextPageToken as it is)",
                    )
                })?,
            ),
        };
        let query = baton_core::state::listing::RunListQuery {
            status: request.status.and_then(task_mapping::run_status_of),
            limit: (request.page_size.unwrap_or(50) as usize)
                .clamp(1, baton_core::state::listing::MAX_RUNS_PER_PAGE),
            cursor,
            forked_from: None,
        };
        let page = self.state.runs.list(&self.tenant, &query).await?;
        let tasks: Vec<Task> = page
            .runs
            .iter()
            .map(task_mapping::listed_task)
            .filter(|task| {
                request
                    .status
                    .is_none_or(|state| task.status.state == state)
            })
            .filter(|task| {
                request
                    .context_id
                    .as_ref()
                    .is_none_or(|context| &task.context_id == context)
            })
            .collect();
        Ok(json!({
            "tasks": tasks,
            "nextPageToken": page.next_cursor.unwrap_or_default(),
            "pageSize": tasks.len(),
        }))
    }

    /// `GetTask`.
    async fn get(&self, raw: Value) -> Result<Task, RpcFailure> {
        let TaskIdRequest { id } = params(raw)?;
        self.task(&id).await
    }

    /// `CancelTask`: cancels the run (and its children); an ended run is
    /// `TaskNotCancelableError`.
    async fn cancel(&self, raw: Value) -> Result<Task, RpcFailure> {
        let TaskIdRequest { id } = params(raw)?;
        match self
            .state
            .runs
            .cancel(&self.tenant, &id, "cancelled by an A2A client")
            .await?
        {
            None => Err(RpcFailure::task_not_found(&id)),
            Some(RunStatus::Cancelled) => self.task(&id).await,
            Some(other) => Err(RpcFailure::at(
                codes::TASK_NOT_CANCELABLE,
                "$.params.id",
                format!("task `{id}` has ended ({})", other.as_str()),
            )),
        }
    }
}
