//! A chat message's admission on its thread ("double texting"): the lane
//! is read, the strategy decides (`ThreadLane::admit`), and the lane is
//! written back conditionally on the version read; a writer that lost the
//! race reads again. Of two messages sent at the same instant on one
//! thread, each therefore decides knowing the other's admission.
//!
//! An `interrupt` or `rollback` then cancels the runs it replaced (each at
//! its next step boundary, through the one commit protocol) and, for an
//! interrupt, keeps what each had said in the thread, marked.

use baton_core::basics::ids::RunKey;
use baton_core::basics::ids::ThreadKey;
use baton_core::records::chat::ChatExchange;
use baton_core::records::thread_lane::{Admission, MultitaskStrategy, ThreadLane};
use baton_core::wire::event::EventType;

use super::{ChatRequest, RunService};
use crate::error::RuntimeError;
use crate::ports::ThreadPage;
use crate::services::thread_lanes::{MAX_LANE_ROUNDS, lane_conflict};

/// One page of a thread as its readers see it ([`RunService::thread_page`]).
#[derive(Debug, Clone)]
pub struct ThreadPageRead {
    /// Oldest first.
    pub exchanges: Vec<ChatExchange>,
    /// Where the page before this one ends (`before` for it), when older
    /// exchanges remain.
    pub older_than: Option<(u64, String)>,
    /// Who answers on the thread now.
    pub lane: ThreadLane,
}

impl RunService {
    /// One page of the thread, read from its newest end: the newest
    /// `limit` exchanges older than `before` (`(atMillis, runId)`; `None`:
    /// from the newest), oldest first, rolled-back ones left out and
    /// interrupted ones marked; whether older ones remain; and who answers
    /// on it now. A thread of any length costs one page to read.
    pub async fn thread_page(
        &self,
        tenant_id: &str,
        thread_id: &str,
        before: Option<&(u64, String)>,
        limit: usize,
    ) -> Result<ThreadPageRead, RuntimeError> {
        let (lane, version) = self
            .threads
            .thread_lane(ThreadKey::new(tenant_id, thread_id))
            .await?;
        let page = self
            .threads
            .thread_exchanges_before(ThreadKey::new(tenant_id, thread_id), before, limit)
            .await?;
        if version == 0 && page.is_none() {
            return Err(RuntimeError::ThreadNotFound(thread_id.to_string()));
        }
        let ThreadPage { exchanges, older } = page.unwrap_or(ThreadPage {
            exchanges: Vec::new(),
            older: false,
        });
        // Taken before the lane leaves any out, so a page whose exchanges
        // were all rolled back still leads to the older ones.
        let older_than = exchanges
            .first()
            .filter(|_| older)
            .map(|oldest| (oldest.at_millis, oldest.run_id.clone()));
        Ok(ThreadPageRead {
            exchanges: lane.apply_to(exchanges),
            older_than,
            lane,
        })
    }

    /// One page of the tenant's threads, the most recently answered first.
    pub async fn list_threads(
        &self,
        tenant_id: &str,
        query: &baton_core::records::thread_listing::ThreadListQuery,
    ) -> Result<baton_core::records::thread_listing::ThreadListPage, RuntimeError> {
        Ok(self.threads.list_threads(tenant_id, query).await?)
    }

    /// Admits `run_id` on the thread; `new_thread`: the thread is being
    /// created by this message. Returns the admission and the lane as
    /// written. A refusal is `ThreadBusy`; a thread that has neither an
    /// exchange nor a lane is `ThreadNotFound`.
    pub(super) async fn admit_on_thread(
        &self,
        tenant_id: &str,
        thread_id: &str,
        run_id: &str,
        request: &ChatRequest,
        new_thread: bool,
    ) -> Result<(Admission, ThreadLane), RuntimeError> {
        for _ in 0..MAX_LANE_ROUNDS {
            let (lane, version) = self
                .threads
                .thread_lane(ThreadKey::new(tenant_id, thread_id))
                .await?;
            // Whether the thread exists: a page of none, not the thread.
            if !new_thread
                && version == 0
                && self
                    .threads
                    .thread_exchanges_before(ThreadKey::new(tenant_id, thread_id), None, 0)
                    .await?
                    .is_none()
            {
                return Err(RuntimeError::ThreadNotFound(thread_id.to_string()));
            }
            let now_millis = self.clock.now().unix_millis();
            if let Some(active) = &lane.active_run
                && self.has_ended(tenant_id, active, &lane, now_millis).await?
            {
                // Its end was not released (a process died in between):
                // release it now, which starts the next queued run.
                self.committer
                    .release_thread_lane(tenant_id, thread_id, active, &self.engine())
                    .await?;
                continue;
            }
            let (admission, written) = lane.admit(run_id, request.multitask_strategy, now_millis);
            match &admission {
                Admission::Reject { active } => {
                    return Err(busy(thread_id, active, "multitaskStrategy is reject"));
                }
                Admission::QueueFull { active } => {
                    return Err(busy(
                        thread_id,
                        active,
                        &format!(
                            "{} messages already wait on it (multitaskStrategy enqueue)",
                            baton_core::records::thread_lane::MAX_QUEUED_RUNS
                        ),
                    ));
                }
                Admission::Start | Admission::Queue { .. } | Admission::Replace { .. } => {}
            }
            if self
                .threads
                .put_thread_lane(ThreadKey::new(tenant_id, thread_id), &written, version)
                .await?
            {
                return Ok((admission, written));
            }
        }
        Err(lane_conflict(thread_id))
    }

    /// The lane moved while the run was being created (the lane is
    /// written first): a newer message cut it short before it existed (it
    /// cancels itself, keeping its exchange for an interrupt), or the run
    /// ahead of a queued one ended before it existed (it starts itself).
    /// The run's status when it changed.
    pub(super) async fn settle_admission(
        &self,
        tenant_id: &str,
        thread_id: &str,
        run_id: &str,
        admission: &Admission,
    ) -> Result<Option<baton_core::state::run::RunStatus>, RuntimeError> {
        let (lane, _) = self
            .threads
            .thread_lane(ThreadKey::new(tenant_id, thread_id))
            .await?;
        let owned = run_id.to_string();
        let rolled_back = lane.rolled_back_runs.contains(&owned);
        if rolled_back || lane.interrupted_runs.contains(&owned) {
            let newer = lane.active_run.clone().unwrap_or_default();
            self.cut_short(tenant_id, thread_id, &newer, &[owned], rolled_back)
                .await?;
            return Ok(Some(baton_core::state::run::RunStatus::Cancelled));
        }
        if matches!(admission, Admission::Queue { .. })
            && lane.active_run.as_deref() == Some(run_id)
        {
            self.committer
                .start_queued_run(tenant_id, thread_id, run_id, &lane, &self.engine())
                .await?;
        }
        Ok(None)
    }

    /// Whether the lane's active run no longer answers: ended, parked for a
    /// person, or never created (past the creation grace).
    async fn has_ended(
        &self,
        tenant_id: &str,
        run_id: &str,
        lane: &ThreadLane,
        now_millis: u64,
    ) -> Result<bool, RuntimeError> {
        Ok(
            match self
                .run_log
                .load_run(RunKey::new(tenant_id, run_id))
                .await?
            {
                Some(stored) => stored.state.status().is_settled(),
                None => lane.missing_active_run_is_lost(now_millis),
            },
        )
    }

    /// Cancels the runs a newer message replaced; for an interrupt, what
    /// each had said (its streamed text) stays in the thread, marked
    /// interrupted, unless it had recorded its answer already.
    pub(super) async fn cut_short(
        &self,
        tenant_id: &str,
        thread_id: &str,
        newer_run: &str,
        cancelled: &[String],
        rollback: bool,
    ) -> Result<(), RuntimeError> {
        let strategy = if rollback {
            MultitaskStrategy::Rollback
        } else {
            MultitaskStrategy::Interrupt
        };
        let reason = format!(
            "a newer message on thread {thread_id} (run {newer_run}) replaced it (multitaskStrategy {})",
            strategy.as_str()
        );
        for run_id in cancelled {
            self.cancel(tenant_id, run_id, &reason).await?;
        }
        if rollback {
            return Ok(());
        }
        // Read once the cancels are committed: an answer recorded by then
        // is kept as it is.
        let recorded: Vec<String> = self
            .threads
            .thread_exchanges(ThreadKey::new(tenant_id, thread_id))
            .await?
            .unwrap_or_default()
            .into_iter()
            .map(|exchange| exchange.run_id)
            .collect();
        for run_id in cancelled.iter().filter(|run_id| !recorded.contains(run_id)) {
            let Some(stored) = self
                .run_log
                .load_run(RunKey::new(tenant_id, run_id))
                .await?
            else {
                continue;
            };
            let Some(turn) = &stored.state.chat else {
                continue;
            };
            let exchange = ChatExchange {
                run_id: run_id.clone(),
                at_millis: stored.state.created_at.unix_millis(),
                user: turn.message.clone(),
                assistant: self.streamed_text(tenant_id, run_id).await?,
                agent: turn.agent.clone(),
                drafts: Vec::new(),
                interrupted: true,
                summary: None,
            };
            self.threads
                .record_exchange(ThreadKey::new(tenant_id, thread_id), &exchange)
                .await?;
        }
        Ok(())
    }

    /// What a run had said so far: its streamed text (`delta` frames),
    /// and of a JSON answer cut short, its `message` so far.
    async fn streamed_text(&self, tenant_id: &str, run_id: &str) -> Result<String, RuntimeError> {
        let frames = self.read_all_events_after(tenant_id, run_id, 0).await?;
        let streamed: String = frames
            .iter()
            .filter(|frame| frame.event_type == EventType::Delta)
            .filter_map(|frame| frame.message.as_deref())
            .collect();
        Ok(partial_answer(&streamed))
    }
}

/// A chat answer is `{"message": …}`: of one cut short, the message's text
/// so far; any other text as it is.
fn partial_answer(streamed: &str) -> String {
    let trimmed = streamed.trim_start();
    if !trimmed.starts_with('{') {
        return streamed.to_string();
    }
    if let Ok(whole) = serde_json::from_str::<serde_json::Value>(trimmed) {
        return whole
            .get("message")
            .and_then(|message| message.as_str())
            .unwrap_or_default()
            .to_string();
    }
    let Some(key) = trimmed.find("\"message\"") else {
        return String::new();
    };
    let after_key = trimmed[key + "\"message\"".len()..].trim_start();
    let Some(after_colon) = after_key.strip_prefix(':') else {
        return String::new();
    };
    let Some(text) = after_colon.trim_start().strip_prefix('"') else {
        return String::new();
    };
    let mut raw = String::new();
    let mut escaped = false;
    for character in text.chars() {
        if !escaped && character == '"' {
            break;
        }
        escaped = !escaped && character == '\\';
        raw.push(character);
    }
    if escaped {
        raw.pop();
    }
    serde_json::from_str::<String>(&format!("\"{raw}\"")).unwrap_or(raw)
}

fn busy(thread_id: &str, active: &str, why: &str) -> RuntimeError {
    RuntimeError::ThreadBusy {
        thread_id: thread_id.to_string(),
        active_run_id: active.to_string(),
        why: why.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::partial_answer;

    #[test]
    fn an_answer_cut_short_keeps_its_message_so_far() {
        assert_eq!(partial_answer(r#"{"message": "Hello, wor"#), "Hello, wor");
        assert_eq!(
            partial_answer(r#"{"message": "a \"quote\" and \"#),
            "a \"quote\" and "
        );
        assert_eq!(
            partial_answer(r#"{"message": "done", "threadId": "t"}"#),
            "done"
        );
        assert_eq!(partial_answer(r#"{"thr"#), "");
        assert_eq!(partial_answer("plain text so far"), "plain text so far");
    }
}
