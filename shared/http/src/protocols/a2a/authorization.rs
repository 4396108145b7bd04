//! Which A2A method needs which scope, and the refusal a caller without it
//! gets: HTTP 403 (A2A leaves authorization to the transport), its body a
//! JSON-RPC error naming the scope.

use axum::response::{IntoResponse, Json, Response};
use serde_json::{Value, json};

use super::protocol::codes;
use crate::auth::{Principal, Scope};

/// The scope an A2A method needs: reading tasks `runs:read`; starting work
/// or cancelling it `runs:write`; a message on a task (a person's answer to
/// a parked run) `tasks:answer`. `None` for a method Baton does not serve
/// (answered `MethodNotFound`).
pub(super) fn method_scope(method: &str, params: &Value) -> Option<Scope> {
    let answers_a_task = params
        .pointer("/message/taskId")
        .is_some_and(|task| !task.is_null());
    match method {
        "SendMessage" | "SendStreamingMessage" if answers_a_task => Some(Scope::TasksAnswer),
        "SendMessage" | "SendStreamingMessage" | "CancelTask" => Some(Scope::RunsWrite),
        "GetTask" | "ListTasks" | "SubscribeToTask" => Some(Scope::RunsRead),
        "CreateTaskPushNotificationConfig"
        | "GetTaskPushNotificationConfig"
        | "ListTaskPushNotificationConfigs"
        | "DeleteTaskPushNotificationConfig" => Some(Scope::RunsWrite),
        _ => None,
    }
}

/// A method whose scope the caller lacks: HTTP 403 (as A2A asks of
/// authorization failures), the body a JSON-RPC error naming the scope.
pub(super) fn missing_scope_answer(id: &Value, scope: Scope, principal: &Principal) -> Response {
    let refusal = crate::auth::principal::missing_scope(scope, &principal.scopes);
    (
        axum::http::StatusCode::FORBIDDEN,
        Json(json!({"jsonrpc": "2.0", "id": id, "error": {
            "code": codes::FORBIDDEN,
            "message": refusal.message,
            "data": refusal.details,
        }})),
    )
        .into_response()
}
