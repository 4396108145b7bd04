//! The use cases: submit a run, and perform one durable step (DESIGN.md "A
//! step, durably"): load, skip if stale, claim, act, commit conditionally,
//! send the outbox, mark it sent.

use std::sync::Arc;
use std::time::Duration;

use baton_core::capability::{CapabilityRegistration, CapabilityStatus, RegisteredCapability};
use baton_core::compiler::{ContractDirection, compile_contract};
use baton_core::engine::{
    DEFAULT_MAX_NODE_ATTEMPTS, EngineContext, NewRunIdentity, NodeDispatch, StepInput, decide,
    dispatch_node, is_stale, node_start_events, start_run,
};
use baton_core::envelope::TaskEnvelope;
use baton_core::event::{EventDraft, EventType};
use baton_core::planner::plan_deterministically;
use baton_core::registry::Registry;
use baton_core::run::{RunStatus, StepCommand, StepMessage};
use baton_core::schema::{ValidatorCache, collect_violations};
use serde_json::Value;
use tokio::sync::mpsc;
use tracing::{Instrument, info_span};

use crate::clock::rfc3339_from_millis;
use crate::error::{RuntimeError, StoreError};
use crate::ports::{
    CapabilityDirectory, ClaimOutcome, Clock, CreateOutcome, IdGenerator, LlmProvider, ModelDelta,
    NodeClaim, RunStore, StepQueue, StoredRun,
};

/// Tunables of the step loop.
#[derive(Debug, Clone)]
pub struct OrchestratorSettings {
    pub max_node_attempts: u32,
    /// How long a claimed node attempt is protected from twin deliveries.
    pub node_lease: Duration,
    /// Deltas are flushed to the event log when this many bytes are buffered…
    pub delta_flush_bytes: usize,
    /// …or when this long has passed since the last flush.
    pub delta_flush_interval: Duration,
    /// Bound on reload-and-reapply rounds after version conflicts.
    pub max_commit_rounds: u32,
    /// Which planner drafts plans.
    pub planner: PlannerChoice,
    /// Drafts an LLM planner may have rejected before falling back.
    pub max_planner_attempts: u32,
    /// How long a delivery that found its node claimed by another worker
    /// waits before it looks again (it is usually stale by then).
    pub busy_retry_delay: Duration,
}

impl Default for OrchestratorSettings {
    fn default() -> Self {
        OrchestratorSettings {
            max_node_attempts: DEFAULT_MAX_NODE_ATTEMPTS,
            node_lease: Duration::from_secs(300),
            delta_flush_bytes: 512,
            delta_flush_interval: Duration::from_millis(100),
            max_commit_rounds: 16,
            busy_retry_delay: Duration::from_secs(2),
            planner: PlannerChoice::Deterministic,
            max_planner_attempts: 3,
        }
    }
}

/// Which planner drafts plans (`BATON_PLANNER=deterministic|llm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlannerChoice {
    /// Backward chaining over facet coverage; no model call.
    Deterministic,
    /// The configured model drafts, the validator proves, rejected drafts are
    /// re-prompted with their diagnostics; the deterministic planner is the fallback.
    Llm,
}

/// What submitting an envelope produced.
#[derive(Debug, Clone, PartialEq)]
pub struct SubmittedRun {
    pub run_id: String,
    pub thread_id: String,
    pub status: RunStatus,
    /// True when an idempotency key matched an earlier submission.
    pub deduplicated: bool,
}

/// What one step did, for the worker's acknowledgement decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepOutcome {
    Committed {
        new_version: u64,
    },
    /// Duplicate or late delivery: nothing changed but the outbox re-send.
    Stale,
    /// Another worker holds the node's lease; try again later.
    Busy {
        retry_after: Duration,
    },
    RunNotFound,
}

/// A stored registration and the contracts it compiles to.
pub struct Registered {
    pub record: RegisteredCapability,
    pub input_schema: Arc<Value>,
    pub output_schema: Arc<Value>,
}

/// The capabilities one tenant's planner works with.
pub struct CapabilitySnapshot {
    /// The registry files plus the tenant's active registrations.
    pub registry: Arc<Registry>,
    /// Every registration of the tenant with its status now.
    pub registrations: Vec<(RegisteredCapability, CapabilityStatus)>,
}

/// The orchestrator's collaborators, built once at start-up.
pub struct Orchestrator {
    pub store: Arc<dyn RunStore>,
    pub queue: Arc<dyn StepQueue>,
    pub llm: Arc<dyn LlmProvider>,
    pub clock: Arc<dyn Clock>,
    pub ids: Arc<dyn IdGenerator>,
    /// The registry files: facets and the capabilities every tenant has.
    pub registry: Arc<Registry>,
    /// Capabilities agents register at run time, per tenant.
    pub capability_directory: Arc<dyn CapabilityDirectory>,
    pub validators: Arc<ValidatorCache>,
    pub settings: OrchestratorSettings,
    /// Unique per process (e.g. the Lambda instance); claims are scoped by it.
    pub worker_id: String,
    /// Numbers this process's claims; start it at 0.
    pub claim_counter: std::sync::atomic::AtomicU64,
}

/// `$.inputs.key` plus a JSON pointer rendered as `.field[0]`.
fn json_path_for_pointer(prefix: &str, pointer: &str) -> String {
    let mut path = prefix.to_string();
    for segment in pointer.split('/').skip(1) {
        if !segment.is_empty() && segment.chars().all(|c| c.is_ascii_digit()) {
            path.push_str(&format!("[{segment}]"));
        } else {
            path.push('.');
            path.push_str(&segment.replace("~1", "/").replace("~0", "~"));
        }
    }
    path
}

impl Orchestrator {
    fn now_text(&self) -> String {
        rfc3339_from_millis(self.clock.now_millis())
    }

    fn engine_context(&self) -> EngineContext<'_> {
        self.engine_context_with(&self.registry)
    }

    fn engine_context_with<'a>(&'a self, registry: &'a Registry) -> EngineContext<'a> {
        EngineContext {
            registry,
            validators: &self.validators,
        }
    }

    /// Validates and stores a capability registration (or heartbeat) for
    /// `tenant_id`: the payload parses (JSON paths on errors), its facets
    /// exist in the catalog in the right direction, its merged input and
    /// output schemas compile, and its id is not one of the registry files'.
    /// Returns the stored record and the compiled contracts the capability
    /// will be held to (recompiled from the catalog at each planning step).
    pub async fn register_capability(
        &self,
        tenant_id: &str,
        payload: &Value,
    ) -> Result<Registered, RuntimeError> {
        let registration = CapabilityRegistration::parse_value(payload)
            .map_err(|(path, message)| RuntimeError::InvalidRegistration { path, message })?;
        if registration.prompt_template_file.is_some() {
            return Err(RuntimeError::InvalidRegistration {
                path: "$.promptTemplateFile".into(),
                message:
                    "only registry files may name a prompt file; send the text as `instructions`"
                        .into(),
            });
        }
        if self
            .registry
            .capability(&registration.capability_id)
            .is_some()
        {
            return Err(RuntimeError::RegistrationConflict {
                capability_id: registration.capability_id,
                message: "is defined by the registry files and cannot be replaced by a registration; register under another id (e.g. a scoped one like `writer.fr`)".into(),
            });
        }
        self.registry
            .check_capability(&registration, "registration")
            .map_err(|error| match error {
                baton_core::CoreError::InvalidRegistry { path, message, .. } => {
                    RuntimeError::InvalidRegistration { path, message }
                }
                other => RuntimeError::Core(other),
            })?;
        let mut compiled_contracts = Vec::with_capacity(2);
        for (direction, facets, path) in [
            (
                ContractDirection::Input,
                &registration.input_contract,
                "$.inputContract",
            ),
            (
                ContractDirection::Output,
                &registration.output_contract,
                "$.outputContract",
            ),
        ] {
            let compiled = compile_contract(&self.registry.facets, facets, direction, &|_| None)
                .map_err(|error| RuntimeError::InvalidRegistration {
                    path: path.into(),
                    message: error.to_string(),
                })?;
            self.validators
                .validator_for(&compiled.schema, path)
                .map_err(|error| RuntimeError::InvalidRegistration {
                    path: path.into(),
                    message: format!("the merged schema does not compile: {error}"),
                })?;
            compiled_contracts.push(compiled.schema);
        }
        let output_schema = compiled_contracts.pop().unwrap_or_default();
        let input_schema = compiled_contracts.pop().unwrap_or_default();
        let now = self.clock.now_millis();
        let record = RegisteredCapability {
            registration,
            registered_at_millis: now,
            last_seen_at_millis: now,
        };
        let record = self
            .capability_directory
            .upsert_registration(tenant_id, record)
            .await?;
        Ok(Registered {
            record,
            input_schema,
            output_schema,
        })
    }

    /// What `tenant_id`'s planner sees: the registry files plus the
    /// tenant's active registrations (inactive ones are listed, not used).
    pub async fn capability_snapshot(
        &self,
        tenant_id: &str,
    ) -> Result<CapabilitySnapshot, RuntimeError> {
        let now = self.clock.now_millis();
        let registrations: Vec<(RegisteredCapability, CapabilityStatus)> = self
            .capability_directory
            .list_registrations(tenant_id)
            .await?
            .into_iter()
            .map(|record| {
                let status = record.status_at(now);
                (record, status)
            })
            .collect();
        let active = registrations
            .iter()
            .filter(|(_, status)| *status == CapabilityStatus::Active)
            .map(|(record, _)| &record.registration);
        let registry = if registrations.is_empty() {
            self.registry.clone()
        } else {
            let (snapshot, left_out) = self.registry.with_additional_capabilities(active);
            for (capability_id, error) in left_out {
                tracing::warn!(%capability_id, %error, "a registered capability no longer fits the registry; the planner skips it");
            }
            Arc::new(snapshot)
        };
        Ok(CapabilitySnapshot {
            registry,
            registrations,
        })
    }

    /// Parses and checks an envelope: JSON paths on every error, supplied
    /// facet inputs checked against their facet schemas.
    pub fn parse_envelope(&self, envelope_json: &Value) -> Result<TaskEnvelope, RuntimeError> {
        let envelope = TaskEnvelope::parse_value(envelope_json).map_err(|error| match error {
            baton_core::CoreError::InvalidEnvelope { path, message } => {
                RuntimeError::InvalidInput { path, message }
            }
            other => RuntimeError::Core(other),
        })?;
        for (key, value) in &envelope.inputs {
            let Some(facet) = self.registry.facets.get(key) else {
                continue;
            };
            let prefix = format!("$.inputs.{key}");
            let validator = self.validators.validator_for(&facet.schema, &prefix)?;
            if let Some(violation) = collect_violations(&validator, value).into_iter().next() {
                return Err(RuntimeError::InvalidInput {
                    path: json_path_for_pointer(&prefix, &violation.instance_pointer),
                    message: format!("does not match facet `{key}`: {}", violation.message),
                });
            }
        }
        Ok(envelope)
    }

    /// Creates a run for `tenant_id` and queues its planning step. Nothing
    /// is persisted for an invalid envelope.
    pub async fn submit_run(
        &self,
        tenant_id: &str,
        envelope_json: &Value,
    ) -> Result<SubmittedRun, RuntimeError> {
        let envelope = self.parse_envelope(envelope_json)?;
        let run_id = self.ids.new_id("run");
        let identity = NewRunIdentity {
            thread_id: envelope
                .thread_id
                .clone()
                .unwrap_or_else(|| self.ids.new_id("thread")),
            correlation_id: envelope
                .correlation_id
                .clone()
                .unwrap_or_else(|| self.ids.new_id("corr")),
            tenant_id: tenant_id.to_string(),
            run_id: run_id.clone(),
        };
        let idempotency_key = envelope.idempotency_key.clone();
        let decision = start_run(
            identity,
            envelope,
            &self.now_text(),
            self.settings.max_node_attempts,
        );
        let outcome = self
            .store
            .create_run(
                &decision.state,
                decision.events,
                decision.outbox.clone(),
                idempotency_key.as_deref(),
            )
            .await?;
        match outcome {
            CreateOutcome::AlreadyExists { run_id } => {
                let existing = self
                    .store
                    .load_run(tenant_id, &run_id)
                    .await?
                    .ok_or(StoreError::RunNotFound)?;
                Ok(SubmittedRun {
                    run_id,
                    thread_id: existing.state.thread_id,
                    status: existing.state.status,
                    deduplicated: true,
                })
            }
            CreateOutcome::Created => {
                self.send_outbox(tenant_id, &run_id, &decision.outbox)
                    .await?;
                Ok(SubmittedRun {
                    run_id,
                    thread_id: decision.state.thread_id,
                    status: decision.state.status,
                    deduplicated: false,
                })
            }
        }
    }

    async fn send_outbox(
        &self,
        tenant_id: &str,
        run_id: &str,
        messages: &[StepMessage],
    ) -> Result<(), RuntimeError> {
        if messages.is_empty() {
            return Ok(());
        }
        self.queue.send(messages).await?;
        let ids: Vec<String> = messages
            .iter()
            .map(|message| message.message_id.clone())
            .collect();
        self.store.mark_outbox_sent(tenant_id, run_id, &ids).await?;
        Ok(())
    }

    /// Re-sends outbox entries a crash left unsent (idempotent on the receiver).
    pub async fn resend_pending_outbox(
        &self,
        tenant_id: &str,
        run_id: &str,
    ) -> Result<usize, RuntimeError> {
        let pending = self.store.pending_outbox(tenant_id, run_id).await?;
        self.send_outbox(tenant_id, run_id, &pending).await?;
        Ok(pending.len())
    }

    /// Loads a run of `tenant_id` (None for another tenant's run).
    pub async fn load_run(
        &self,
        tenant_id: &str,
        run_id: &str,
    ) -> Result<Option<StoredRun>, RuntimeError> {
        Ok(self.store.load_run(tenant_id, run_id).await?)
    }

    /// Cancels a run that has not ended; pending steps become stale.
    /// Returns the run's status afterwards, or None when there is no such run.
    pub async fn cancel_run(
        &self,
        tenant_id: &str,
        run_id: &str,
        reason: &str,
    ) -> Result<Option<RunStatus>, RuntimeError> {
        for _ in 0..self.settings.max_commit_rounds {
            let Some(stored) = self.store.load_run(tenant_id, run_id).await? else {
                return Ok(None);
            };
            if stored.state.status.is_terminal() {
                return Ok(Some(stored.state.status));
            }
            let input = StepInput::CancelRequested {
                reason: reason.to_string(),
            };
            let decision = decide(
                stored.state,
                input,
                &self.now_text(),
                &self.engine_context(),
            )?;
            let status = decision.state.status;
            match self
                .store
                .commit_step(
                    tenant_id,
                    run_id,
                    stored.version,
                    decision.state,
                    decision.events,
                    decision.outbox,
                )
                .await
            {
                Ok(_) => return Ok(Some(status)),
                Err(StoreError::VersionConflict { .. }) => continue,
                Err(other) => return Err(other.into()),
            }
        }
        Err(RuntimeError::Store(StoreError::VersionConflict {
            expected: 0,
        }))
    }

    /// Drafts the plan with the configured planner. With the LLM planner,
    /// rejected drafts are streamed (`plan_requested`, `plan_rejected`) and
    /// re-prompted with their diagnostics; when the model is unavailable or
    /// never produces a valid plan, a `warning` says so and the
    /// deterministic planner drafts instead.
    async fn draft_plan(
        &self,
        state: &baton_core::run::RunState,
        registry: &Registry,
    ) -> Result<StepInput, RuntimeError> {
        use baton_core::diagnostics::PlanStatus;
        use baton_core::llm_planner::{plan_from_draft, planner_request};
        use baton_core::validator::{rejected_bundle, validate_plan};
        if self.settings.planner == PlannerChoice::Deterministic {
            return Ok(StepInput::PlanDrafted(plan_deterministically(
                &state.envelope,
                registry,
            )));
        }
        let (tenant_id, run_id) = (state.tenant_id.as_str(), state.run_id.as_str());
        let mut rejected = Vec::new();
        let attempts = self.settings.max_planner_attempts.max(1);
        let mut fallback_reason =
            format!("the planner model produced no valid plan in {attempts} attempts");
        for attempt in 1..=attempts {
            let request = planner_request(&state.envelope, registry, &rejected);
            let (sender, _receiver) = mpsc::unbounded_channel();
            let answer = match self.llm.complete(&request, sender).await {
                Ok(answer) => answer,
                Err(error) => {
                    fallback_reason = format!("the planner model is unavailable ({error})");
                    break;
                }
            };
            let drafted =
                plan_from_draft(&answer.content, &state.envelope, registry, &answer.model);
            let bundle = match &drafted {
                Ok(plan) => validate_plan(plan, &state.envelope, registry, &self.validators),
                Err(diagnostics) => rejected_bundle(diagnostics.clone()),
            };
            if drafted.is_ok() && bundle.status != PlanStatus::Rejected {
                return Ok(StepInput::PlanDraftedOnAttempt { drafted, attempt });
            }
            let now = self.now_text();
            let frames = vec![
                EventDraft::new(EventType::PlanRequested, &now)
                    .message("planning")
                    .payload(serde_json::json!({"attempt": attempt, "planner": "llm"})),
                EventDraft::new(EventType::PlanRejected, &now)
                    .message(format!(
                        "draft {attempt} rejected; re-planning with its diagnostics"
                    ))
                    .payload(serde_json::to_value(&bundle).unwrap_or_default()),
            ];
            self.store.append_events(tenant_id, run_id, frames).await?;
            rejected.push(bundle);
        }
        let warning = EventDraft::new(EventType::Warning, &self.now_text())
            .message(format!(
                "{fallback_reason}; using the deterministic planner"
            ))
            .payload(
                serde_json::json!({"fallback": "deterministic", "rejectedDrafts": rejected.len()}),
            );
        self.store
            .append_events(tenant_id, run_id, vec![warning])
            .await?;
        Ok(StepInput::PlanDraftedOnAttempt {
            drafted: plan_deterministically(&state.envelope, registry),
            attempt: u32::try_from(rejected.len())
                .unwrap_or(u32::MAX)
                .saturating_add(1),
        })
    }

    /// Performs one step message durably.
    pub async fn handle_step(&self, message: &StepMessage) -> Result<StepOutcome, RuntimeError> {
        let node_id = match &message.command {
            StepCommand::ExecuteNode { node_id, .. } => node_id.as_str(),
            StepCommand::Plan => "",
        };
        let span = info_span!("step", run_id = %message.run_id, step_id = %message.message_id, node_id = %node_id);
        self.handle_step_inner(message).instrument(span).await
    }

    async fn handle_step_inner(&self, message: &StepMessage) -> Result<StepOutcome, RuntimeError> {
        let tenant_id = message.tenant_id.as_str();
        let run_id = message.run_id.as_str();
        let Some(stored) = self.store.load_run(tenant_id, run_id).await? else {
            return Ok(StepOutcome::RunNotFound);
        };
        if is_stale(&stored.state, &message.command) {
            self.resend_pending_outbox(tenant_id, run_id).await?;
            return Ok(StepOutcome::Stale);
        }
        let mut held_claim: Option<(String, u32, String)> = None;
        // A plan is drafted and validated against the tenant's capability
        // snapshot; once planned, nodes carry their own compiled contracts.
        let mut planning_registry: Option<Arc<Registry>> = None;
        let input = match &message.command {
            StepCommand::Plan => {
                let snapshot = self.capability_snapshot(tenant_id).await?;
                let input = self.draft_plan(&stored.state, &snapshot.registry).await?;
                planning_registry = Some(snapshot.registry);
                input
            }
            StepCommand::ExecuteNode { node_id, attempt } => {
                match dispatch_node(&stored.state, node_id, &self.engine_context())? {
                    NodeDispatch::InputRejected(violations) => StepInput::NodeInputRejected {
                        node_id: node_id.clone(),
                        attempt: *attempt,
                        violations,
                    },
                    NodeDispatch::Builtin(content) => StepInput::NodeAnswered {
                        node_id: node_id.clone(),
                        attempt: *attempt,
                        content,
                        usage: Default::default(),
                    },
                    NodeDispatch::Human => StepInput::NodeParkedForHuman {
                        node_id: node_id.clone(),
                        attempt: *attempt,
                    },
                    NodeDispatch::Model(request) => {
                        let now_millis = self.clock.now_millis();
                        let lease =
                            u64::try_from(self.settings.node_lease.as_millis()).unwrap_or(u64::MAX);
                        // One claimant per handling, so two deliveries in the
                        // same process are rivals too.
                        let claimant = format!(
                            "{}/{}",
                            self.worker_id,
                            self.claim_counter
                                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                        );
                        let claim = NodeClaim {
                            node_id,
                            attempt: *attempt,
                            worker_id: &claimant,
                            now_millis,
                            lease_expires_at_millis: now_millis.saturating_add(lease),
                        };
                        let start_events = node_start_events(
                            &stored.state,
                            node_id,
                            *attempt,
                            &rfc3339_from_millis(now_millis),
                        )?;
                        match self
                            .store
                            .claim_node(tenant_id, run_id, claim, start_events)
                            .await?
                        {
                            ClaimOutcome::Claimed => {
                                held_claim = Some((node_id.clone(), *attempt, claimant.clone()));
                            }
                            ClaimOutcome::HeldByOther {
                                lease_expires_at_millis,
                            } => {
                                let remaining = Duration::from_millis(
                                    lease_expires_at_millis.saturating_sub(now_millis),
                                );
                                return Ok(StepOutcome::Busy {
                                    retry_after: remaining.min(self.settings.busy_retry_delay),
                                });
                            }
                        }
                        match self
                            .call_model_streaming(tenant_id, run_id, node_id, &request)
                            .await
                        {
                            Ok(answer) => StepInput::NodeAnswered {
                                node_id: node_id.clone(),
                                attempt: *attempt,
                                content: answer.content,
                                usage: answer.usage,
                            },
                            Err(RuntimeError::Llm(error)) => StepInput::NodeInvocationFailed {
                                node_id: node_id.clone(),
                                attempt: *attempt,
                                code: error.code().to_string(),
                                message: error.to_string(),
                            },
                            Err(other) => return Err(other),
                        }
                    }
                }
            }
        };
        let registry = planning_registry.unwrap_or_else(|| self.registry.clone());
        let outcome = self
            .commit_reapplying_on_conflict(message, stored, input, &registry)
            .await;
        if outcome.is_err()
            && let Some((node_id, attempt, claimant)) = &held_claim
            && let Err(error) = self
                .store
                .release_claim(tenant_id, run_id, node_id, *attempt, claimant)
                .await
        {
            tracing::warn!(%error, "could not release the claim after a failed commit; it expires with its lease");
        }
        outcome
    }

    /// Calls the model while a second task batches its deltas into the event log.
    async fn call_model_streaming(
        &self,
        tenant_id: &str,
        run_id: &str,
        node_id: &str,
        request: &baton_core::context::ModelRequest,
    ) -> Result<crate::ports::ModelAnswer, RuntimeError> {
        let (sender, mut receiver) = mpsc::unbounded_channel::<ModelDelta>();
        let call = self.llm.complete(request, sender);
        let drain = async {
            let mut buffer = String::new();
            let mut last_flush = tokio::time::Instant::now();
            let mut flush_error = None;
            while let Some(delta) = receiver.recv().await {
                let text = match delta {
                    ModelDelta::Text(text) => text,
                    ModelDelta::Restarted => {
                        if let Err(error) = self
                            .flush_delta(tenant_id, run_id, node_id, &mut buffer)
                            .await
                            .and(self.note_stream_restart(tenant_id, run_id, node_id).await)
                        {
                            flush_error = Some(error);
                        }
                        last_flush = tokio::time::Instant::now();
                        continue;
                    }
                };
                buffer.push_str(&text);
                if buffer.len() >= self.settings.delta_flush_bytes
                    || last_flush.elapsed() >= self.settings.delta_flush_interval
                {
                    if let Err(error) = self
                        .flush_delta(tenant_id, run_id, node_id, &mut buffer)
                        .await
                    {
                        flush_error = Some(error);
                    }
                    last_flush = tokio::time::Instant::now();
                }
            }
            if let Err(error) = self
                .flush_delta(tenant_id, run_id, node_id, &mut buffer)
                .await
            {
                flush_error = Some(error);
            }
            flush_error
        };
        let (answer, flush_error) = tokio::join!(call, drain);
        if let Some(error) = flush_error {
            tracing::warn!(%error, "could not append streamed deltas; the answer is still committed");
        }
        Ok(answer?)
    }

    /// A `warning` frame telling stream readers to drop the node's deltas so
    /// far: the provider restarted the answer after its stream broke.
    async fn note_stream_restart(
        &self,
        tenant_id: &str,
        run_id: &str,
        node_id: &str,
    ) -> Result<(), RuntimeError> {
        let draft = EventDraft::new(EventType::Warning, &self.now_text())
            .node(node_id)
            .message("the model's stream broke and restarted: discard this node's deltas streamed since its node_start")
            .payload(serde_json::json!({"code": "stream_restarted"}));
        self.store
            .append_events(tenant_id, run_id, vec![draft])
            .await?;
        Ok(())
    }

    async fn flush_delta(
        &self,
        tenant_id: &str,
        run_id: &str,
        node_id: &str,
        buffer: &mut String,
    ) -> Result<(), RuntimeError> {
        if buffer.is_empty() {
            return Ok(());
        }
        let text = std::mem::take(buffer);
        let draft = EventDraft::new(EventType::Delta, &self.now_text())
            .node(node_id)
            .message(text);
        self.store
            .append_events(tenant_id, run_id, vec![draft])
            .await?;
        Ok(())
    }

    /// Decides and commits; on a version conflict reloads and re-applies the
    /// same input (the capability is never called again for it).
    async fn commit_reapplying_on_conflict(
        &self,
        message: &StepMessage,
        stored: StoredRun,
        input: StepInput,
        registry: &Registry,
    ) -> Result<StepOutcome, RuntimeError> {
        let tenant_id = message.tenant_id.as_str();
        let run_id = message.run_id.as_str();
        let StoredRun {
            mut state,
            mut version,
        } = stored;
        for _ in 0..self.settings.max_commit_rounds {
            let decision = decide(
                state,
                input.clone(),
                &self.now_text(),
                &self.engine_context_with(registry),
            )?;
            match self
                .store
                .commit_step(
                    tenant_id,
                    run_id,
                    version,
                    decision.state,
                    decision.events,
                    decision.outbox.clone(),
                )
                .await
            {
                Ok(new_version) => {
                    self.send_outbox(tenant_id, run_id, &decision.outbox)
                        .await?;
                    return Ok(StepOutcome::Committed { new_version });
                }
                Err(StoreError::VersionConflict { .. }) => {
                    let Some(reloaded) = self.store.load_run(tenant_id, run_id).await? else {
                        return Ok(StepOutcome::RunNotFound);
                    };
                    if is_stale(&reloaded.state, &message.command) {
                        return Ok(StepOutcome::Stale);
                    }
                    state = reloaded.state;
                    version = reloaded.version;
                }
                Err(StoreError::TooLarge(reason)) => {
                    return self.fail_run_too_large(tenant_id, run_id, &reason).await;
                }
                Err(other) => return Err(other.into()),
            }
        }
        Err(RuntimeError::Store(StoreError::VersionConflict {
            expected: version,
        }))
    }

    /// The step's result made the run state too large to store: the run
    /// fails from its last stored state (which fits) with a clear error,
    /// instead of the step failing for ever.
    async fn fail_run_too_large(
        &self,
        tenant_id: &str,
        run_id: &str,
        reason: &str,
    ) -> Result<StepOutcome, RuntimeError> {
        let Some(stored) = self.store.load_run(tenant_id, run_id).await? else {
            return Ok(StepOutcome::RunNotFound);
        };
        let decision = decide(
            stored.state,
            StepInput::RunFailed {
                code: "state_too_large".into(),
                message: format!("the run can no longer be stored: {reason}"),
            },
            &self.now_text(),
            &self.engine_context(),
        )?;
        let new_version = self
            .store
            .commit_step(
                tenant_id,
                run_id,
                stored.version,
                decision.state,
                decision.events,
                decision.outbox,
            )
            .await?;
        Ok(StepOutcome::Committed { new_version })
    }
}

#[cfg(test)]
mod tests {
    use super::json_path_for_pointer;

    #[test]
    fn pointers_render_as_json_paths() {
        assert_eq!(
            json_path_for_pointer("$.inputs.tone", "/0"),
            "$.inputs.tone[0]"
        );
        assert_eq!(
            json_path_for_pointer("$.inputs.ctx", "/data/a~1b"),
            "$.inputs.ctx.data.a/b"
        );
        assert_eq!(json_path_for_pointer("$.inputs.ctx", ""), "$.inputs.ctx");
    }
}
