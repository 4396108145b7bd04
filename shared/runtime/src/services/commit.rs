//! The one commit protocol, written once for every writer of a run (a step,
//! a person's input, a cancel): load → decide → publish transcripts and
//! record thread exchanges → commit conditionally on the version read →
//! send the outbox; on a version conflict, reload and decide again; a
//! decision too large to store fails the run from its last stored state.
//!
//! Invariants:
//! - Nothing a decision asks for is dropped: its transcripts are published
//!   and its exchanges recorded before the commit (a failure retries the
//!   whole write; both are idempotent), its outbox is sent after it.
//! - A write that lost a race decides again on the state that won; it
//!   never commits a decision made on a state that is no longer current.
//! - The rounds are bounded (`max_commit_rounds`): a run rewritten without
//!   pause by others makes this writer fail retryably, not spin.

use std::sync::Arc;

use baton_core::basics::codes::FailureCode;
use baton_core::basics::ids::RunKey;
use baton_core::basics::ids::ThreadKey;
use baton_core::engine::{Decision, EngineContext, fail_run};
use baton_core::state::run::{RunState, RunStatus};

use super::OutboxRelay;
use crate::error::{RuntimeError, StoreError};
use crate::ports::{Clock, RunLog, StepCommit, ThreadStore, TranscriptPublisher};

/// What a writer made of the state it was handed.
pub(crate) enum Decided<Nothing> {
    /// Commit this decision.
    Commit(Box<Decision>),
    /// Nothing to write, and why (stale step, refused input, ended run).
    Nothing(Nothing),
}

/// Where a write ended.
#[derive(Debug)]
pub(crate) enum CommitResult<Nothing> {
    /// Committed and its outbox sent: the run's version and status after it.
    Committed {
        new_version: u64,
        status: RunStatus,
    },
    /// The writer decided there was nothing to write.
    Nothing(Nothing),
    RunNotFound,
    /// The decision would have made the run too large to store: the run
    /// failed (`state_too_large`) from its last stored state instead.
    /// `new_version` is None when that state had ended meanwhile; `status`
    /// is the run's status afterwards.
    RunFailedTooLarge {
        new_version: Option<u64>,
        status: RunStatus,
    },
}

/// The run written and the step message the write consumes, if any.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CommitTarget<'a> {
    pub tenant_id: &'a str,
    pub run_id: &'a str,
    pub consumed_message_id: Option<&'a str>,
}

/// The ports the protocol writes through.
#[derive(Clone)]
pub(crate) struct DecisionCommitter {
    /// Stored frames, handed on live once the commit succeeded.
    pub(crate) lifecycle: super::lifecycle_bus::LifecycleBus,
    pub(crate) store: Arc<dyn RunLog>,
    pub(crate) relay: OutboxRelay,
    pub(crate) transcripts: Arc<dyn TranscriptPublisher>,
    pub(crate) threads: Arc<dyn ThreadStore>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) max_commit_rounds: u32,
    /// How many of a thread's exchanges a chat run reads
    /// (`chat.json` `historyLimit`): a queued chat run started on release
    /// reads them (`thread_lanes`).
    pub(crate) chat_history_limit: usize,
    /// Whether threads are summarised (`chat.json`
    /// `summarizeDroppedHistory`): a chat run then reads every exchange its
    /// thread's summary does not cover.
    pub(crate) chat_summarizes: bool,
    /// How long an ended run's records are kept, by tenant: the commit
    /// that ends a run stamps its `retain_until`.
    pub(crate) retention: super::RunRetention,
    /// Plans equal across runs, held once (`shared_plans`).
    pub(crate) shared_plans: Arc<super::shared_plans::SharedPlans>,
}

/// The version a first decision was made on, and the run's status then.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadAt {
    pub(crate) version: u64,
    pub(crate) status: RunStatus,
}

impl ReadAt {
    pub(crate) fn of(stored: &crate::ports::StoredRun) -> Self {
        ReadAt {
            version: stored.version,
            status: stored.state.status(),
        }
    }
}

impl DecisionCommitter {
    /// Writes a decision on `target`. `first` is a decision already made on
    /// the state stored at that version (a step that performed an effect);
    /// without it, and after every conflict, the run is loaded and `decide`
    /// asked again. A decision too large to store fails the run instead.
    pub(crate) async fn commit<Nothing>(
        &self,
        target: CommitTarget<'_>,
        engine: &EngineContext<'_>,
        first: Option<(ReadAt, Decided<Nothing>)>,
        decide: impl FnMut(RunState) -> Result<Decided<Nothing>, RuntimeError>,
    ) -> Result<CommitResult<Nothing>, RuntimeError> {
        match self.commit_rounds(target, first, decide).await {
            Err(RuntimeError::Store(StoreError::TooLarge(reason))) => {
                self.fail_too_large(target, &reason, engine).await
            }
            other => other,
        }
    }

    /// The rounds of load → decide → write until one commits, nothing is
    /// to be written, or the rounds run out (a retryable conflict).
    async fn commit_rounds<Nothing>(
        &self,
        target: CommitTarget<'_>,
        mut first: Option<(ReadAt, Decided<Nothing>)>,
        mut decide: impl FnMut(RunState) -> Result<Decided<Nothing>, RuntimeError>,
    ) -> Result<CommitResult<Nothing>, RuntimeError> {
        let mut version = 0;
        for _ in 0..self.max_commit_rounds.max(1) {
            let (read_at, decided) = match first.take() {
                Some((read_at, decided)) => (read_at, decided),
                None => {
                    let Some(stored) = self
                        .store
                        .load_run(RunKey::new(target.tenant_id, target.run_id))
                        .await?
                    else {
                        return Ok(CommitResult::RunNotFound);
                    };
                    let read_at = ReadAt::of(&stored);
                    (read_at, decide(stored.state)?)
                }
            };
            version = read_at.version;
            let decision = match decided {
                Decided::Commit(decision) => *decision,
                Decided::Nothing(nothing) => return Ok(CommitResult::Nothing(nothing)),
            };
            let status = decision.state.status();
            match self.write(target, read_at, decision).await {
                Ok(new_version) => {
                    return Ok(CommitResult::Committed {
                        new_version,
                        status,
                    });
                }
                Err(RuntimeError::Store(StoreError::VersionConflict { .. })) => {}
                Err(other) => return Err(other),
            }
        }
        Err(RuntimeError::Store(StoreError::VersionConflict {
            expected: version,
        }))
    }

    /// One round: publish, record, commit on `expected_version`, send.
    async fn write(
        &self,
        target: CommitTarget<'_>,
        read_at: ReadAt,
        mut decision: Decision,
    ) -> Result<u64, RuntimeError> {
        let expected_version = read_at.version;
        crate::observe::run_traces::stamp_write(
            decision.state.trace.as_ref(),
            &mut decision.events,
            &mut decision.outbox,
        );
        let CommitTarget {
            tenant_id,
            run_id,
            consumed_message_id,
        } = target;
        // Published before the commit: a failure retries the write, so a
        // concluded transcript is never committed unpublished.
        // A ledger's receipt (its topic, each message's transaction) is
        // written into what this step commits.
        let publications = std::mem::take(&mut decision.transcripts);
        for publication in &publications {
            let receipt = self
                .transcripts
                .publish(tenant_id, run_id, publication)
                .await
                .map_err(RuntimeError::TranscriptPublisher)?;
            if let Some(receipt) = receipt {
                decision.stamp_ledger_receipt(publication, &receipt);
            }
        }
        decision.transcripts = publications;
        // A plan this step made (no one else holds it yet): one equal plan
        // another run holds is kept instead.
        if let Some(plan) = &decision.state.plan
            && Arc::strong_count(plan) == 1
        {
            decision.state.plan = Some(self.shared_plans.share(plan));
        }
        // Recorded before the commit too: recording an exchange twice
        // changes nothing.
        for appended in &decision.exchanges {
            self.threads
                .record_exchange(
                    ThreadKey::new(tenant_id, &appended.thread_id),
                    &appended.exchange,
                )
                .await?;
        }
        let commit_span = tracing::info_span!(
            "commit",
            run_id = %run_id,
            baton.expected_version = expected_version,
            baton.frames = decision.events.len(),
            baton.outbox = decision.outbox.len(),
        );
        let published = self.lifecycle.is_heard().then(|| {
            (
                decision.state.correlation_id.clone(),
                decision.events.clone(),
            )
        });
        let new_version = tracing::Instrument::instrument(
            self.store.commit_step(
                RunKey::new(tenant_id, run_id),
                StepCommit {
                    expected_version,
                    previous_status: read_at.status,
                    retain_until: self.retention.retain_until(
                        tenant_id,
                        decision.state.status(),
                        self.clock.now(),
                    ),
                    state: decision.state,
                    events: decision.events,
                    outbox: decision.outbox.clone(),
                    consumed_message_id: consumed_message_id.map(str::to_string),
                    entries: decision.entries,
                },
            ),
            commit_span,
        )
        .await?;
        if let Some((correlation_id, frames)) = published {
            self.lifecycle
                .publish(tenant_id, run_id, &correlation_id, frames);
        }
        crate::crash_points::reached(crate::crash_points::CrashPoint::AfterCommitBeforeSend);
        // A chat run that settled releases its thread's lane by a step in
        // this outbox (`StepCommand::ReleaseThreadLane`): a send lost here
        // is the sweeper's to repeat, like any other.
        self.relay.send(&decision.outbox).await?;
        Ok(new_version)
    }

    /// The decision made the run too large to store: the run fails from its
    /// last stored state (which fits) with a clear error, through the same
    /// rounds, instead of the write failing for ever. Should even the failed
    /// state not fit, the error is the store's (not retryable).
    async fn fail_too_large<Nothing>(
        &self,
        target: CommitTarget<'_>,
        reason: &str,
        engine: &EngineContext<'_>,
    ) -> Result<CommitResult<Nothing>, RuntimeError> {
        let message = format!("the run can no longer be stored: {reason}");
        let fail = |state: RunState| {
            let status_before = state.status();
            Ok(
                match fail_run(
                    state,
                    FailureCode::StateTooLarge,
                    &message,
                    self.clock.now(),
                    engine,
                ) {
                    Some(decision) => Decided::Commit(Box::new(decision)),
                    None => Decided::Nothing(status_before),
                },
            )
        };
        Ok(match self.commit_rounds(target, None, fail).await? {
            CommitResult::Committed {
                new_version,
                status,
            } => CommitResult::RunFailedTooLarge {
                new_version: Some(new_version),
                status,
            },
            CommitResult::Nothing(status) | CommitResult::RunFailedTooLarge { status, .. } => {
                CommitResult::RunFailedTooLarge {
                    new_version: None,
                    status,
                }
            }
            CommitResult::RunNotFound => CommitResult::RunNotFound,
        })
    }
}
