//! The one error type of the HTTP layer and its JSON body.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use baton_core::engine::HumanInputRefused;
use baton_runtime::RuntimeError;
use serde_json::{Value, json};

/// How long a tenant over its live-run limit is told to wait
/// (`Retry-After`): about one model call.
pub const TENANT_LIMIT_RETRY_AFTER_SECONDS: u16 = 5;

/// An error as the API reports it.
#[derive(Debug, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub details: Option<Value>,
    /// Seconds for a `Retry-After` header (a 429).
    pub retry_after_seconds: Option<u16>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            details: None,
            retry_after_seconds: None,
        }
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// The same error with another message.
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    pub fn unauthorized() -> Self {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a valid `Authorization: Bearer <token>` header is required",
        )
    }

    pub fn run_not_found(run_id: &str) -> Self {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "run_not_found",
            format!("no run `{run_id}`"),
        )
    }

    /// A run already has `limit` event streams open (`open` now).
    /// `scope` is `run` or `tenant`: whose cap is full.
    pub fn too_many_streams(run_id: &str, scope: &str, open: usize, limit: usize) -> Self {
        let (whose, variable) = if scope == "tenant" {
            ("the tenant".to_string(), "BATON_MAX_STREAMS_PER_TENANT")
        } else {
            (format!("run `{run_id}`"), "BATON_MAX_STREAMS_PER_RUN")
        };
        let mut refused = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_streams",
            format!(
                "{whose} has {open} event streams open, the limit ({variable}); close one or retry later"
            ),
        )
        .with_details(json!({"openStreams": open, "limit": limit, "scope": scope}));
        refused.retry_after_seconds = Some(TENANT_LIMIT_RETRY_AFTER_SECONDS);
        refused
    }

    pub fn is_retryable(&self) -> bool {
        self.status == StatusCode::SERVICE_UNAVAILABLE
    }
}

impl From<RuntimeError> for ApiError {
    fn from(error: RuntimeError) -> Self {
        match &error {
            RuntimeError::InvalidInput { path, message } => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_envelope",
                format!("{path}: {message}"),
            )
            .with_details(json!({"path": path})),
            RuntimeError::TooManyStreams {
                run_id,
                scope,
                open,
                limit,
            } => ApiError::too_many_streams(run_id, scope, *open, *limit),
            RuntimeError::TenantLimit { live, limit, .. } => {
                let mut refused = ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "tenant_limit",
                    error.to_string(),
                )
                .with_details(json!({"liveRuns": live, "limit": limit}));
                refused.retry_after_seconds = Some(TENANT_LIMIT_RETRY_AFTER_SECONDS);
                refused
            }
            RuntimeError::TenantRateLimit {
                submitted,
                limit,
                retry_after_seconds,
                ..
            } => {
                let mut refused = ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "tenant_rate_limit",
                    error.to_string(),
                )
                .with_details(json!({
                    "submittedLastMinute": submitted,
                    "limit": limit,
                    "retryAfterSeconds": retry_after_seconds,
                }));
                refused.retry_after_seconds =
                    Some(u16::try_from(*retry_after_seconds).unwrap_or(u16::MAX));
                refused
            }
            RuntimeError::TooLarge {
                path, size, limit, ..
            } => ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "envelope_too_large",
                error.to_string(),
            )
            .with_details(json!({"path": path, "sizeBytes": size, "limitBytes": limit})),
            RuntimeError::Store(baton_runtime::error::StoreError::TooLarge(reason)) => {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "run_too_large",
                    format!("the run does not fit the store: {reason}"),
                )
                .with_details(json!({"path": "$"}))
            }
            RuntimeError::InvalidRegistration { path, message } => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_registration",
                format!("{path}: {message}"),
            )
            .with_details(json!({"path": path})),
            RuntimeError::RegistrationConflict {
                capability_id,
                message,
            } => ApiError::new(
                StatusCode::CONFLICT,
                "capability_conflict",
                format!("capability `{capability_id}` {message}"),
            )
            .with_details(json!({"path": "$.capabilityId"})),
            RuntimeError::ThreadBusy {
                thread_id,
                active_run_id,
                why,
            } => ApiError::new(
                StatusCode::CONFLICT,
                "thread_busy",
                format!("thread `{thread_id}` is still answering in run `{active_run_id}`: {why}"),
            )
            .with_details(json!({
                "path": "$.threadId",
                "threadId": thread_id,
                "activeRunId": active_run_id,
            })),
            RuntimeError::IdempotencyKeyReused { key, path } => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "idempotency_key_reused",
                error.to_string(),
            )
            .with_details(json!({"path": path, "idempotencyKey": key})),
            RuntimeError::RequestInFlight { key } => {
                let mut busy =
                    ApiError::new(StatusCode::CONFLICT, "request_in_flight", error.to_string())
                        .with_details(json!({"idempotencyKey": key}));
                busy.retry_after_seconds = Some(1);
                busy
            }
            RuntimeError::RunNotFound { path, run_id } => ApiError::new(
                StatusCode::NOT_FOUND,
                "run_not_found",
                format!("{path}: no run `{run_id}`"),
            )
            .with_details(json!({"path": path})),
            RuntimeError::InvalidSchedule { path, message } => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_schedule",
                format!("{path}: {message}"),
            )
            .with_details(json!({"path": path})),
            RuntimeError::CapabilityNotRegistered(capability_id) => ApiError::new(
                StatusCode::NOT_FOUND,
                "capability_not_registered",
                error.to_string(),
            )
            .with_details(json!({"capabilityId": capability_id})),
            RuntimeError::ScheduleNotFound(schedule_id) => ApiError::new(
                StatusCode::NOT_FOUND,
                "schedule_not_found",
                format!("no schedule `{schedule_id}`"),
            )
            .with_details(json!({"scheduleId": schedule_id})),
            RuntimeError::ScheduleLimit { count, limit, .. } => {
                ApiError::new(StatusCode::CONFLICT, "schedule_limit", error.to_string())
                    .with_details(json!({"schedules": count, "limit": limit}))
            }
            RuntimeError::Store(baton_runtime::error::StoreError::Refused(reason))
            | RuntimeError::Queue(baton_runtime::error::QueueError::Refused(reason)) => {
                ApiError::new(
                    StatusCode::BAD_GATEWAY,
                    "dependency_refused",
                    format!(
                        "a service the deployment depends on refused the request; retrying will not help until it is fixed: {reason}"
                    ),
                )
            }
            other if other.is_retryable() => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                other.to_string(),
            ),
            other => {
                tracing::error!(error = %other, "request failed");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "the request failed; see the server log",
                )
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(details) = self.details {
            error["details"] = details;
        }
        let mut response = (self.status, Json(json!({ "error": error }))).into_response();
        if let Some(seconds) = self.retry_after_seconds {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(seconds),
            );
        }
        response
    }
}

impl From<HumanInputRefused> for ApiError {
    /// A person's input the run refused: a 409 for what no longer waits, a
    /// 422 naming each path of an answer that breaks the contract.
    fn from(refusal: HumanInputRefused) -> Self {
        match refusal {
        HumanInputRefused::NotAwaiting {
            run_status,
            node_status,
        } => ApiError::new(
            StatusCode::CONFLICT,
            "not_awaiting_a_person",
            "the node is not waiting for a person (answered already, or the run moved on)",
        )
        .with_details(json!({"runStatus": run_status.as_str(), "nodeStatus": node_status})),
        HumanInputRefused::NotAssignee { assigned_to } => ApiError::new(
            StatusCode::FORBIDDEN,
            "not_assignee",
            "the task is assigned to other people; the caller is neither one of its users nor in one of its groups",
        )
        .with_details(json!({"assignedTo": assigned_to})),
        HumanInputRefused::StalePlanVersion { current } => ApiError::new(
            StatusCode::CONFLICT,
            "stale_plan_version",
            format!("the run's plan is at version {current} now"),
        )
        .with_details(json!({"currentPlanVersion": current})),
        HumanInputRefused::OutputContractViolated(violations) => {
            let errors: Vec<Value> = violations
                .iter()
                .map(|violation| {
                    json!({
                        "path": baton_core::basics::schema::json_path_for_pointer("$.output", &violation.instance_pointer),
                        "message": violation.message,
                        "facet": violation.facet,
                    })
                })
                .collect();
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "output_contract_violated",
                "the output breaks the node's output contract; nothing changed",
            )
            .with_details(json!({"errors": errors}))
        }
        HumanInputRefused::NoPendingRequest { run_status } => ApiError::new(
            StatusCode::CONFLICT,
            "no_pending_request",
            "no request of that kind waits for a person (resolved already, or the run moved on)",
        )
        .with_details(json!({"runStatus": run_status.as_str()})),
        HumanInputRefused::UnknownRequest { pending } => ApiError::new(
            StatusCode::CONFLICT,
            "unknown_request",
            format!("that request does not wait; {pending} does"),
        )
        .with_details(json!({"pendingRequestId": pending})),
        HumanInputRefused::NotPaused { run_status } => {
            ApiError::new(StatusCode::CONFLICT, "not_paused", "the run is not paused")
                .with_details(json!({"runStatus": run_status.as_str()}))
        }
        HumanInputRefused::AnswerRequired => {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "`answer` must be a non-empty text",
            )
            .with_details(json!({"path": "$.answer"}))
        }
        HumanInputRefused::NoManualPolicy {
            policy_id,
            run_status,
        } => ApiError::new(
            StatusCode::NOT_FOUND,
            "policy_not_found",
            format!("the run has no enabled `manual` policy `{policy_id}` (or it ended)"),
        )
        .with_details(json!({"policyId": policy_id, "runStatus": run_status.as_str()})),
    }
    }
}
