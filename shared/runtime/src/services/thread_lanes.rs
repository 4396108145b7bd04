//! Double texting in the shell: a chat thread's lane (`baton_core::records::thread_lane`)
//! is read, decided on and written back conditionally on the version read,
//! so two messages sent at the same instant see each other's admission.
//! Here: releasing the lane when its answering run ends (or parks for a
//! person), which starts the run queued next with the thread's history as it
//! is by then.
//!
//! The release is a step of the settled run (`StepCommand::ReleaseThreadLane`,
//! in the outbox of the commit that settled it), so a process that dies
//! before it leaves it to redelivery or the sweeper; the next message on
//! the thread also releases a lane whose active run has ended
//! (`RunService::submit_chat`). Starting the queued run is a write through
//! the one commit protocol (`DecisionCommitter::commit`).

use baton_core::basics::ids::ThreadKey;
use baton_core::engine::start_queued_chat_run;
use baton_core::records::chat::{ChatExchange, ThreadSummary};
use baton_core::records::thread_lane::ThreadLane;

use baton_core::engine::EngineContext;
use baton_core::state::run::RunState;

use super::commit::{CommitResult, CommitTarget, Decided, DecisionCommitter};
use crate::error::{RuntimeError, StoreError};

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

/// Exchanges a chat turn reads from its thread per page.
const THREAD_PAGE: usize = 50;

impl DecisionCommitter {
    /// `ended_run`, a chat run on `thread_id`, ended or parked: the lane's
    /// next queued run (if any) becomes the answering one and starts. A
    /// queued run that was cancelled while it waited is released in turn.
    pub(crate) async fn release_thread_lane(
        &self,
        tenant_id: &str,
        thread_id: &str,
        ended_run: &str,
        engine: &EngineContext<'_>,
    ) -> Result<(), RuntimeError> {
        let mut ended = ended_run.to_string();
        for _ in 0..MAX_LANE_ROUNDS {
            let (lane, version) = self
                .threads
                .thread_lane(ThreadKey::new(tenant_id, thread_id))
                .await?;
            let now_millis = self.clock.now().unix_millis();
            let Some((next, written)) = lane.release(&ended, now_millis) else {
                return Ok(());
            };
            if !self
                .threads
                .put_thread_lane(ThreadKey::new(tenant_id, thread_id), &written, version)
                .await?
            {
                continue;
            }
            let Some(next) = next else {
                return Ok(());
            };
            if self
                .start_queued_run(tenant_id, thread_id, &next, &written, engine)
                .await?
            {
                return Ok(());
            }
            ended = next;
        }
        Err(lane_conflict(thread_id))
    }

    /// Starts `run_id`, queued on the thread, through the one commit
    /// protocol. `false` when it had ended while it waited (its place is
    /// released in turn). A run not created yet (its admission wrote the
    /// lane first) counts as started: its submitter finds it the active
    /// run and starts it itself.
    pub(crate) async fn start_queued_run(
        &self,
        tenant_id: &str,
        thread_id: &str,
        run_id: &str,
        lane: &ThreadLane,
        engine: &EngineContext<'_>,
    ) -> Result<bool, RuntimeError> {
        // Read once: a conflict's next round starts the run with the same
        // history (the thread does not move while its lane waits on it).
        let (history, summary) = self.thread_history(tenant_id, thread_id, lane).await?;
        let target = CommitTarget {
            tenant_id,
            run_id,
            consumed_message_id: None,
        };
        let now = self.clock.now();
        let decide = |state: RunState| {
            let settled = state.status().is_settled();
            Ok(
                match start_queued_chat_run(state, history.clone(), summary.clone(), now) {
                    Some(decision) => Decided::Commit(Box::new(decision)),
                    // Ended while it waited, or started already (a release
                    // repeated after a crash).
                    None => Decided::Nothing(!settled),
                },
            )
        };
        Ok(match self.commit(target, engine, None, decide).await? {
            CommitResult::Committed { .. } | CommitResult::RunNotFound => true,
            CommitResult::Nothing(started) => started,
            CommitResult::RunFailedTooLarge { .. } => false,
        })
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
        let read = if self.chat_summarizes {
            self.chat_history_limit * MOST_UNSUMMARISED_EXCHANGES_READ
        } else {
            self.chat_history_limit
        };
        // Read by page from the newest end: the newest `read` exchanges
        // (rolled-back ones left out); when summarising, on until the
        // newest summary is found and an exchange it covers is reached
        // (every older one is covered too: a thread is ordered).
        let mut newest_first: Vec<ChatExchange> = Vec::new();
        let mut summary: Option<ThreadSummary> = None;
        let mut before: Option<(u64, String)> = None;
        'pages: loop {
            let Some(page) = self
                .threads
                .thread_exchanges_before(
                    ThreadKey::new(tenant_id, thread_id),
                    before.as_ref(),
                    THREAD_PAGE,
                )
                .await?
            else {
                break;
            };
            if let Some(first) = page.exchanges.first() {
                before = Some((first.at_millis, first.run_id.clone()));
            }
            for exchange in lane.apply_to(page.exchanges).into_iter().rev() {
                if self.chat_summarizes && summary.is_none() {
                    summary = exchange.summary.clone();
                }
                if summary
                    .as_ref()
                    .is_some_and(|summary| summary.covers(&exchange))
                {
                    break 'pages;
                }
                newest_first.push(exchange);
            }
            let enough = newest_first.len() >= read && (!self.chat_summarizes || summary.is_some());
            if !page.older || enough {
                break;
            }
        }
        if let Some(summary) = &summary {
            newest_first.retain(|exchange| !summary.covers(exchange));
        }
        newest_first.truncate(read);
        newest_first.reverse();
        Ok((newest_first, summary))
    }
}
