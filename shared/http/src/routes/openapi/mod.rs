//! The one table of the API's operations, and the OpenAPI 3.1 document
//! built from it. Each entry is an operation: its `operationId`, the scope
//! the caller must hold, the handler that serves it, its method and path,
//! what it reads and what it answers with which status. The router
//! (`routes::router`) routes every entry's handler from this table, the
//! authorization middleware checks each entry's scope, the audit trail
//! names each request by the entry's id, and the document takes all of it
//! with the JSON Schemas the Rust types generate (`schemars`: the envelope,
//! the runs list, the error body). Served at `GET /api/v1/flex/openapi.json`
//! and checked into `docs/openapi.json`; tests keep the two equal, refuse a
//! route added anywhere but here (the agent protocols' endpoints aside), and
//! keep every status a route answers with in its entry.
//!
//! Written by hand rather than with `utoipa`: the bodies are read by
//! `bodies::ValidatedJson` (a bad body is a 400/422 naming its JSON path,
//! never an extractor's plain-text rejection) and most answers are built
//! from types that already generate their JSON Schemas with `schemars`.

use std::sync::LazyLock;

use axum::Json;
use axum::response::IntoResponse;
use axum::routing::{MethodRouter, get, post};

use super::{ApiState, chat, evaluations};
use crate::auth::Scope;

mod document;
#[cfg(test)]
mod generator_checks;
mod memory_operations;
mod resource_operations;
mod run_operations;
mod schemas;

pub use document::document;

/// The table, built once: what the middleware reads on every request.
static OPERATIONS: LazyLock<Vec<Operation>> = LazyLock::new(operations);

/// The operation `method path` (an OpenAPI path, `{name}` parameters), if
/// the table has it.
pub fn operation(method: &str, path: &str) -> Option<&'static Operation> {
    let method = method.to_ascii_lowercase();
    OPERATIONS
        .iter()
        .find(|operation| operation.method == method && operation.path == path)
}

/// The scope `method path` needs; `None` for a path the table does not
/// know or an open operation.
pub fn declared_scope(method: &str, path: &str) -> Option<Scope> {
    operation(method, path).and_then(|operation| operation.scope)
}

/// The audit trail's name for an operation: its `operationId`, else
/// `method path` (a route outside the document, `/a2a`, `/mcp`).
pub fn action_name(method: &str, path: &str) -> String {
    operation(method, path).map_or_else(
        || format!("{} {path}", method.to_ascii_lowercase()),
        |operation| operation.id.to_string(),
    )
}

/// Who serves an operation.
#[derive(Debug, Clone, Copy)]
pub enum Served {
    /// Its handler, behind the bearer token, its scope and the audit trail.
    Authenticated(fn() -> MethodRouter<ApiState>),
    /// Its handler, open to anyone (the document itself).
    Open(fn() -> MethodRouter<ApiState>),
    /// The run viewer's routes (`viewer::viewer_routes`, built with the
    /// viewer's configured API origins), open.
    ByViewer,
}

/// What a response carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// `application/json` of a named component schema.
    Json(&'static str),
    /// `text/event-stream` of event frames.
    Sse,
    /// A static file of the run viewer.
    File,
    /// No body.
    Empty,
}

/// One response of an operation.
#[derive(Debug, Clone, Copy)]
pub struct Answer {
    pub status: u16,
    pub description: &'static str,
    pub body: Body,
}

/// One operation of the API.
#[derive(Debug, Clone)]
pub struct Operation {
    /// The hand-chosen `operationId` (what generated clients name their
    /// methods, and the audit trail its records' action).
    pub id: &'static str,
    pub method: &'static str,
    /// OpenAPI path (`{name}` parameters).
    pub path: &'static str,
    pub summary: &'static str,
    /// Needs `Authorization: Bearer <token>`.
    pub authenticated: bool,
    /// The scope the caller must hold; `None` on an open operation.
    pub scope: Option<Scope>,
    /// The handler that serves it.
    pub served: Served,
    /// The request body's component schema, if any.
    pub request: Option<&'static str>,
    /// Query parameters: (name, description).
    pub query: &'static [(&'static str, &'static str)],
    /// Takes an `Idempotency-Key` header (and the body's `idempotencyKey`):
    /// sent again with the same key, it makes no second effect.
    pub idempotency_key: bool,
    pub answers: Vec<Answer>,
}

/// The operations that take an idempotency key (`routes::request_keys`);
/// `POST /runs` takes the envelope's own `idempotencyKey`.
pub const KEYED_OPERATIONS: [&str; 4] =
    ["sendChatMessage", "forkRun", "resumeRun", "createSchedule"];

const REPLAYED: Answer = answer(
    200,
    "the first request's answer, again: its idempotency key was used before by the same request (`Idempotent-Replayed: true`)",
    Body::Json("RunAccepted"),
);
const IN_FLIGHT: Answer = answer(
    409,
    "a request with this idempotency key is still being made (`request_in_flight`); `Retry-After` says when to ask again",
    Body::Json("Error"),
);

const fn answer(status: u16, description: &'static str, body: Body) -> Answer {
    Answer {
        status,
        description,
        body,
    }
}

const BAD_JSON: Answer = answer(
    400,
    "the body is not JSON (`invalid_json`)",
    Body::Json("Error"),
);
const UNAUTHORIZED: Answer = answer(
    401,
    "no bearer token, an unknown one, or a refused JWT (`details.reason`: expired, wrong_audience, …)",
    Body::Json("Error"),
);
const FORBIDDEN: Answer = answer(
    403,
    "the caller lacks the operation's scope (`missing_scope`, `details.scope`), or the request comes from a page on another site (`cross_origin_refused`) or, on a server without tokens, names a host other than this machine's (`host_refused`)",
    Body::Json("Error"),
);
const UNSUPPORTED_MEDIA_TYPE: Answer = answer(
    415,
    "a body that is not `application/json` (`unsupported_media_type`)",
    Body::Json("Error"),
);
const NOT_FOUND: Answer = answer(
    404,
    "no such run (or another tenant's)",
    Body::Json("Error"),
);
const CONFLICT: Answer = answer(
    409,
    "the run is not in a state that takes this (answered already, moved on, stale plan version)",
    Body::Json("Error"),
);
const INVALID: Answer = answer(
    422,
    "the body breaks its contract; `details.path` (or `details.errors[].path`) names the JSON path",
    Body::Json("Error"),
);
const UNAVAILABLE: Answer = answer(
    503,
    "the store or queue is unavailable; retry",
    Body::Json("Error"),
);
const INTERNAL: Answer = answer(500, "a fault of the server", Body::Json("Error"));
const DEPENDENCY_REFUSED: Answer = answer(
    502,
    "a service the deployment depends on (DynamoDB, SQS, EventBridge Scheduler) refused the request for good (`dependency_refused`): access denied, a resource missing; retrying will not help until the deployment is fixed",
    Body::Json("Error"),
);
const TENANT_LIMIT: Answer = answer(
    429,
    "the tenant has as many runs at work as `BATON_TENANT_MAX_LIVE_RUNS` allows (`tenant_limit`), or submitted as many in the last 60 s as `BATON_TENANT_MAX_SUBMISSIONS_PER_MINUTE` allows (`tenant_rate_limit`); `Retry-After` says when to try again",
    Body::Json("Error"),
);
const TOO_LARGE: Answer = answer(
    413,
    "the body is over `BATON_MAX_BODY_BYTES` (`body_too_large`), or the envelope over `BATON_MAX_ENVELOPE_BYTES` (`envelope_too_large`); `details.limitBytes` names the limit",
    Body::Json("Error"),
);

/// Who an operation is: its id, scope, handler, method and path.
#[derive(Clone, Copy)]
struct Route {
    id: &'static str,
    scope: Scope,
    handler: fn() -> MethodRouter<ApiState>,
    method: &'static str,
    path: &'static str,
}

const fn route(
    id: &'static str,
    scope: Scope,
    handler: fn() -> MethodRouter<ApiState>,
    method: &'static str,
    path: &'static str,
) -> Route {
    Route {
        id,
        scope,
        handler,
        method,
        path,
    }
}

/// An operation behind the bearer token (with the answers every such
/// route can give: too large, over the tenant's limit, 401, 503, 500).
fn api(
    route: Route,
    summary: &'static str,
    request: Option<&'static str>,
    query: &'static [(&'static str, &'static str)],
    answers: &[Answer],
) -> Operation {
    let Route {
        id,
        scope,
        handler,
        method,
        path,
    } = route;
    let mut answers = answers.to_vec();
    if Option::is_some(&request) {
        answers.push(TOO_LARGE);
    }
    // The routes that start a run answer a tenant over its limit.
    if method == "post"
        && [
            "/api/v1/flex/runs",
            "/api/v1/flex/run.stream",
            "/api/v1/judge/evaluations",
            "/api/v1/flex/evaluations",
            "/api/v1/chat",
        ]
        .contains(&path)
    {
        answers.push(TENANT_LIMIT);
    }
    let idempotency_key = KEYED_OPERATIONS.contains(&id);
    if idempotency_key {
        if !answers.iter().any(|answer| answer.status == 200) {
            let body = answers
                .iter()
                .find(|answer| answer.status == 201 || answer.status == 202)
                .map_or(REPLAYED.body, |first| first.body);
            answers.push(Answer { body, ..REPLAYED });
        }
        if !answers.iter().any(|answer| answer.status == 409) {
            answers.push(IN_FLIGHT);
        }
    }
    if method != "get" {
        answers.push(UNSUPPORTED_MEDIA_TYPE);
    }
    answers.extend([
        UNAUTHORIZED,
        FORBIDDEN,
        DEPENDENCY_REFUSED,
        UNAVAILABLE,
        INTERNAL,
    ]);
    Operation {
        id,
        method,
        path,
        summary,
        authenticated: true,
        scope: Some(scope),
        served: Served::Authenticated(handler),
        request,
        query,
        idempotency_key,
        answers,
    }
}

/// Every operation, in the order the document lists them.
pub fn operations() -> Vec<Operation> {
    let open = |id, served, method, path, summary, answers: &[Answer]| Operation {
        id,
        method,
        path,
        summary,
        authenticated: false,
        scope: None,
        served,
        request: None,
        query: &[],
        idempotency_key: false,
        answers: answers.to_vec(),
    };
    let mut operations = run_operations::runs_and_people();
    operations.extend(resource_operations::schedules_and_evaluations());
    operations.extend(resource_operations::sandbox_operations());
    operations.extend(memory_operations::memory_operations());
    operations.extend([
        api(
            route("createEvaluation", Scope::EvaluationsRun, || post(evaluations::create_evaluation), "post", "/api/v1/judge/evaluations"),
            "Convene a judge panel on content; streams progress, then the evaluation",
            Some("PanelRequest"),
            &[],
            &[
                answer(200, "progress frames and the evaluation", Body::Sse),
                BAD_JSON,
                INVALID,
            ],
        ),
        api(
            route("getEvaluation", Scope::RunsRead, || get(evaluations::get_evaluation), "get", "/api/v1/judge/evaluations/{evaluation_id}"),
            "An evaluation's verdict and transcript",
            None,
            &[],
            &[
                answer(200, "the evaluation", Body::Json("PanelOutput")),
                answer(
                    202,
                    "still deliberating: `{evaluationId, status}`",
                    Body::Json("EvaluationPending"),
                ),
                answer(404, "no such evaluation", Body::Json("Error")),
                answer(409, "it ended without a verdict", Body::Json("Error")),
            ],
        ),
        api(
            route("sendChatMessage", Scope::RunsWrite, || post(chat::chat), "post", "/api/v1/chat"),
            "One chat message (a run of one agent node); streams its frames",
            Some("ChatMessageRequest"),
            &[("dialect", "`hooks`: the hook-event rendering")],
            &[
                answer(200, "the message's frames", Body::Sse),
                BAD_JSON,
                answer(
                    404,
                    "no such thread (or another tenant's)",
                    Body::Json("Error"),
                ),
                answer(
                    409,
                    "the thread is still answering and `multitaskStrategy` is `reject` (or its queue is full): `thread_busy`, `details.activeRunId`",
                    Body::Json("Error"),
                ),
                INVALID,
            ],
        ),
        api(
            route("listThreads", Scope::RunsRead, || get(chat::list_threads), "get", "/api/v1/threads"),
            "The tenant's chat threads, the most recently answered first",
            None,
            &[
                ("limit", "1 to 100 (default 20)"),
                ("cursor", "the previous page's nextCursor"),
            ],
            &[
                answer(200, "one page", Body::Json("ThreadListPage")),
                answer(
                    400,
                    "a bad parameter (`details.parameter`)",
                    Body::Json("Error"),
                ),
            ],
        ),
        api(
            route("getThread", Scope::RunsRead, || get(chat::thread), "get", "/api/v1/threads/{thread_id}"),
            "A chat thread by pages from its newest end: its exchanges, the run answering and those queued",
            None,
            &[
                ("limit", "exchanges per page, 1 to 200 (default 200)"),
                ("before", "the previous page's olderCursor: the page of exchanges older than it"),
            ],
            &[
                answer(200, "the thread", Body::Json("ThreadView")),
                answer(
                    400,
                    "a bad parameter (`details.parameter`)",
                    Body::Json("Error"),
                ),
                answer(
                    404,
                    "no such thread (or another tenant's)",
                    Body::Json("Error"),
                ),
            ],
        ),
        open(
            "getOpenApiDocument",
            Served::Open(|| get(serve_document)),
            "get",
            "/api/v1/flex/openapi.json",
            "This document",
            &[answer(
                200,
                "the OpenAPI document",
                Body::Json("OpenApiDocument"),
            )],
        ),
        open(
            "getViewer",
            Served::ByViewer,
            "get",
            "/",
            "The run viewer (asks for a token once, then uses this API)",
            &[answer(200, "the page", Body::File)],
        ),
        open(
            "getViewerPage",
            Served::ByViewer,
            "get",
            "/index.html",
            "The run viewer",
            &[answer(200, "the page", Body::File)],
        ),
        open(
            "getViewerFile",
            Served::ByViewer,
            "get",
            "/viewer/{name}",
            "A run viewer file (modules, styles)",
            &[
                answer(200, "the file", Body::File),
                answer(404, "no such viewer file", Body::Json("Error")),
            ],
        ),
    ]);
    operations
}

/// `GET /api/v1/flex/openapi.json`.
pub(crate) async fn serve_document() -> impl IntoResponse {
    Json(document())
}
