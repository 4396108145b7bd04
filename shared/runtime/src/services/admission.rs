//! Run admission: the one way a run comes to exist. Submit, fork, chat
//! (a queued chat message included: it is created `queued` and started by
//! its thread's lane release) and a child run an agent session starts all
//! call [`RunAdmission::admit`], which
//!
//! 1. checks the tenant's limits (or takes the proof that they were
//!    checked, or that the run is its admitted parent's work),
//! 2. stamps the new run's frames and outbox with its trace,
//! 3. creates it in one write with its first frames and outbox, deduped
//!    by idempotency key,
//! 4. sends its outbox; for a deduplicated run, re-sends its pending
//!    steps (the first admission's send may be the one that was lost).
//!
//! Invariants:
//! - A run exists with its whole first outbox or not at all; a send that
//!   fails after the write is the sweeper's to repeat (the entry stays
//!   pending), so the caller is told the run was accepted.
//! - An idempotency key names one run: admitting it again returns that run
//!   and re-drives it, never a second run.
//! - Every run a tenant starts on its own counts against its limits; a
//!   child run is its parent's work (the parent was admitted).

use std::sync::Arc;

use baton_core::basics::ids::RunKey;
use baton_core::engine::Decision;
use baton_core::state::run::RunStatus;

use super::{OutboxRelay, SUBMISSION_WINDOW, TenantLimits};
use crate::error::{RuntimeError, StoreError};
use crate::ports::{Clock, CreateOutcome, RunLog, RunQueries, StoredRun};

/// Proof that a tenant's limits let a new run in, made only by
/// [`RunAdmission::check_tenant_limits`] (a chat message checks them before
/// it takes its place on the thread's lane).
#[derive(Debug)]
pub(crate) struct TenantLimitsPassed(());

/// How the tenant's limits hold for a new run.
#[derive(Debug)]
pub(crate) enum TenantLimitCheck {
    /// Check them now.
    CheckNow,
    /// Checked already, before anything else was written for the run.
    Passed(TenantLimitsPassed),
    /// A child run an admitted parent's session starts: the parent's work.
    ChildOfAdmittedParent,
}

/// What a send that fails after the run was created becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnsentFirstSteps {
    /// Logged: the entries stay pending and the sweeper re-sends them (a
    /// caller told the run was accepted does not submit it again).
    LeftToTheSweeper,
    /// The caller's error (retryable): a step that starts a child run
    /// fails, and its redelivery finds the child created and re-sends its
    /// pending steps at once, sooner than a sweep.
    FailTheCaller,
}

/// A run to admit: its first decision (state, frames, outbox).
pub(crate) struct NewRun<'a> {
    pub decision: Decision,
    pub idempotency_key: Option<&'a str>,
    pub limits: TenantLimitCheck,
    pub unsent: UnsentFirstSteps,
}

/// What admitting a run produced.
#[derive(Debug)]
pub(crate) enum Admitted {
    /// Created now: its id, thread and status.
    Created {
        run_id: String,
        thread_id: String,
        status: RunStatus,
    },
    /// The idempotency key named an earlier run: that run, as stored.
    Deduplicated(Box<StoredRun>),
}

/// The ports admission writes through.
#[derive(Clone)]
pub(crate) struct RunAdmission {
    /// Stored frames, handed on live once the run is created.
    pub(crate) lifecycle: super::lifecycle_bus::LifecycleBus,
    /// Runs created (deduplicated by idempotency key) and loaded.
    pub(crate) run_log: Arc<dyn RunLog>,
    /// The tenant's live runs counted against its limit.
    pub(crate) queries: Arc<dyn RunQueries>,
    pub(crate) relay: OutboxRelay,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) tenant_limits: TenantLimits,
}

impl RunAdmission {
    /// Admits `new_run` (see the module's steps).
    pub(crate) async fn admit(&self, new_run: NewRun<'_>) -> Result<Admitted, RuntimeError> {
        let NewRun {
            mut decision,
            idempotency_key,
            limits,
            unsent,
        } = new_run;
        let tenant_id = decision.state.tenant_id.clone();
        // Checked now, the create is conditional on the live-run limit too;
        // a run checked before (a chat message) or a child run counts in the
        // counter without being refused by it.
        let live_run_limit = match limits {
            TenantLimitCheck::CheckNow => {
                // The live-run limit is the create's own condition: no read
                // of the counter before it.
                self.check_submission_rate(&tenant_id).await?;
                self.tenant_limits
                    .max_live_runs_of(&tenant_id)
                    .map(|limit| limit as u64)
            }
            TenantLimitCheck::Passed(_) | TenantLimitCheck::ChildOfAdmittedParent => None,
        };
        crate::observe::run_traces::stamp_write(
            decision.state.trace.as_ref(),
            &mut decision.events,
            &mut decision.outbox,
        );
        let published = self.lifecycle.is_heard().then(|| {
            (
                decision.state.run_id.clone(),
                decision.state.correlation_id.clone(),
                decision.events.clone(),
            )
        });
        let outcome = self
            .run_log
            .create_run_within(
                &decision.state,
                decision.events,
                decision.outbox.clone(),
                idempotency_key,
                live_run_limit,
            )
            .await?;
        if outcome == CreateOutcome::Created
            && let Some((run_id, correlation_id, frames)) = published
        {
            self.lifecycle
                .publish(&tenant_id, &run_id, &correlation_id, frames);
        }
        match outcome {
            CreateOutcome::LiveRunLimitReached { live_runs } => Err(RuntimeError::TenantLimit {
                tenant_id: tenant_id.clone(),
                live: usize::try_from(live_runs).unwrap_or(usize::MAX),
                limit: self
                    .tenant_limits
                    .max_live_runs_of(&tenant_id)
                    .unwrap_or_default(),
            }),
            CreateOutcome::AlreadyExists { run_id } => {
                let existing = self
                    .run_log
                    .load_run(RunKey::new(&tenant_id, &run_id))
                    .await?
                    .ok_or(StoreError::RunNotFound)?;
                // The first admission's send may have been lost (the caller
                // retried because it failed): its pending steps go out
                // again (a duplicate of a step that ran is stale).
                if let Err(error) = self.relay.resend_pending(&tenant_id, &run_id).await {
                    tracing::warn!(%error, %run_id, "a deduplicated run could not re-send its pending steps; the sweeper will");
                }
                Ok(Admitted::Deduplicated(Box::new(existing)))
            }
            CreateOutcome::Created => {
                crate::crash_points::reached(crate::crash_points::CrashPoint::AfterAdmitBeforeSend);
                let status = decision.state.status();
                let run_id = decision.state.run_id;
                if let Err(error) = self.relay.send(&decision.outbox).await {
                    if unsent == UnsentFirstSteps::FailTheCaller {
                        return Err(error);
                    }
                    tracing::warn!(%error, %run_id, "a new run's first steps were not sent; the sweeper re-sends them");
                }
                Ok(Admitted::Created {
                    run_id,
                    status,
                    thread_id: decision.state.thread_id,
                })
            }
        }
    }

    /// Refuses a new run when the tenant already has its limit of runs at
    /// work (queued or running; parked and ended runs do not count), or has
    /// submitted its limit of runs in the last [`SUBMISSION_WINDOW`] (runs
    /// an agent started count as their parent's work, not as submissions).
    ///
    /// Live runs are one read of the counter the commits keep
    /// (`RunQueries::live_runs`); submissions are counted from the tenant's
    /// run listing, newest first, and the pages stop at the first run older
    /// than the window. Neither grows with the tenant's history: every
    /// process sharing the store sees the same figures, and the write that
    /// creates the run is conditional on the live-run limit again
    /// ([`RunAdmission::admit`]), so two racing submissions cannot both pass it.
    pub(crate) async fn check_tenant_limits(
        &self,
        tenant_id: &str,
    ) -> Result<TenantLimitsPassed, RuntimeError> {
        if let Some(limit) = self.tenant_limits.max_live_runs_of(tenant_id) {
            let live = self.queries.live_runs(tenant_id).await?;
            if live >= limit as u64 {
                return Err(RuntimeError::TenantLimit {
                    tenant_id: tenant_id.to_string(),
                    live: usize::try_from(live).unwrap_or(usize::MAX),
                    limit,
                });
            }
        }
        self.check_submission_rate(tenant_id).await
    }

    /// Refuses a new run when the tenant submitted its limit of runs in
    /// the last [`SUBMISSION_WINDOW`] (see `check_tenant_limits`).
    async fn check_submission_rate(
        &self,
        tenant_id: &str,
    ) -> Result<TenantLimitsPassed, RuntimeError> {
        let rate_limit = self.tenant_limits.max_submissions_per_minute_of(tenant_id);
        let Some(rate_limit) = rate_limit else {
            return Ok(TenantLimitsPassed(()));
        };
        let now = self.clock.now();
        let window_start = now.minus(SUBMISSION_WINDOW);
        let mut submitted_in_window = 0;
        let mut cursor = None;
        loop {
            let page = self
                .queries
                .list_runs(
                    tenant_id,
                    &baton_core::state::listing::RunListQuery {
                        status: None,
                        limit: baton_core::state::listing::MAX_RUNS_PER_PAGE,
                        cursor,
                        forked_from: None,
                    },
                )
                .await?;
            for run in &page.runs {
                let created = baton_core::basics::instant::Instant::parse_rfc3339(&run.created_at);
                if created.is_none_or(|created| created < window_start) {
                    return Ok(TenantLimitsPassed(()));
                }
                if run.parent_run_id.is_some() {
                    continue;
                }
                submitted_in_window += 1;
                if submitted_in_window >= rate_limit {
                    // The oldest counted submission leaves the window
                    // first: the caller may retry then.
                    let leaves = created.map_or(SUBMISSION_WINDOW, |created| {
                        created.plus(SUBMISSION_WINDOW).since(now)
                    });
                    return Err(RuntimeError::TenantRateLimit {
                        tenant_id: tenant_id.to_string(),
                        submitted: submitted_in_window,
                        limit: rate_limit,
                        retry_after_seconds: leaves.as_secs_f64().ceil().max(1.0) as u64,
                    });
                }
            }
            match page
                .next_cursor
                .as_deref()
                .and_then(baton_core::state::listing::ListCursor::parse)
            {
                Some(next) => cursor = Some(next),
                None => return Ok(TenantLimitsPassed(())),
            }
        }
    }
}
