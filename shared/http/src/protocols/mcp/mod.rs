//! Baton as an MCP server (the Model Context Protocol, through `rmcp`):
//! the tools an IDE or a desktop assistant calls to run work on Baton.
//! Served over Streamable HTTP at `/mcp` (behind the bearer tokens, the
//! tenant of the token) by [`mcp_service`], and over stdio by `baton mcp`
//! (one tenant, the process's). Behind the crate's `mcp-server` feature,
//! which the CLI enables and the Lambda functions leave out (binary size).
//!
//! The tools, each with an input schema generated from the same Rust types
//! as the OpenAPI document (the envelope is `TaskEnvelope`'s):
//!
//! - `start_run {envelope}`: submits, sends one progress notification per
//!   frame (when the call carries a progress token), and answers the run's
//!   end: the validated output, or the status and failure, or the tasks a
//!   parked run waits on;
//! - `plan {envelope}`: the plan, its diagnostics and each node's
//!   escalation, without a run (`baton plan`);
//! - `list_capabilities {}`; `get_run {runId}` (the `GET /runs/{id}`
//!   snapshot);
//! - `list_tasks {capabilityId?}`; `answer_task {runId, nodeId,
//!   expectedPlanVersion, output}`;
//! - `send_chat_message {message, threadId?, agent?}`: one chat message,
//!   answered when its run ends;
//! - `memory_put {namespace, key, value, text?}` and `memory_search
//!   {namespaces, query, limit?}`: the tenant's memory across runs
//!   (`memory_tools.rs`).
//!
//! Bad arguments are a tool error naming the JSON path (never a protocol
//! error), as the HTTP routes name it.

use std::sync::Arc;

use baton_core::state::run::RunStatus;
use baton_core::wire::event::EventFrame;
use baton_runtime::services::{ChatRequest, PersonInput, PersonInputOutcome, Submitter};
use futures_util::StreamExt;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ErrorData, Implementation,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::auth::{Principal, Scope, Tenant};
use tool_answers::{ToolRefusal, arguments, refused, runtime_refusal};

mod memory_tools;
mod tool_answers;
use crate::state::{ApiState, StreamOf};

/// `start_run` and `plan`: an envelope.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EnvelopeArguments {
    /// The task envelope, as `POST /runs` takes it.
    #[schemars(with = "baton_core::contracts::envelope::TaskEnvelope")]
    envelope: Value,
}

/// `get_run`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RunArguments {
    run_id: String,
}

/// `list_tasks`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TaskListArguments {
    /// Only this capability's tasks.
    #[serde(default)]
    capability_id: Option<String>,
}

/// `answer_task`: a person's answer to a parked node, as `POST /run.resume`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AnswerArguments {
    run_id: String,
    node_id: String,
    /// The plan version the task was read at.
    expected_plan_version: u32,
    /// The node's output, checked against its output contract.
    output: Value,
}

/// `send_chat_message`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ChatArguments {
    message: String,
    /// The thread to continue; a new one when absent.
    #[serde(default)]
    thread_id: Option<String>,
    /// A registered specialist to talk to instead of the orchestrator.
    #[serde(default)]
    agent: Option<String>,
}

/// The MCP server of one deployment: the API's services, and the tenant
/// when the transport has no token (stdio).
#[derive(Clone)]
pub struct BatonMcpServer {
    state: ApiState,
    fixed_tenant: Option<String>,
}

impl BatonMcpServer {
    /// For Streamable HTTP: each call's tenant is its bearer token's.
    pub fn over_http(state: ApiState) -> Self {
        BatonMcpServer {
            state,
            fixed_tenant: None,
        }
    }

    /// For stdio: every call is `tenant`'s.
    pub fn for_tenant(state: ApiState, tenant: &str) -> Self {
        BatonMcpServer {
            state,
            fixed_tenant: Some(tenant.to_string()),
        }
    }

    /// The caller's principal: the one the HTTP middleware authenticated;
    /// on stdio (one local user, no credential) every scope.
    fn principal_of(&self, context: &RequestContext<RoleServer>) -> Option<Principal> {
        if let Some(tenant) = &self.fixed_tenant {
            return Some(Principal {
                tenant: tenant.clone(),
                user: None,
                groups: Vec::new(),
                scopes: vec![Scope::Admin],
                credential: crate::auth::Credential::Anonymous,
            });
        }
        context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Principal>())
            .cloned()
    }

    fn tenant_of(&self, context: &RequestContext<RoleServer>) -> Option<String> {
        self.fixed_tenant.clone().or_else(|| {
            context
                .extensions
                .get::<axum::http::request::Parts>()
                .and_then(|parts| parts.extensions.get::<Tenant>())
                .map(|tenant| tenant.0.clone())
        })
    }
}

/// The scope each tool needs (the same as its HTTP route's).
fn tool_scope(tool: &str) -> Option<Scope> {
    match tool {
        "start_run" | "send_chat_message" | "memory_put" => Some(Scope::RunsWrite),
        "plan" | "list_capabilities" | "get_run" | "list_tasks" | "memory_search" => {
            Some(Scope::RunsRead)
        }
        "answer_task" => Some(Scope::TasksAnswer),
        _ => None,
    }
}

/// The tools, with their input schemas.
fn tools() -> Vec<Tool> {
    fn schema<T: schemars::JsonSchema>() -> Arc<Map<String, Value>> {
        let mut schema = serde_json::to_value(schemars::schema_for!(T)).unwrap_or_default();
        if let Some(fields) = schema.as_object_mut() {
            fields.remove("$schema");
        }
        Arc::new(schema.as_object().cloned().unwrap_or_default())
    }
    vec![
        Tool::new(
            "start_run",
            "Run a task envelope to its end: progress per event frame, then the validated output (or the failure, or the tasks a parked run waits on).",
            schema::<EnvelopeArguments>(),
        ),
        Tool::new(
            "plan",
            "Plan an envelope without running it: the plan, its diagnostics and where each node would escalate.",
            schema::<EnvelopeArguments>(),
        ),
        Tool::new(
            "list_capabilities",
            "The registry's capabilities and the tenant's registrations.",
            Arc::new(Map::from_iter([
                ("type".to_string(), json!("object")),
                ("properties".to_string(), json!({})),
            ])),
        ),
        Tool::new(
            "get_run",
            "A redacted snapshot of a run: status, plan versions, nodes, output and its provenance, usage.",
            schema::<RunArguments>(),
        ),
        Tool::new(
            "list_tasks",
            "The tasks parked runs wait on a person for.",
            schema::<TaskListArguments>(),
        ),
        Tool::new(
            "answer_task",
            "A person's answer to a parked node (checked against its output contract); the run goes on.",
            schema::<AnswerArguments>(),
        ),
        Tool::new(
            "send_chat_message",
            "One chat message on a thread (a new thread when none is named), answered when its run ends.",
            schema::<ChatArguments>(),
        ),
        Tool::new(
            "memory_put",
            "Keep an item in the tenant's memory across runs: a value under a namespace and key (a new version replaces the old).",
            schema::<memory_tools::MemoryPutArguments>(),
        ),
        Tool::new(
            "memory_search",
            "The items of the tenant's memory best matching a query, from up to 10 namespaces (by words, and by meaning where the deployment has an embedding model).",
            schema::<memory_tools::MemorySearchArguments>(),
        ),
    ]
}

impl ServerHandler for BatonMcpServer {
    fn get_info(&self) -> ServerConfig {
        let mut config = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        config.server_info = Implementation::new("baton", env!("CARGO_PKG_VERSION"));
        config.instructions = Some(
            "Baton runs task envelopes as plans of AI, human and built-in capabilities and returns only output that meets the envelope's contract. Start with `plan` or `start_run`; a run that waits for a person lists its tasks (`list_tasks`, `answer_task`).".into(),
        );
        config
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(tenant) = self.tenant_of(&context) else {
            return Ok(refused("no tenant: a bearer token is required", json!({}))
                .into_result()
                .into());
        };
        if let Some(scope) = tool_scope(request.name.as_ref()) {
            let holds = self
                .principal_of(&context)
                .is_some_and(|principal| principal.holds(scope));
            if !holds {
                return Ok(refused(
                    format!("the tool `{}` needs the `{scope}` scope, which the caller's credential does not hold", request.name),
                    json!({"code": "missing_scope", "scope": scope.as_str()}),
                )
                .into_result()
                .into());
            }
        }
        let outcome = match request.name.as_ref() {
            "start_run" => self.start_run(&tenant, request.arguments, &context).await,
            "plan" => self.plan(request.arguments),
            "list_capabilities" => self.list_capabilities(&tenant).await,
            "get_run" => self.get_run(&tenant, request.arguments).await,
            "list_tasks" => self.list_tasks(&tenant, request.arguments).await,
            "answer_task" => {
                let answerer = self
                    .principal_of(&context)
                    .map(|principal| principal.answerer())
                    .unwrap_or_default();
                self.answer_task(&tenant, request.arguments, &answerer)
                    .await
            }
            "send_chat_message" => self.send_chat_message(&tenant, request.arguments).await,
            "memory_put" => {
                let person = self
                    .principal_of(&context)
                    .and_then(|principal| principal.user);
                self.memory_put(&tenant, request.arguments, person).await
            }
            "memory_search" => self.memory_search(&tenant, request.arguments).await,
            other => Err(refused(
                format!("no tool `{other}`"),
                json!({"tools": tools().iter().map(|tool| tool.name.to_string()).collect::<Vec<_>>()}),
            )),
        };
        Ok(match outcome {
            Ok(answer) => CallToolResult::structured(answer).into(),
            Err(refusal) => refusal.into_result().into(),
        })
    }
}

type ToolOutcome = Result<Value, ToolRefusal>;

impl BatonMcpServer {
    async fn start_run(
        &self,
        tenant: &str,
        raw: Option<Map<String, Value>>,
        context: &RequestContext<RoleServer>,
    ) -> ToolOutcome {
        let EnvelopeArguments { envelope } = arguments(raw)?;
        // The tool follows the run's frames: a stream in the tenant's budget.
        let _ticket = self
            .state
            .open_stream(tenant, StreamOf::RunNotStartedYet)
            .await
            .map_err(runtime_refusal)?;
        let submitted = self
            .state
            .runs
            .submit_traced(tenant, &envelope, Submitter::default())
            .await
            .map_err(runtime_refusal)?;
        let progress = context.meta.get_progress_token();
        let mut frames = Box::pin(self.state.runs.follow(
            tenant,
            &submitted.run_id,
            0,
            self.state.settings.poll_interval,
        ));
        let mut seen = 0_u32;
        while let Some(frame) = frames.next().await {
            seen += 1;
            if let Some(token) = &progress {
                let _ = context
                    .peer
                    .notify_progress(
                        ProgressNotificationParam::new(token.clone(), f64::from(seen))
                            .with_message(progress_line(&frame)),
                    )
                    .await;
            }
        }
        self.run_outcome(tenant, &submitted.run_id).await
    }

    /// Where a run stands after its stream ended: its output, its failure,
    /// or what it waits for.
    async fn run_outcome(&self, tenant: &str, run_id: &str) -> ToolOutcome {
        let stored = self
            .state
            .runs
            .load(tenant, run_id)
            .await
            .map_err(runtime_refusal)?
            .ok_or_else(|| refused(format!("no run `{run_id}`"), json!({"runId": run_id})))?;
        let run = &stored.state;
        let mut answer = json!({"runId": run.run_id, "threadId": run.thread_id, "status": run.status().as_str()});
        match run.status() {
            RunStatus::Completed => {
                answer["output"] = run.output.clone().unwrap_or(Value::Null);
            }
            status if status.awaits_people() => {
                // Read off the run: no query of the tenant's tasks.
                answer["tasks"] = serde_json::to_value(baton_core::state::tasks::human_tasks(run))
                    .unwrap_or_default();
                answer["pendingRequest"] =
                    serde_json::to_value(run.governance.pending_request()).unwrap_or_default();
            }
            _ => {
                if let Some(failure) = &run.failure {
                    answer["failure"] =
                        json!({"code": failure.code.as_str(), "message": failure.message});
                }
            }
        }
        Ok(answer)
    }

    fn plan(&self, raw: Option<Map<String, Value>>) -> ToolOutcome {
        let EnvelopeArguments { envelope } = arguments(raw)?;
        let preview = self
            .state
            .runs
            .preview(&envelope)
            .map_err(runtime_refusal)?;
        let mut answer = serde_json::to_value(&preview).unwrap_or_default();
        answer["rejected"] = json!(preview.is_rejected());
        Ok(answer)
    }

    async fn list_capabilities(&self, tenant: &str) -> ToolOutcome {
        let listing = self
            .state
            .capabilities
            .list(tenant)
            .await
            .map_err(runtime_refusal)?;
        Ok(serde_json::to_value(crate::bodies::CapabilityList::of(&listing)).unwrap_or_default())
    }

    async fn get_run(&self, tenant: &str, raw: Option<Map<String, Value>>) -> ToolOutcome {
        let RunArguments { run_id } = arguments(raw)?;
        let stored = self
            .state
            .runs
            .load(tenant, &run_id)
            .await
            .map_err(runtime_refusal)?
            .ok_or_else(|| refused(format!("no run `{run_id}`"), json!({"path": "$.runId"})))?;
        let superseded = self
            .state
            .runs
            .superseded_plans(tenant, &run_id)
            .await
            .map_err(runtime_refusal)?;
        Ok(
            serde_json::to_value(crate::snapshot::RunSnapshotResponse::of(
                &stored.state,
                stored.version,
                &superseded,
            ))
            .unwrap_or_default(),
        )
    }

    async fn list_tasks(&self, tenant: &str, raw: Option<Map<String, Value>>) -> ToolOutcome {
        let TaskListArguments { capability_id } = arguments(raw)?;
        let tasks = self
            .state
            .people
            .pending_tasks(tenant, capability_id.as_deref())
            .await
            .map_err(runtime_refusal)?;
        Ok(json!({"tasks": tasks}))
    }

    async fn answer_task(
        &self,
        tenant: &str,
        raw: Option<Map<String, Value>>,
        answerer: &baton_core::state::tasks::Answerer,
    ) -> ToolOutcome {
        let AnswerArguments {
            run_id,
            node_id,
            expected_plan_version,
            output,
        } = arguments(raw)?;
        let outcome = self
            .state
            .people
            .apply_as(
                tenant,
                &run_id,
                PersonInput::Answer {
                    node_id,
                    expected_plan_version,
                    output,
                },
                answerer,
            )
            .await
            .map_err(runtime_refusal)?;
        match outcome {
            PersonInputOutcome::Applied { status, .. } => {
                Ok(json!({"runId": run_id, "status": status.as_str()}))
            }
            PersonInputOutcome::Refused(why) => {
                let api = crate::error::ApiError::from(why);
                Err(refused(
                    format!("the answer was not applied: {}: {}", api.code, api.message),
                    api.details.unwrap_or_else(|| json!({"code": api.code})),
                ))
            }
            PersonInputOutcome::RunNotFound => Err(refused(
                format!("no run `{run_id}`"),
                json!({"path": "$.runId"}),
            )),
        }
    }

    async fn send_chat_message(
        &self,
        tenant: &str,
        raw: Option<Map<String, Value>>,
    ) -> ToolOutcome {
        let ChatArguments {
            message,
            thread_id,
            agent,
        } = arguments(raw)?;
        let request = ChatRequest {
            message,
            thread_id,
            agent,
            context_type: None,
            inputs: Map::new(),
            entity_id: None,
            multitask_strategy: Default::default(),
            user: None,
        };
        let _ticket = self
            .state
            .open_stream(tenant, StreamOf::RunNotStartedYet)
            .await
            .map_err(runtime_refusal)?;
        let submitted = self
            .state
            .runs
            .submit_chat(tenant, &request)
            .await
            .map_err(runtime_refusal)?;
        let mut frames = Box::pin(self.state.runs.follow(
            tenant,
            &submitted.run_id,
            0,
            self.state.settings.poll_interval,
        ));
        while frames.next().await.is_some() {}
        self.run_outcome(tenant, &submitted.run_id).await
    }
}

/// One frame as a progress message: its type, node and message.
fn progress_line(frame: &EventFrame) -> String {
    let mut line = frame.event_type.as_str().to_string();
    if let Some(node_id) = &frame.node_id {
        line.push_str(&format!(" {node_id}"));
    }
    if let Some(message) = &frame.message {
        line.push_str(&format!(": {message}"));
    }
    line
}

/// The Streamable HTTP service mounted at `/mcp` (stateless: every call
/// stands alone, so any instance of the api function answers it). Host
/// validation guards a token-less local server against DNS rebinding; with
/// tokens configured, the token is the guard and any host is served.
pub fn mcp_service(
    state: ApiState,
) -> rmcp::transport::streamable_http_server::StreamableHttpService<
    BatonMcpServer,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
> {
    use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
    let mut config = StreamableHttpServerConfig::default().with_legacy_session_mode(false);
    if !state.authenticator.is_anonymous() {
        config = config.disable_allowed_hosts();
    }
    let server = BatonMcpServer::over_http(state);
    rmcp::transport::streamable_http_server::StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::default(),
        config,
    )
}
