//! The scope each operation needs: the one table the authorization
//! middleware checks and the OpenAPI document publishes (each operation's
//! `security` names its scope, and `x-baton-scope` repeats it). A route
//! missing here needs `admin` (deny by default), and a test walks the
//! document so none is missing.

use crate::auth::Scope;

/// The scope `method path` (an OpenAPI path, `{name}` parameters) needs;
/// `None` for a path this table does not know.
pub fn declared_scope(method: &str, path: &str) -> Option<Scope> {
    let flex = path.strip_prefix("/api/v1/flex");
    let scope = match (method, flex.unwrap_or(path)) {
        ("post", "/runs" | "/run.stream") if flex.is_some() => Scope::RunsWrite,
        ("post", "/runs/{run_id}/cancel" | "/runs/{run_id}/fork") => Scope::RunsWrite,
        (
            "get",
            "/runs"
            | "/runs/{run_id}"
            | "/runs/{run_id}/events"
            | "/runs/{run_id}/history"
            | "/capabilities"
            | "/tasks"
            | "/hitl/requests"
            | "/schedules"
            | "/schedules/{schedule_id}"
            | "/evaluations/{evaluation_id}",
        ) if flex.is_some() => Scope::RunsRead,
        ("get", "/evaluations") if flex.is_some() => Scope::RunsRead,
        ("post", "/run.resume" | "/tasks/{task_id}/decline") => Scope::TasksAnswer,
        ("post", "/hitl/resolve" | "/runs/{run_id}/policies/{policy_id}/trigger") => {
            Scope::ApprovalsDecide
        }
        ("post", "/capabilities/register") => Scope::RegistryWrite,
        (
            "post",
            "/schedules" | "/schedules/{schedule_id}/pause" | "/schedules/{schedule_id}/resume",
        )
        | ("delete", "/schedules/{schedule_id}") => Scope::SchedulesWrite,
        ("post", "/evaluations") if flex.is_some() => Scope::EvaluationsRun,
        ("post", "/api/v1/judge/evaluations") => Scope::EvaluationsRun,
        ("get", "/api/v1/judge/evaluations/{evaluation_id}") => Scope::RunsRead,
        ("get", "/audit") if flex.is_some() => Scope::Admin,
        ("post", "/api/v1/chat") => Scope::RunsWrite,
        ("get", "/api/v1/threads" | "/api/v1/threads/{thread_id}") => Scope::RunsRead,
        _ => return None,
    };
    Some(scope)
}
