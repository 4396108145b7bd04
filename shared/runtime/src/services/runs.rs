//! Runs as a caller sees them: submit an envelope, cancel, read the stored
//! run, read or follow its frames.

use crate::ports::RunLog;
use crate::ports::RunQueries;
use std::sync::Arc;
use std::time::Duration;

use baton_core::basics::ids::RunKey;
use baton_core::basics::schema::{ValidatorCache, collect_violations, json_path_for_pointer};
use baton_core::catalog::registry::Registry;
use baton_core::contracts::envelope::TaskEnvelope;
use baton_core::engine::{EngineContext, NewRunIdentity, cancel_run, start_run};
use baton_core::state::run::{RunState, RunStatus};
use baton_core::wire::event::EventFrame;
use futures_util::Stream;
use serde_json::Value;

use super::admission::{Admitted, NewRun, RunAdmission, TenantLimitCheck, UnsentFirstSteps};
use super::commit::{CommitResult, CommitTarget, Decided, DecisionCommitter};
use super::{CommonParts, OrchestratorSettings};

mod chat_admission;
pub use chat_admission::ThreadPageRead;
mod chat_messages;
mod evaluations;
mod forks;
mod hook_frames;
use crate::error::RuntimeError;
use crate::ports::{Clock, IdGenerator, StoredRun};
use crate::services::follow::{FollowRequest, follow_run_and_children};
pub use chat_messages::{ChatRequest, MAX_CHAT_MESSAGE_CHARS};
pub use evaluations::{EvaluationView, PanelEntry};
pub use forks::Checkpoint;

/// The window of the per-tenant submission limit
/// (`BATON_TENANT_MAX_SUBMISSIONS_PER_MINUTE`).
pub const SUBMISSION_WINDOW: Duration = Duration::from_secs(60);

/// Who submits a run, beyond its tenant: the W3C `traceparent` the request
/// carried, and the user it named (`X-Baton-User`), to whom the run's
/// usage is attributed.
#[derive(Debug, Clone, Default)]
pub struct Submitter {
    pub traceparent: Option<baton_core::basics::trace_context::TraceParent>,
    pub user: Option<String>,
}

/// What submitting an envelope produced.
#[derive(Debug, Clone, PartialEq)]
pub struct SubmittedRun {
    pub run_id: String,
    pub thread_id: String,
    pub status: RunStatus,
    /// True when an idempotency key matched an earlier submission.
    pub deduplicated: bool,
    /// True when `constraints.resumeRunId` named this existing run: no run
    /// was created, the caller follows that one.
    pub resumed: bool,
}

impl From<Admitted> for SubmittedRun {
    fn from(admitted: Admitted) -> Self {
        match admitted {
            Admitted::Created {
                run_id,
                thread_id,
                status,
            } => SubmittedRun {
                run_id,
                thread_id,
                status,
                deduplicated: false,
                resumed: false,
            },
            Admitted::Deduplicated(existing) => SubmittedRun {
                status: existing.state.status(),
                run_id: existing.state.run_id,
                thread_id: existing.state.thread_id,
                deduplicated: true,
                resumed: false,
            },
        }
    }
}

pub struct RunService {
    registry: Arc<Registry>,
    /// Runs loaded, their frames and entries read and followed.
    run_log: Arc<dyn RunLog>,
    /// The runs list.
    queries: Arc<dyn RunQueries>,
    validators: Arc<ValidatorCache>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    settings: OrchestratorSettings,
    threads: Arc<dyn crate::ports::ThreadStore>,
    committer: DecisionCommitter,
    admission: RunAdmission,
}

impl RunService {
    pub(super) fn new(common: CommonParts, ids: Arc<dyn IdGenerator>) -> Self {
        RunService {
            registry: common.registry,
            run_log: common.store.clone(),
            queries: common.store,
            validators: common.validators,
            clock: common.clock,
            ids,
            settings: common.settings,
            threads: common.threads,
            committer: common.committer,
            admission: common.admission,
        }
    }

    fn engine(&self) -> EngineContext<'_> {
        self.settings
            .engine_context(&self.registry, &self.validators)
    }

    /// Parses and checks an envelope: JSON paths on every error, supplied
    /// facet inputs checked against their facet schemas.
    pub fn parse_envelope(&self, envelope_json: &Value) -> Result<TaskEnvelope, RuntimeError> {
        let size = serde_json::to_vec(envelope_json).map_or(0, |bytes| bytes.len());
        if size > self.settings.max_envelope_bytes {
            return Err(RuntimeError::TooLarge {
                path: "$".into(),
                size,
                limit: self.settings.max_envelope_bytes,
                what: "envelope (BATON_MAX_ENVELOPE_BYTES)".into(),
            });
        }
        let envelope =
            TaskEnvelope::parse_value_cached(envelope_json, &self.validators).map_err(|error| {
                match error {
                    baton_core::CoreError::InvalidEnvelope { path, message } => {
                        RuntimeError::InvalidInput { path, message }
                    }
                    other => RuntimeError::Core(other),
                }
            })?;
        // Preferred models are the catalog's, able to give structured output.
        baton_core::planning::model_choice::check_envelope_models(
            &envelope,
            self.registry.models(),
        )
        .map_err(|error| match error {
            baton_core::CoreError::InvalidEnvelope { path, message } => {
                RuntimeError::InvalidInput { path, message }
            }
            other => RuntimeError::Core(other),
        })?;
        // A policy condition reads only what its trigger provides; a named
        // fallback is a catch-all of the registry.
        baton_core::planning::policy_conditions::check_policy_conditions(&envelope, &self.registry)
            .and_then(|()| {
                baton_core::planning::escalation_targets::check_fallback_capability(
                    &envelope,
                    &self.registry,
                )
            })
            .map_err(|error| match error {
                baton_core::CoreError::InvalidEnvelope { path, message } => {
                    RuntimeError::InvalidInput { path, message }
                }
                other => RuntimeError::Core(other),
            })?;
        self.check_inputs(&envelope.inputs)?;
        Ok(envelope)
    }

    /// Each input that names a registry facet must match its schema (an
    /// error names the path under `$.inputs`).
    pub(crate) fn check_inputs(
        &self,
        inputs: &serde_json::Map<String, Value>,
    ) -> Result<(), RuntimeError> {
        for (key, value) in inputs {
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
        Ok(())
    }

    /// Creates a run for `tenant_id` and queues its planning step. Nothing
    /// is persisted for an invalid envelope.
    pub async fn submit(
        &self,
        tenant_id: &str,
        envelope_json: &Value,
    ) -> Result<SubmittedRun, RuntimeError> {
        self.submit_traced(tenant_id, envelope_json, Submitter::default())
            .await
    }

    /// [`Self::submit`], the run's trace under the `submitter`'s
    /// `traceparent` when there is one, its usage attributed to the user it
    /// names.
    pub async fn submit_traced(
        &self,
        tenant_id: &str,
        envelope_json: &Value,
        submitter: Submitter,
    ) -> Result<SubmittedRun, RuntimeError> {
        let Submitter {
            traceparent: caller,
            user,
        } = submitter;
        let mut envelope = self.parse_envelope(envelope_json)?;
        // Legacy policy keys become canonical policies and constraints,
        // each said in a warning.
        let rewrites =
            baton_core::contracts::legacy_policies::normalize_legacy_policies(&mut envelope)
                .map_err(|error| match error {
                    baton_core::CoreError::InvalidEnvelope { path, message } => {
                        RuntimeError::InvalidInput { path, message }
                    }
                    other => RuntimeError::Core(other),
                })?;
        if let Some(resumed) = &envelope.constraints.resume_run_id {
            // Rehydrates the tenant's run: its current state, never a new run.
            let existing = self
                .run_log
                .load_run(RunKey::new(tenant_id, resumed))
                .await?
                .ok_or_else(|| RuntimeError::RunNotFound {
                    path: "$.constraints.resumeRunId".into(),
                    run_id: resumed.clone(),
                })?;
            return Ok(SubmittedRun {
                run_id: resumed.clone(),
                status: existing.state.status(),
                thread_id: existing.state.thread_id,
                deduplicated: false,
                resumed: true,
            });
        }
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
            run_id,
            trace: Some(crate::observe::run_traces::new_run_trace(caller)),
            submitted_by: user,
        };
        let idempotency_key = envelope.idempotency_key.clone();
        let now = self.clock.now();
        let advisory = envelope.advisory_notes();
        let mut decision = start_run(identity, envelope, now, self.settings.max_node_attempts);
        decision
            .events
            .extend(baton_core::engine::legacy_policy_warnings(&rewrites, now));
        decision
            .events
            .extend(baton_core::engine::advisory_field_warnings(&advisory, now));
        let admitted = self
            .admission
            .admit(NewRun {
                decision,
                idempotency_key: idempotency_key.as_deref(),
                limits: TenantLimitCheck::CheckNow,
                unsent: UnsentFirstSteps::LeftToTheSweeper,
            })
            .await?;
        Ok(SubmittedRun::from(admitted))
    }

    /// The plan a run of `envelope_json` would start with, judged, and
    /// where each node would escalate, without a run: refused as a
    /// submission would be (an invalid envelope, an unknown model, an
    /// unreadable policy); nothing is stored and no model is called.
    pub fn preview(
        &self,
        envelope_json: &Value,
    ) -> Result<baton_core::planning::preview::PlanPreview, RuntimeError> {
        let mut envelope = self.parse_envelope(envelope_json)?;
        baton_core::contracts::legacy_policies::normalize_legacy_policies(&mut envelope).map_err(
            |error| match error {
                baton_core::CoreError::InvalidEnvelope { path, message } => {
                    RuntimeError::InvalidInput { path, message }
                }
                other => RuntimeError::Core(other),
            },
        )?;
        Ok(baton_core::planning::preview::preview_plan(
            &envelope,
            &self.registry,
            &self.validators,
        ))
    }

    /// The plan versions newer ones replaced, oldest first (the current
    /// one is the run state's).
    pub async fn superseded_plans(
        &self,
        tenant_id: &str,
        run_id: &str,
    ) -> Result<Vec<baton_core::planning::plan::PlanGraph>, RuntimeError> {
        let entries = self
            .run_log
            .read_entries(
                RunKey::new(tenant_id, run_id),
                baton_core::records::entries::PLAN_VERSION_PREFIX,
            )
            .await?;
        Ok(entries
            .into_iter()
            .filter_map(|entry| match entry.body {
                baton_core::records::entries::EntryBody::PlanVersion(plan) => {
                    serde_json::from_value(*plan).ok()
                }
                _ => None,
            })
            .collect())
    }

    /// The stored run of `tenant_id` (None for another tenant's run).
    pub async fn load(
        &self,
        tenant_id: &str,
        run_id: &str,
    ) -> Result<Option<StoredRun>, RuntimeError> {
        Ok(self
            .run_log
            .load_run(RunKey::new(tenant_id, run_id))
            .await?)
    }

    /// One page of the tenant's runs, newest first.
    pub async fn list(
        &self,
        tenant_id: &str,
        query: &baton_core::state::listing::RunListQuery,
    ) -> Result<baton_core::state::listing::RunListPage, RuntimeError> {
        Ok(self.queries.list_runs(tenant_id, query).await?)
    }

    /// Cancels a run that has not ended; pending steps become stale, its
    /// outbox (a parent's `ChildRunEnded`, a `callbackUrl` notification) is
    /// sent at once, and the child runs its agents wait for are cancelled
    /// with it. Returns the run's status afterwards, or None when there is
    /// no such run.
    pub async fn cancel(
        &self,
        tenant_id: &str,
        run_id: &str,
        reason: &str,
    ) -> Result<Option<RunStatus>, RuntimeError> {
        let mut cancelled = vec![(run_id.to_string(), reason.to_string())];
        let mut first_status = None;
        // Depth first over the tree of children; each run is one write.
        while let Some((run_id, reason)) = cancelled.pop() {
            let status = self.cancel_one(tenant_id, &run_id, &reason).await;
            let (status, children) = match status {
                Ok(found) => found,
                // A child that cannot be cancelled now still ends: its
                // parent's end makes its own steps report to nobody, and
                // the caller is told about the parent.
                Err(error) if first_status.is_some() => {
                    tracing::warn!(%error, child_run_id = %run_id, "could not cancel a child run with its parent");
                    continue;
                }
                Err(error) => return Err(error),
            };
            if first_status.is_none() {
                first_status = Some(status);
            }
            let parent_reason = format!("its parent run {run_id} was cancelled: {reason}");
            cancelled.extend(
                children
                    .into_iter()
                    .map(|child| (child, parent_reason.clone())),
            );
        }
        Ok(first_status.flatten())
    }

    /// Cancels one run through the commit protocol: its status afterwards
    /// and the child runs it was waiting for when it was cancelled.
    async fn cancel_one(
        &self,
        tenant_id: &str,
        run_id: &str,
        reason: &str,
    ) -> Result<(Option<RunStatus>, Vec<String>), RuntimeError> {
        let target = CommitTarget {
            tenant_id,
            run_id,
            consumed_message_id: None,
        };
        let mut children = Vec::new();
        let engine = self.engine();
        let decide = |state: RunState| {
            children = state.awaited_child_runs();
            let current = state.status();
            Ok(match cancel_run(state, reason, self.clock.now(), &engine) {
                Some(decision) => Decided::Commit(Box::new(decision)),
                None => Decided::Nothing(current),
            })
        };
        let result = self.committer.commit(target, &engine, None, decide).await?;
        Ok(match result {
            CommitResult::Committed { status, .. } => (Some(status), children),
            CommitResult::RunFailedTooLarge { status, .. } => (Some(status), children),
            // Ended already: its children are cancelled again (a retried
            // cancel still cascades; each child's cancel is idempotent).
            CommitResult::Nothing(status) => (Some(status), children),
            CommitResult::RunNotFound => (None, Vec::new()),
        })
    }

    /// Every stored frame after `after_sequence` (paging through the store).
    pub async fn read_all_events_after(
        &self,
        tenant_id: &str,
        run_id: &str,
        after_sequence: u64,
    ) -> Result<Vec<EventFrame>, RuntimeError> {
        let mut frames = Vec::new();
        let mut cursor = after_sequence;
        loop {
            let page = self
                .run_log
                .read_events(RunKey::new(tenant_id, run_id), cursor, 500)
                .await?;
            let Some(last) = page.last() else {
                return Ok(frames);
            };
            cursor = last.id;
            frames.extend(page);
        }
    }

    /// The run's last frame's sequence (0: none yet), one read of the
    /// number the store keeps, not of the log.
    pub async fn last_event_id(&self, tenant_id: &str, run_id: &str) -> Result<u64, RuntimeError> {
        self.run_log
            .last_sequence(RunKey::new(tenant_id, run_id))
            .await?
            .ok_or_else(|| RuntimeError::RunNotFound {
                path: "$.runId".into(),
                run_id: run_id.to_string(),
            })
    }

    /// The run's frames after `after_sequence`, followed until its stream
    /// ends or it parks (see [`crate::services::follow`]).
    pub fn follow(
        &self,
        tenant_id: &str,
        run_id: &str,
        after_sequence: u64,
        poll_interval: Duration,
    ) -> impl Stream<Item = EventFrame> + Send + 'static {
        follow_run_and_children(
            self.run_log.clone(),
            FollowRequest {
                tenant_id: tenant_id.to_string(),
                run_id: run_id.to_string(),
                after_sequence,
                poll_interval,
            },
        )
    }
}
