//! Routes where people act on parked runs: `GET /tasks` (what waits for
//! them), `POST /run.resume` (a human node's output, a clarifying answer,
//! or resuming a pause), `POST /tasks/{taskId}/decline`, `POST
//! /hitl/resolve` (approve or reject an approval request) and `POST
//! /runs/{runId}/policies/{policyId}/trigger` (a `manual` policy).
//!
//! A task id is `{runId}:{nodeId}`; `run.resume` takes either `taskId` or
//! `runId` + `nodeId` with `output`, or `runId` + `answer` (clarify), or
//! just `runId` + `expectedPlanVersion` (a pause). Outcomes: 200 applied;
//! 404 no such run (or another tenant's, or no such manual policy); 409 the
//! node or request no longer waits, or the plan version moved
//! (`details.currentPlanVersion`); 422 the output breaks the node's
//! contract (`details.errors[].path` from `$.output`); 400 a malformed body.

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use baton_core::engine::ApprovalDecision;
use baton_runtime::services::{PersonInput, PersonInputOutcome};
use serde_json::json;

use crate::auth::{Principal, Tenant};
use crate::bodies::{
    DeclineRequest, HumanActionApplied, RequestList, ResolveDecision, ResolveRequest,
    ResumeRequest, TaskList, ValidatedJson,
};
use crate::error::ApiError;
use crate::routes::request_keys::{mark_replayed, request_key};
use crate::sse::sse_response;
use crate::state::ApiState;
use crate::state::{StreamOf, held_while};

fn bad_request(path: &str, message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid_request", message)
        .with_details(json!({"path": path}))
}

/// A body that does not fit its type: 400 naming the path.
fn refuse(path: &str, message: String) -> ApiError {
    bad_request(path, format!("{path}: {message}"))
}

impl crate::bodies::RequestBody for ResumeRequest {
    fn refuse(path: &str, message: String) -> ApiError {
        refuse(path, message)
    }
}

impl crate::bodies::RequestBody for DeclineRequest {
    fn refuse(path: &str, message: String) -> ApiError {
        refuse(path, message)
    }
}

impl crate::bodies::RequestBody for ResolveRequest {
    fn refuse(path: &str, message: String) -> ApiError {
        refuse(path, message)
    }
}

/// `text` unless it is empty (a blank id names nothing).
fn non_empty<'a>(text: &'a Option<String>, name: &str) -> Result<Option<&'a str>, ApiError> {
    match text.as_deref() {
        Some("") => Err(bad_request(
            &format!("$.{name}"),
            format!("`{name}` must be a non-empty string"),
        )),
        other => Ok(other),
    }
}

/// `(runId, nodeId)` of a task id `{runId}:{nodeId}`.
fn split_task_id(task_id: &str) -> Option<(&str, &str)> {
    task_id
        .split_once(':')
        .filter(|(run_id, node_id)| !run_id.is_empty() && !node_id.is_empty())
}

/// What a `run.resume` body asks: `(runId, input)`.
fn resume_input(body: ResumeRequest) -> Result<(String, PersonInput), ApiError> {
    let expected_plan_version = body.expected_plan_version;
    let task_id = non_empty(&body.task_id, "taskId")?;
    let given_run_id = non_empty(&body.run_id, "runId")?;
    let given_node_id = non_empty(&body.node_id, "nodeId")?;
    if body.output.is_none() && task_id.is_none() {
        let run_id = given_run_id
            .ok_or_else(|| bad_request("$.runId", "`runId` (or `taskId`) is required"))?
            .to_string();
        let input = match body.answer {
            Some(answer) => PersonInput::Clarify {
                request_id: non_empty(&body.request_id, "requestId")?.map(str::to_string),
                expected_plan_version,
                answer,
            },
            None if given_node_id.is_some() => {
                return Err(bad_request("$.output", "`output` is required"));
            }
            None => PersonInput::ResumePaused {
                expected_plan_version,
            },
        };
        return Ok((run_id, input));
    }
    let (run_id, node_id) = match task_id {
        Some(task_id) => {
            let (run_id, node_id) = split_task_id(task_id)
                .ok_or_else(|| bad_request("$.taskId", "a task id is `{runId}:{nodeId}`"))?;
            if given_run_id.is_some_and(|given| given != run_id) {
                return Err(bad_request(
                    "$.runId",
                    "`runId` differs from the task's run",
                ));
            }
            (run_id.to_string(), node_id.to_string())
        }
        None => (
            given_run_id
                .ok_or_else(|| bad_request("$.runId", "`runId` (or `taskId`) is required"))?
                .to_string(),
            given_node_id
                .ok_or_else(|| bad_request("$.nodeId", "`nodeId` (or `taskId`) is required"))?
                .to_string(),
        ),
    };
    let output = body
        .output
        .ok_or_else(|| bad_request("$.output", "`output` is required"))?;
    Ok((
        run_id,
        PersonInput::Answer {
            node_id,
            expected_plan_version,
            output,
        },
    ))
}

async fn apply(
    state: &ApiState,
    principal: &Principal,
    run_id: &str,
    input: PersonInput,
) -> Result<Json<HumanActionApplied>, ApiError> {
    let answerer = principal.answerer();
    match state
        .people
        .apply_as(&principal.tenant, run_id, input, &answerer)
        .await?
    {
        PersonInputOutcome::Applied { status, version } => Ok(Json(HumanActionApplied {
            run_id: run_id.to_string(),
            status,
            version,
        })),
        PersonInputOutcome::Refused(refusal) => Err(ApiError::from(refusal)),
        PersonInputOutcome::RunNotFound => Err(ApiError::run_not_found(run_id)),
    }
}

/// `GET /tasks?status=pending&capabilityId=`: the tenant's pending tasks
/// the caller may answer (those assigned to them, to one of their groups,
/// or to no one; an `admin` sees all).
pub(crate) async fn list_tasks(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    Extension(principal): Extension<Principal>,
    Query(query): Query<std::collections::HashMap<String, String>>,
) -> Result<Json<TaskList>, ApiError> {
    if let Some(status) = query.get("status")
        && status != "pending"
    {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_query",
            format!("status `{status}`: only `pending` tasks are kept (answered and declined ones are in their run's frames)"),
        )
        .with_details(json!({"parameter": "status"})));
    }
    let answerer = principal.answerer();
    let tasks = state
        .people
        .pending_tasks(&tenant.0, query.get("capabilityId").map(String::as_str))
        .await?
        .into_iter()
        .filter(|task| {
            task.assigned_to
                .as_ref()
                .is_none_or(|assignment| assignment.admits(&answerer))
        })
        .collect();
    Ok(Json(TaskList { tasks }))
}

/// `POST /run.resume`: `{runId, expectedPlanVersion, nodeId | taskId, output}`
/// (a human task), `{runId, expectedPlanVersion, answer, requestId?}` (a
/// clarifying question) or `{runId, expectedPlanVersion}` (a pause).
/// With `Accept: text/event-stream` the answer is the run's frames from the
/// resumption on (SSE, as `run.stream`), until the run ends or parks again.
pub(crate) async fn resume_run(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    headers: HeaderMap,
    ValidatedJson(body): ValidatedJson<ResumeRequest>,
) -> Result<Response, ApiError> {
    let wants_stream = headers
        .get(header::ACCEPT)
        .and_then(|accept| accept.to_str().ok())
        .is_some_and(|accept| accept.contains("text/event-stream"));
    let key = request_key(&headers, body.idempotency_key.as_deref())?;
    let fingerprint = serde_json::to_value(&body).unwrap_or_default();
    let (run_id, input) = resume_input(body)?;
    if key.is_none() && !wants_stream {
        return Ok(apply(&state, &principal, &run_id, input)
            .await?
            .into_response());
    }
    // The stream's lease first: a refused stream applies no answer.
    let ticket = match wants_stream {
        true => Some(
            state
                .open_stream(&principal.tenant, StreamOf::Run(&run_id))
                .await?,
        ),
        false => None,
    };
    let scope = format!("answer:{run_id}");
    let applied = state
        .request_keys
        .once(
            &principal.tenant,
            &scope,
            key.as_ref(),
            &fingerprint,
            || async {
                // The frames before the answer are the caller's already.
                let seen = state.runs.last_event_id(&principal.tenant, &run_id).await?;
                let Json(applied) = apply(&state, &principal, &run_id, input).await?;
                Ok::<_, ApiError>(json!({"applied": applied, "seen": seen}))
            },
        )
        .await?;
    let mut response = match ticket {
        Some(ticket) => {
            let seen = applied.answer()["seen"].as_u64().unwrap_or(0);
            let frames = held_while(
                state.runs.follow(
                    &principal.tenant,
                    &run_id,
                    seen,
                    state.settings.poll_interval,
                ),
                ticket,
            );
            sse_response(frames, state.settings.heartbeat)
        }
        None => Json(applied.answer()["applied"].clone()).into_response(),
    };
    mark_replayed(&mut response, applied.replayed());
    Ok(response)
}

/// `POST /tasks/{taskId}/decline`: `{reasonCode, note?}`; the run fails with the reason.
pub(crate) async fn decline_task(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path(task_id): Path<String>,
    ValidatedJson(body): ValidatedJson<DeclineRequest>,
) -> Result<Json<HumanActionApplied>, ApiError> {
    let (run_id, node_id) = split_task_id(&task_id).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "task_not_found",
            format!("no task `{task_id}` (a task id is `{{runId}}:{{nodeId}}`)"),
        )
    })?;
    let reason_code = non_empty(&Some(body.reason_code), "reasonCode")?
        .unwrap_or_default()
        .to_string();
    let note = non_empty(&body.note, "note")?.map(str::to_string);
    let input = PersonInput::Decline {
        node_id: node_id.to_string(),
        reason_code,
        note,
    };
    apply(&state, &principal, run_id, input).await
}

/// `POST /hitl/resolve`: `{runId, requestId, decision: approve|reject, note?}`.
pub(crate) async fn resolve_request(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    ValidatedJson(body): ValidatedJson<ResolveRequest>,
) -> Result<Json<HumanActionApplied>, ApiError> {
    let run_id = non_empty(&Some(body.run_id.clone()), "runId")?
        .unwrap_or_default()
        .to_string();
    let request_id = non_empty(&Some(body.request_id), "requestId")?
        .unwrap_or_default()
        .to_string();
    let decision = match body.decision {
        ResolveDecision::Approve => ApprovalDecision::Approve,
        ResolveDecision::Reject => ApprovalDecision::Reject,
    };
    let note = non_empty(&body.note, "note")?.map(str::to_string);
    let input = PersonInput::Resolve {
        request_id,
        decision,
        note,
    };
    apply(&state, &principal, &run_id, input).await
}

/// `POST /runs/{runId}/policies/{policyId}/trigger`: fires a `manual` policy.
pub(crate) async fn trigger_policy(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((run_id, policy_id)): Path<(String, String)>,
) -> Result<Json<HumanActionApplied>, ApiError> {
    apply(
        &state,
        &principal,
        &run_id,
        PersonInput::TriggerPolicy { policy_id },
    )
    .await
}

/// `GET /hitl/requests`: the tenant's pending approval requests and
/// clarifying questions (each with `runId` and `planVersion`) the caller may
/// decide: an approval with `approvers` is listed only to them.
pub(crate) async fn list_requests(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    Extension(principal): Extension<Principal>,
) -> Result<Json<RequestList>, ApiError> {
    let answerer = principal.answerer();
    let requests = state
        .people
        .pending_requests(&tenant.0)
        .await?
        .into_iter()
        .filter(|pending| {
            pending
                .request
                .approvers
                .as_ref()
                .is_none_or(|approvers| approvers.admits(&answerer))
        })
        .collect();
    Ok(Json(RequestList { requests }))
}
