//! Double texting in the shell: a chat thread's lane (`baton_core::thread_lane`)
//! is read, decided on and written back conditionally on the version read,
//! so two messages sent at the same instant see each other's admission.
//! Here: releasing the lane when its answering run ends (or parks for a
//! person), which starts the run queued next with the thread's history as it
//! is by then.
//!
//! A process that dies between a run's last commit and the release leaves
//! the lane naming an ended run: the next message on the thread finds it
//! ended and releases it first (`RunService::submit_chat`).

use baton_core::chat::{ChatExchange, ThreadSummary};
use baton_core::engine::start_queued_chat_run;
use baton_core::thread_lane::ThreadLane;

use super::commit::DecisionCommitter;
use crate::error::{RuntimeError, StoreError};
use crate::ports::StepCommit;

/// Bound on read-decide-write rounds on one lane (each lost round means
/// another writer moved it: the thread is busy, not broken).
pub(crate) const MAX_LANE_ROUNDS: u32 = 32;

pub(crate) fn lane_conflict(thread_id: &str) -> RuntimeError {
    RuntimeError::Store(StoreError::Unavailable(format!(
        "thread {thread_id}: its lane kept moving under {MAX_LANE_ROUNDS} writes; retry"
    )))
}

/// How many times `historyLimit` a summarised thread's run reads of the
/// exchanges its summary does not cover. Each run summarises what it
/// leaves out, so more than the limit wait only when summaries failed;
/// past this, the oldest are left out unsummarised.
pub const MOST_UNSUMMARISED_EXCHANGES_READ: usize = 4;

impl DecisionCommitter {
    /// `ended_run`, a chat run on `thread_id`, ended or parked: the lane's
    /// next queued run (if any) becomes the answering one and starts. A
    /// queued run that was cancelled while it waited is released in turn.
    pub(crate) async fn release_thread_lane(
        &self,
        tenant_id: &str,
        thread_id: &str,
        ended_run: &str,
    ) -> Result<(), RuntimeError> {
        let mut ended = ended_run.to_string();
        for _ in 0..MAX_LANE_ROUNDS {
            let (lane, version) = self.threads.thread_lane(tenant_id, thread_id).await?;
            let now_millis = self.clock.now().unix_millis();
            let Some((next, written)) = lane.release(&ended, now_millis) else {
                return Ok(());
            };
            if !self
                .threads
                .put_thread_lane(tenant_id, thread_id, &written, version)
                .await?
            {
                continue;
            }
            let Some(next) = next else {
                return Ok(());
            };
            if self
                .start_queued_run(tenant_id, thread_id, &next, &written)
                .await?
            {
                return Ok(());
            }
            ended = next;
        }
        Err(lane_conflict(thread_id))
    }

    /// Starts `run_id`, queued on the thread. `false` when it had ended
    /// while it waited (its place is released in turn). A run not created
    /// yet (its admission wrote the lane first) counts as started: its
    /// submitter finds it the active run and starts it itself.
    pub(crate) async fn start_queued_run(
        &self,
        tenant_id: &str,
        thread_id: &str,
        run_id: &str,
        lane: &ThreadLane,
    ) -> Result<bool, RuntimeError> {
        for _ in 0..self.max_commit_rounds.max(1) {
            let Some(stored) = self.store.load_run(tenant_id, run_id).await? else {
                return Ok(true);
            };
            if stored.state.status.is_settled() {
                return Ok(false);
            }
            let (history, summary) = self.thread_history(tenant_id, thread_id, lane).await?;
            let Some(mut decision) =
                start_queued_chat_run(stored.state, history, summary, self.clock.now())
            else {
                // Started already (a release repeated after a crash).
                return Ok(true);
            };
            crate::run_traces::stamp_write(
                decision.state.trace.as_ref(),
                &mut decision.events,
                &mut decision.outbox,
            );
            let outbox = decision.outbox.clone();
            let committed = self
                .store
                .commit_step(
                    tenant_id,
                    run_id,
                    StepCommit {
                        expected_version: stored.version,
                        state: decision.state,
                        events: decision.events,
                        outbox: outbox.clone(),
                        consumed_message_id: None,
                        entries: Vec::new(),
                    },
                )
                .await;
            match committed {
                Ok(_) => {
                    self.relay.send(&outbox).await?;
                    return Ok(true);
                }
                Err(StoreError::VersionConflict { .. }) => continue,
                Err(StoreError::RunNotFound) => return Ok(true),
                Err(other) => return Err(other.into()),
            }
        }
        Err(RuntimeError::Store(StoreError::VersionConflict {
            expected: 0,
        }))
    }

    /// The thread's exchanges as a chat run reads them: rolled-back ones
    /// left out, interrupted ones marked, the newest `chat_history_limit`;
    /// when threads are summarised, the thread's summary (its latest
    /// exchange's) and every exchange it does not cover (at most
    /// [`MOST_UNSUMMARISED_EXCHANGES_READ`] times the limit, the newest).
    pub(crate) async fn thread_history(
        &self,
        tenant_id: &str,
        thread_id: &str,
        lane: &ThreadLane,
    ) -> Result<(Vec<ChatExchange>, Option<ThreadSummary>), RuntimeError> {
        let exchanges = self
            .threads
            .thread_exchanges(tenant_id, thread_id)
            .await?
            .unwrap_or_default();
        let mut exchanges = lane.apply_to(exchanges);
        let (summary, read) = if self.chat_summarizes {
            let summary = exchanges
                .iter()
                .rev()
                .find_map(|exchange| exchange.summary.clone());
            if let Some(summary) = &summary {
                exchanges.retain(|exchange| !summary.covers(exchange));
            }
            (
                summary,
                self.chat_history_limit * MOST_UNSUMMARISED_EXCHANGES_READ,
            )
        } else {
            (None, self.chat_history_limit)
        };
        let skip = exchanges.len().saturating_sub(read);
        exchanges.drain(..skip);
        Ok((exchanges, summary))
    }
}
