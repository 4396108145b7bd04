//! The request and response bodies of the routes, as types: handlers read
//! requests into them with the [`ValidatedJson`] extractor (a field of the
//! wrong type is an error naming its JSON path, through
//! `serde_path_to_error`) and answer with them, and the
//! OpenAPI document takes their JSON Schemas (`schemars`), so what the
//! document says is what the code reads and writes.

use std::collections::BTreeMap;

use axum::body::Bytes;
use baton_core::basics::instant::Instant;
use baton_core::contracts::capability::{
    AgentType, CapabilityCost, CapabilityRegistration, CapabilityStatus, InputTraits, NodeKind,
    RegisteredCapability,
};
use baton_core::state::run::RunStatus;
use baton_core::state::tasks::{HumanTask, PendingRequest};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::ApiError;
use axum::http::StatusCode;
use serde_json::json;

/// A request body read as `T`: the one way a handler reads a JSON body.
/// Not JSON: 400 `invalid_json` naming the line and column. JSON that does
/// not fit `T`: `T::refuse` with the JSON path of the first field that does
/// not (`$.answer`, `$` for the body itself). A body over the limit is
/// axum's 413, which the router answers in JSON (`routes::json_payload_too_large`).
#[derive(Debug)]
pub struct ValidatedJson<T>(pub T);

/// A type a request body is read into, and how a body that does not fit it
/// is refused.
pub trait RequestBody: DeserializeOwned {
    /// The error for a body that is JSON but does not fit, at `path`.
    fn refuse(path: &str, message: String) -> ApiError;

    /// The body's JSON as this type, or the JSON path of what does not fit
    /// and why. A typed request must be a JSON object.
    fn from_json(value: Value) -> Result<Self, (String, String)> {
        if !value.is_object() {
            return Err(("$".into(), "the body must be a JSON object".into()));
        }
        serde_path_to_error::deserialize(value)
            .map_err(baton_core::contracts::envelope::located_serde_error)
    }
}

/// A raw JSON body (an envelope, a registration, a schedule, a dataset):
/// the service that takes it checks it and names the JSON path of a fault.
impl RequestBody for Value {
    fn refuse(path: &str, message: String) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_json", message)
            .with_details(json!({"path": path}))
    }

    /// Any JSON, as parsed: not walked again.
    fn from_json(value: Value) -> Result<Self, (String, String)> {
        Ok(value)
    }
}

impl<S: Send + Sync, T: RequestBody> axum::extract::FromRequest<S> for ValidatedJson<T> {
    type Rejection = axum::response::Response;

    async fn from_request(
        request: axum::extract::Request,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        use axum::response::IntoResponse;
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(IntoResponse::into_response)?;
        read_body::<T>(&bytes)
            .map(ValidatedJson)
            .map_err(IntoResponse::into_response)
    }
}

/// Reads `body` as `T` (the extractor's work, for a body already in hand).
pub(crate) fn read_body<T: RequestBody>(body: &Bytes) -> Result<T, ApiError> {
    T::from_json(parse_json_body(body)?).map_err(|(path, message)| T::refuse(&path, message))
}

/// Reads `body` as JSON: not JSON is a 400 `invalid_json` naming the line
/// and column.
fn parse_json_body(body: &Bytes) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|error| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_json",
            format!("the body is not valid JSON: {error}"),
        )
        .with_details(json!({"line": error.line(), "column": error.column()}))
    })
}

// ---- requests ----

/// `POST /run.resume`: a human node's output (`taskId`, or `runId` +
/// `nodeId`, with `output`), a clarifying answer (`runId` + `answer`,
/// `requestId` optional) or a pause resumed (`runId` alone); always at the
/// plan version the caller read (`expectedPlanVersion`).
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResumeRequest {
    /// `{runId}:{nodeId}`, as `GET /tasks` lists it.
    #[serde(default)]
    pub task_id: Option<String>,
    #[serde(default)]
    pub run_id: Option<String>,
    #[serde(default)]
    pub node_id: Option<String>,
    /// The human node's output (checked against its output contract).
    #[serde(default)]
    pub output: Option<Value>,
    /// The answer to a clarifying question.
    #[serde(default)]
    pub answer: Option<String>,
    /// The clarifying question answered (the pending one when absent).
    #[serde(default)]
    pub request_id: Option<String>,
    /// The plan version the request was read at.
    pub expected_plan_version: u32,
    /// Makes the request once: sent again with the same key (here or as
    /// the `Idempotency-Key` header), it answers with the first one's
    /// answer and makes no second effect (kept 24 h).
    #[serde(default, skip_serializing)]
    pub idempotency_key: Option<String>,
}

/// `POST /hitl/resolve`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolveRequest {
    pub run_id: String,
    pub request_id: String,
    pub decision: ResolveDecision,
    #[serde(default)]
    pub note: Option<String>,
}

/// What a person decided about an approval request.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResolveDecision {
    Approve,
    Reject,
}

/// `POST /tasks/{taskId}/decline`: the run fails with the reason.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeclineRequest {
    pub reason_code: String,
    #[serde(default)]
    pub note: Option<String>,
}

/// `POST /api/v1/chat`: one message (blank asks the registry's clarifying
/// question back), on a thread (a new one when absent).
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChatMessageRequest {
    pub message: String,
    #[serde(default)]
    pub thread_id: Option<String>,
    /// A registered specialist to talk to instead of the orchestrator.
    #[serde(default)]
    pub agent: Option<String>,
    /// A context type of the registry (its guidance joins the prompt).
    #[serde(default)]
    pub context_type: Option<String>,
    /// Facet values for the plans the conversation creates (checked
    /// against each facet's schema: 422 naming `$.inputs.<facet>`).
    #[serde(default)]
    pub inputs: serde_json::Map<String, serde_json::Value>,
    /// The entity the conversation is about (the default scope of the
    /// plans it creates).
    #[serde(default)]
    pub entity_id: Option<String>,
    /// What the message does if its thread is still answering another:
    /// `reject` (409 naming the run), `enqueue` (the default: answered
    /// after it), `interrupt` (the runs in flight are cancelled, what they
    /// said kept and marked) or `rollback` (cancelled and left out of the
    /// thread).
    #[serde(default)]
    pub multitask_strategy: baton_core::records::thread_lane::MultitaskStrategy,
    /// Makes the request once: sent again with the same key (here or as
    /// the `Idempotency-Key` header), it answers with the first one's
    /// answer and makes no second effect (kept 24 h).
    #[serde(default, skip_serializing)]
    pub idempotency_key: Option<String>,
}

/// `POST /runs/{runId}/fork`: a new run from a point of this one.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForkRequest {
    /// Where the fork starts: `{"planVersion": n}` (the run's current plan
    /// version: every node completed under it is reused) or `{"eventId": n}`
    /// (the nodes completed at or before that frame).
    pub at: ForkAt,
    /// Input facets set anew (each checked against its facet); the nodes
    /// reading them run again.
    #[serde(default)]
    pub inputs: serde_json::Map<String, serde_json::Value>,
    /// Corrected outputs of nodes completed at the fork point, checked
    /// against each node's output contract; the nodes downstream run again.
    #[serde(default)]
    pub node_outputs: std::collections::BTreeMap<String, serde_json::Value>,
    /// Makes the request once: sent again with the same key (here or as
    /// the `Idempotency-Key` header), it answers with the first one's
    /// answer and makes no second effect (kept 24 h).
    #[serde(default, skip_serializing)]
    pub idempotency_key: Option<String>,
}

/// A fork point: exactly one of the two.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForkAt {
    #[serde(default)]
    pub plan_version: Option<u32>,
    #[serde(default)]
    pub event_id: Option<u64>,
}

// ---- responses ----

/// `GET /runs/{runId}/history`: the points a fork can start from.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunHistory {
    pub run_id: String,
    /// Oldest first.
    pub checkpoints: Vec<CheckpointView>,
}

/// One checkpoint: a plan version generated or updated, or a node completed.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointView {
    /// The frame that marks it (fork with `{"at": {"eventId": …}}`).
    pub event_id: u64,
    /// `plan` or `node`.
    pub kind: String,
    pub plan_version: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
}

/// `GET /api/v1/threads/{threadId}`: a chat thread as its readers see it.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadView {
    pub thread_id: String,
    /// One page from the thread's newest end (`limit`, 200 at most),
    /// oldest first; exchanges a `rollback` cut short are left out.
    pub exchanges: Vec<ThreadExchangeView>,
    /// Present when older exchanges remain: pass it as `before` for the
    /// page before this one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub older_cursor: Option<String>,
    /// The run answering on the thread now, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_run_id: Option<String>,
    /// Runs waiting behind it (`multitaskStrategy: enqueue`), in order.
    pub queued_run_ids: Vec<String>,
}

/// One message of a thread and its answer.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadExchangeView {
    /// The run that answered.
    pub run_id: String,
    /// When it was answered (Unix ms).
    pub at_millis: u64,
    pub user: String,
    pub assistant: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// A newer message cut this answer short (`multitaskStrategy:
    /// interrupt`): `assistant` is what it had said.
    pub interrupted: bool,
    /// Plans drafted for approval and not run yet, after this exchange.
    pub pending_drafts: usize,
}

/// `POST /runs` (202 created, 200 the run an idempotency key named before).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunAccepted {
    pub run_id: String,
    pub thread_id: String,
    pub status: RunStatus,
    /// The idempotency key was used before: this is that run.
    pub deduplicated: bool,
    /// `constraints.resumeRunId` named this run: it was not created now.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub resumed: bool,
}

/// `POST /runs/{runId}/cancel`: the run's status after the cancel.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunStatusAnswer {
    pub run_id: String,
    pub status: RunStatus,
}

/// What a person's action did: the run's status and version after it.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HumanActionApplied {
    pub run_id: String,
    pub status: RunStatus,
    pub version: u64,
}

/// `GET /tasks`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TaskList {
    pub tasks: Vec<HumanTask>,
}

/// `GET /hitl/requests`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RequestList {
    pub requests: Vec<PendingRequest>,
}

/// `GET /judge/evaluations/{id}` while the panel is still at work (202).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvaluationPending {
    pub evaluation_id: String,
    pub status: RunStatus,
}

/// Where a listed capability comes from.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CapabilitySource {
    /// The deployment's registry files.
    Registry,
    /// Registered by an agent for the tenant (`POST /capabilities/register`).
    Registered,
}

/// One capability as `GET /capabilities` lists it.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapabilitySummary {
    pub capability_id: String,
    /// How a search (`q`) found it: its fused score and by what
    /// (`lexical`, `embedding`, `both`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found: Option<CapabilityFound>,
    pub agent_type: AgentType,
    pub kind: NodeKind,
    pub version: String,
    pub display_name: String,
    pub summary: String,
    pub input_traits: Option<InputTraits>,
    pub input_contract: Vec<String>,
    pub output_contract: Vec<String>,
    pub cost: Option<CapabilityCost>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub allows_clarify: bool,
    /// It can be asked for only some of its outputs (see the registry's
    /// `partialOutputs`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub partial_outputs: bool,
    /// Its branch condition over its input facets (JSONLogic), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guard: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instruction_templates: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assignment_defaults: Option<Map<String, Value>>,
    pub source: CapabilitySource,
    /// Whether the planner may use it (registry files' are always active).
    pub status: CapabilityStatus,
    /// Registered ones: first registered (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registered_at: Option<String>,
    /// Registered ones: last heartbeat (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_seen_at: Option<String>,
    /// Registered ones: inactive after this long without a heartbeat.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heartbeat_timeout_seconds: Option<u64>,
}

impl CapabilitySummary {
    /// A capability of the registry files.
    pub fn of_registry(capability: &CapabilityRegistration) -> Self {
        Self::of(
            capability,
            CapabilitySource::Registry,
            CapabilityStatus::Active,
        )
    }

    /// A tenant's registration, with its status.
    pub fn of_registration(record: &RegisteredCapability, status: CapabilityStatus) -> Self {
        let mut summary = Self::of(&record.registration, CapabilitySource::Registered, status);
        summary.registered_at =
            Some(Instant::from_unix_millis(record.registered_at_millis).rfc3339());
        summary.last_seen_at =
            Some(Instant::from_unix_millis(record.last_seen_at_millis).rfc3339());
        summary.heartbeat_timeout_seconds = Some(record.heartbeat_timeout_millis() / 1000);
        summary
    }

    fn of(
        capability: &CapabilityRegistration,
        source: CapabilitySource,
        status: CapabilityStatus,
    ) -> Self {
        CapabilitySummary {
            found: None,
            capability_id: capability.capability_id.clone(),
            agent_type: capability.agent_type,
            kind: capability.kind,
            version: capability.version.clone(),
            display_name: capability.display_name.clone(),
            summary: capability.summary.clone(),
            input_traits: capability.input_traits.clone(),
            input_contract: capability.input_contract.clone(),
            output_contract: capability.output_contract.clone(),
            cost: capability.cost.clone(),
            allows_clarify: capability.allows_clarify,
            partial_outputs: capability.partial_outputs,
            guard: capability.guard.clone(),
            instruction_templates: capability.instruction_templates.clone(),
            assignment_defaults: capability.assignment_defaults.clone(),
            source,
            status,
            registered_at: None,
            last_seen_at: None,
            heartbeat_timeout_seconds: None,
        }
    }
}

/// `GET /schedules`: the tenant's schedules, oldest first.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ScheduleList {
    pub schedules: Vec<baton_core::records::schedules::Schedule>,
}

/// `GET /capabilities`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapabilityList {
    pub capabilities: Vec<CapabilitySummary>,
    /// Facets in the registry.
    pub facet_count: usize,
    /// A search's embedding model failed: it ranked by words alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embeddings_unavailable: Option<String>,
}

/// How a search found a capability.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapabilityFound {
    pub score: f64,
    pub found_by: baton_memory::search::FoundBy,
}

impl CapabilityList {
    /// The registry's capabilities, then the tenant's registrations.
    pub fn of(listing: &baton_runtime::services::CapabilityListing) -> Self {
        let registry = &listing.registry;
        let mut capabilities: Vec<CapabilitySummary> = registry
            .capabilities()
            .map(CapabilitySummary::of_registry)
            .collect();
        capabilities.extend(
            listing
                .registrations
                .iter()
                .map(|(record, status)| CapabilitySummary::of_registration(record, *status)),
        );
        CapabilityList {
            capabilities,
            facet_count: registry.facets.len(),
            embeddings_unavailable: None,
        }
    }

    /// The capabilities `answer` found, best first, each with how.
    pub fn found(
        listing: &baton_runtime::services::CapabilityListing,
        answer: baton_runtime::services::capability_search::CapabilitySearchAnswer,
    ) -> Self {
        let mut every = Self::of(listing).capabilities;
        let capabilities = answer
            .matches
            .into_iter()
            .filter_map(|found| {
                let index = every
                    .iter()
                    .position(|summary| summary.capability_id == found.capability_id)?;
                let mut summary = every.swap_remove(index);
                summary.found = Some(CapabilityFound {
                    score: found.score,
                    found_by: found.found_by,
                });
                Some(summary)
            })
            .collect();
        CapabilityList {
            capabilities,
            facet_count: listing.registry.facets.len(),
            embeddings_unavailable: answer.embeddings_unavailable,
        }
    }
}

/// `POST /capabilities/register`: the registration, with the JSON Schemas
/// its contracts compiled to.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapabilityRegistered {
    #[serde(flatten)]
    pub summary: CapabilitySummary,
    pub input_schema: Value,
    pub output_schema: Value,
}

/// `GET /openapi.json`: the OpenAPI 3.1 document of these routes.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OpenApiDocument {
    /// `3.1.0`.
    pub openapi: String,
    pub info: Map<String, Value>,
    pub paths: BTreeMap<String, Value>,
    pub components: Map<String, Value>,
    #[serde(default)]
    pub security: Vec<Value>,
}
