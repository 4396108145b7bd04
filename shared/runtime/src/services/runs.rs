//! Runs as a caller sees them: submit an envelope, cancel, read the stored
//! run, read or follow its frames.

use std::sync::Arc;
use std::time::Duration;

use baton_core::engine::{EngineContext, NewRunIdentity, cancel_run, start_run};
use baton_core::envelope::TaskEnvelope;
use baton_core::event::EventFrame;
use baton_core::registry::Registry;
use baton_core::run::{RunState, RunStatus};
use baton_core::schema::{ValidatorCache, collect_violations, json_path_for_pointer};
use futures_util::Stream;
use serde_json::Value;

use super::commit::{CommitResult, CommitTarget, Decided, DecisionCommitter};
use super::{CommonParts, OrchestratorSettings, OutboxRelay};

mod chat_admission;
mod chat_messages;
mod evaluations;
mod forks;
mod hook_frames;
use crate::error::{RuntimeError, StoreError};
use crate::follow::{FollowRequest, follow_run_and_children};
use crate::ports::{Clock, CreateOutcome, IdGenerator, RunStore, StoredRun};
pub use chat_messages::{ChatRequest, MAX_CHAT_MESSAGE_CHARS};
pub use evaluations::{EvaluationView, PanelEntry};
pub use forks::Checkpoint;

/// The window of the per-tenant submission limit
/// (`BATON_TENANT_MAX_SUBMISSIONS_PER_MINUTE`).
pub const SUBMISSION_WINDOW: Duration = Duration::from_secs(60);

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

pub struct RunService {
    registry: Arc<Registry>,
    store: Arc<dyn RunStore>,
    relay: OutboxRelay,
    validators: Arc<ValidatorCache>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    settings: OrchestratorSettings,
    threads: Arc<dyn crate::ports::ThreadStore>,
    committer: DecisionCommitter,
}

impl RunService {
    pub(super) fn new(common: CommonParts, ids: Arc<dyn IdGenerator>) -> Self {
        RunService {
            registry: common.registry,
            store: common.store,
            relay: common.relay,
            validators: common.validators,
            clock: common.clock,
            ids,
            settings: common.settings,
            threads: common.threads,
            committer: common.committer,
        }
    }

    fn engine(&self) -> EngineContext<'_> {
        self.settings
            .engine_context(&self.registry, &self.validators)
    }

    /// Refuses a new run when the tenant already has its limit of runs at
    /// work (queued or running; parked and ended runs do not count), or has
    /// submitted its limit of runs in the last [`SUBMISSION_WINDOW`] (runs
    /// an agent started count as their parent's work, not as submissions).
    /// Both are counted from the tenant's run listing, newest first, so
    /// every process sharing the store sees the same figures; the pages stop
    /// as soon as a limit is reached or, with no live-run limit, at the first
    /// run older than the window.
    async fn check_tenant_limits(&self, tenant_id: &str) -> Result<(), RuntimeError> {
        let live_limit = self.settings.tenant_limits.max_live_runs_of(tenant_id);
        let rate_limit = self
            .settings
            .tenant_limits
            .max_submissions_per_minute_of(tenant_id);
        if live_limit.is_none() && rate_limit.is_none() {
            return Ok(());
        }
        let now = self.clock.now();
        let window_start = now.minus(SUBMISSION_WINDOW);
        let mut live = 0;
        let mut submitted_in_window = 0;
        let mut window_passed = false;
        let mut cursor = None;
        loop {
            let page = self
                .store
                .list_runs(
                    tenant_id,
                    &baton_core::listing::RunListQuery {
                        status: None,
                        limit: baton_core::listing::MAX_RUNS_PER_PAGE,
                        cursor,
                        forked_from: None,
                    },
                )
                .await?;
            for run in &page.runs {
                if matches!(run.status, RunStatus::Queued | RunStatus::Running) {
                    live += 1;
                }
                let created = baton_core::instant::Instant::parse_rfc3339(&run.created_at);
                if created.is_none_or(|created| created < window_start) {
                    window_passed = true;
                } else if run.parent_run_id.is_none() && !window_passed {
                    submitted_in_window += 1;
                    if let Some(limit) = rate_limit
                        && submitted_in_window >= limit
                    {
                        // The oldest counted submission leaves the window
                        // first: the caller may retry then.
                        let leaves = created.map_or(SUBMISSION_WINDOW, |created| {
                            created.plus(SUBMISSION_WINDOW).since(now)
                        });
                        return Err(RuntimeError::TenantRateLimit {
                            tenant_id: tenant_id.to_string(),
                            submitted: submitted_in_window,
                            limit,
                            retry_after_seconds: leaves.as_secs_f64().ceil().max(1.0) as u64,
                        });
                    }
                }
            }
            if let Some(limit) = live_limit
                && live >= limit
            {
                return Err(RuntimeError::TenantLimit {
                    tenant_id: tenant_id.to_string(),
                    live,
                    limit,
                });
            }
            if window_passed && live_limit.is_none() {
                return Ok(());
            }
            match page
                .next_cursor
                .as_deref()
                .and_then(baton_core::listing::ListCursor::parse)
            {
                Some(next) => cursor = Some(next),
                None => return Ok(()),
            }
        }
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
        baton_core::model_choice::check_envelope_models(&envelope, self.registry.models())
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
        self.submit_traced(tenant_id, envelope_json, None).await
    }

    /// [`Self::submit`], the run's trace under `caller` (the W3C
    /// `traceparent` the request carried) when there is one.
    pub async fn submit_traced(
        &self,
        tenant_id: &str,
        envelope_json: &Value,
        caller: Option<baton_core::trace_context::TraceParent>,
    ) -> Result<SubmittedRun, RuntimeError> {
        let mut envelope = self.parse_envelope(envelope_json)?;
        // Legacy policy keys become canonical policies and constraints,
        // each said in a warning.
        let rewrites = baton_core::legacy_policies::normalize_legacy_policies(&mut envelope)
            .map_err(|error| match error {
                baton_core::CoreError::InvalidEnvelope { path, message } => {
                    RuntimeError::InvalidInput { path, message }
                }
                other => RuntimeError::Core(other),
            })?;
        if let Some(resumed) = &envelope.constraints.resume_run_id {
            // Rehydrates the tenant's run: its current state, never a new run.
            let existing = self
                .store
                .load_run(tenant_id, resumed)
                .await?
                .ok_or_else(|| RuntimeError::RunNotFound {
                    path: "$.constraints.resumeRunId".into(),
                    run_id: resumed.clone(),
                })?;
            return Ok(SubmittedRun {
                run_id: resumed.clone(),
                thread_id: existing.state.thread_id,
                status: existing.state.status,
                deduplicated: false,
                resumed: true,
            });
        }
        self.check_tenant_limits(tenant_id).await?;
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
            trace: Some(crate::run_traces::new_run_trace(caller)),
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
        crate::run_traces::stamp_write(
            decision.state.trace.as_ref(),
            &mut decision.events,
            &mut decision.outbox,
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
                // The first submission's send may have been lost (the
                // caller retried because it failed): its pending steps go
                // out again (a duplicate of a step that ran is stale).
                if let Err(error) = self.relay.resend_pending(tenant_id, &run_id).await {
                    tracing::warn!(%error, %run_id, "a deduplicated submission could not re-send its run's pending steps; the sweeper will");
                }
                Ok(SubmittedRun {
                    run_id,
                    thread_id: existing.state.thread_id,
                    status: existing.state.status,
                    deduplicated: true,
                    resumed: false,
                })
            }
            CreateOutcome::Created => {
                crate::crash_points::reached(crate::crash_points::CrashPoint::AfterAdmitBeforeSend);
                // The run is stored: a send that fails now is the sweeper's
                // to repeat (its entry stays pending), and the caller is
                // told the run was accepted, so it does not submit again.
                if let Err(error) = self.relay.send(&decision.outbox).await {
                    tracing::warn!(%error, %run_id, "a new run's first step was not sent; the sweeper re-sends it");
                }
                Ok(SubmittedRun {
                    run_id,
                    thread_id: decision.state.thread_id,
                    status: decision.state.status,
                    deduplicated: false,
                    resumed: false,
                })
            }
        }
    }

    /// The plan versions newer ones replaced, oldest first (the current
    /// one is the run state's).
    pub async fn superseded_plans(
        &self,
        tenant_id: &str,
        run_id: &str,
    ) -> Result<Vec<baton_core::plan::PlanGraph>, RuntimeError> {
        let entries = self
            .store
            .read_entries(tenant_id, run_id, baton_core::entries::PLAN_VERSION_PREFIX)
            .await?;
        Ok(entries
            .into_iter()
            .filter_map(|entry| match entry.body {
                baton_core::entries::EntryBody::PlanVersion(plan) => {
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
        Ok(self.store.load_run(tenant_id, run_id).await?)
    }

    /// One page of the tenant's runs, newest first.
    pub async fn list(
        &self,
        tenant_id: &str,
        query: &baton_core::listing::RunListQuery,
    ) -> Result<baton_core::listing::RunListPage, RuntimeError> {
        Ok(self.store.list_runs(tenant_id, query).await?)
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
            let current = state.status;
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
                .store
                .read_events(tenant_id, run_id, cursor, 500)
                .await?;
            let Some(last) = page.last() else {
                return Ok(frames);
            };
            cursor = last.id;
            frames.extend(page);
        }
    }

    /// The run's frames after `after_sequence`, followed until its stream
    /// ends or it parks (see [`crate::follow`]).
    pub fn follow(
        &self,
        tenant_id: &str,
        run_id: &str,
        after_sequence: u64,
        poll_interval: Duration,
    ) -> impl Stream<Item = EventFrame> + Send + 'static {
        follow_run_and_children(
            self.store.clone(),
            FollowRequest {
                tenant_id: tenant_id.to_string(),
                run_id: run_id.to_string(),
                after_sequence,
                poll_interval,
            },
        )
    }
}
