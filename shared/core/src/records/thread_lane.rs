//! A chat thread's lane: which run answers on the thread now, which wait
//! behind it, and which were cut short by a newer message ("double
//! texting"). The shell stores it beside the thread and writes it
//! conditionally on the version it read, so of two messages sent at the
//! same instant each sees the other's admission: the strategy decides on a
//! lane nobody else changed.
//!
//! Invariants: a run is in at most one of `active_run` and `queued_runs`;
//! `queued_runs` is oldest first and at most [`MAX_QUEUED_RUNS`] long; the
//! interrupted and rolled-back lists keep the newest [`MAX_MARKED_RUNS`].

use serde::{Deserialize, Serialize};

use crate::records::chat::ChatExchange;

/// How many messages may wait behind the one being answered.
pub const MAX_QUEUED_RUNS: usize = 50;

/// How many interrupted (and rolled-back) runs a lane remembers: older
/// ones are beyond any thread history a chat run reads.
pub const MAX_MARKED_RUNS: usize = 1_000;

/// What a new message does when its thread is still answering another.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantNames,
)]
#[serde(rename_all = "camelCase")]
#[strum(serialize_all = "camelCase")]
pub enum MultitaskStrategy {
    /// Refused (HTTP 409) naming the run still answering.
    Reject,
    /// Answered after the runs before it, in order (the default: nothing
    /// a person sends is lost).
    #[default]
    Enqueue,
    /// The runs answering or waiting are cancelled at their next step
    /// boundary; what they said so far stays in the thread, marked
    /// interrupted.
    Interrupt,
    /// As interrupt, and their exchanges leave the thread.
    Rollback,
}

impl MultitaskStrategy {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// A thread's lane, as stored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadLane {
    /// The run answering now (neither ended nor parked for a person).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_run: Option<String>,
    /// When `active_run` was admitted (Unix ms). Its run is created just
    /// after the lane is written: a reader that finds no such run yet
    /// waits for [`ThreadLane::CREATION_GRACE_MILLIS`] before deciding the
    /// admission died with its process.
    #[serde(default)]
    pub active_since_millis: u64,
    /// Runs admitted behind it, oldest first; each starts when the one
    /// before it ends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queued_runs: Vec<String>,
    /// Runs cancelled by an `interrupt`: their exchanges are marked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interrupted_runs: Vec<String>,
    /// Runs cancelled by a `rollback`: their exchanges are not part of
    /// the thread.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rolled_back_runs: Vec<String>,
}

/// What becomes of a new message on its thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Nothing answers on the thread: the run starts now.
    Start,
    /// It waits behind `ahead` (the run answering, or the last queued).
    Queue { ahead: String },
    /// Refused: `active` is still answering.
    Reject { active: String },
    /// Refused: [`MAX_QUEUED_RUNS`] already wait.
    QueueFull { active: String },
    /// The run starts now; `cancelled` (the run answering, then those
    /// queued) are cancelled. `rollback`: their exchanges leave the thread.
    Replace {
        cancelled: Vec<String>,
        rollback: bool,
    },
}

impl ThreadLane {
    /// How long an admitted run may take to appear in the run store.
    pub const CREATION_GRACE_MILLIS: u64 = 60_000;

    /// Whether the active run, not found in the run store at `now_millis`,
    /// is given up for lost (its admission's process died before creating
    /// it) rather than still being created.
    pub fn missing_active_run_is_lost(&self, now_millis: u64) -> bool {
        now_millis.saturating_sub(self.active_since_millis) >= Self::CREATION_GRACE_MILLIS
    }

    /// Admits `run_id` by `strategy` at `now_millis`: what to do, and the
    /// lane to write (unchanged for a refusal). The caller has released an
    /// active run that ended first ([`ThreadLane::release`]).
    pub fn admit(
        &self,
        run_id: &str,
        strategy: MultitaskStrategy,
        now_millis: u64,
    ) -> (Admission, ThreadLane) {
        let Some(active) = self.active_run.clone() else {
            let mut lane = self.clone();
            lane.active_run = Some(run_id.to_string());
            lane.active_since_millis = now_millis;
            return (Admission::Start, lane);
        };
        let mut lane = self.clone();
        match strategy {
            MultitaskStrategy::Reject => (Admission::Reject { active }, lane),
            MultitaskStrategy::Enqueue if self.queued_runs.len() >= MAX_QUEUED_RUNS => {
                (Admission::QueueFull { active }, lane)
            }
            MultitaskStrategy::Enqueue => {
                let ahead = self.queued_runs.last().cloned().unwrap_or(active);
                lane.queued_runs.push(run_id.to_string());
                (Admission::Queue { ahead }, lane)
            }
            MultitaskStrategy::Interrupt | MultitaskStrategy::Rollback => {
                let rollback = strategy == MultitaskStrategy::Rollback;
                let mut cancelled = vec![active];
                cancelled.append(&mut lane.queued_runs);
                let marked = if rollback {
                    &mut lane.rolled_back_runs
                } else {
                    &mut lane.interrupted_runs
                };
                marked.extend(cancelled.iter().cloned());
                let excess = marked.len().saturating_sub(MAX_MARKED_RUNS);
                marked.drain(..excess);
                lane.active_run = Some(run_id.to_string());
                lane.active_since_millis = now_millis;
                (
                    Admission::Replace {
                        cancelled,
                        rollback,
                    },
                    lane,
                )
            }
        }
    }

    /// `ended_run` ended or parked: the next queued run (if any) becomes
    /// the active one. `None` when `ended_run` is not the active run
    /// (released already, or replaced): nothing to write.
    pub fn release(
        &self,
        ended_run: &str,
        now_millis: u64,
    ) -> Option<(Option<String>, ThreadLane)> {
        if self.active_run.as_deref() != Some(ended_run) {
            return None;
        }
        let mut lane = self.clone();
        let next = (!lane.queued_runs.is_empty()).then(|| lane.queued_runs.remove(0));
        lane.active_run = next.clone();
        lane.active_since_millis = now_millis;
        Some((next, lane))
    }

    /// The thread as a reader sees it: rolled-back exchanges left out,
    /// interrupted ones marked.
    pub fn apply_to(&self, exchanges: Vec<ChatExchange>) -> Vec<ChatExchange> {
        exchanges
            .into_iter()
            .filter(|exchange| !self.rolled_back_runs.contains(&exchange.run_id))
            .map(|mut exchange| {
                if self.interrupted_runs.contains(&exchange.run_id) {
                    exchange.interrupted = true;
                }
                exchange
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lane(active: Option<&str>, queued: &[&str]) -> ThreadLane {
        ThreadLane {
            active_run: active.map(str::to_string),
            queued_runs: queued.iter().map(|run| run.to_string()).collect(),
            ..ThreadLane::default()
        }
    }

    #[test]
    fn an_idle_thread_starts_the_run_whatever_the_strategy() {
        for strategy in [
            MultitaskStrategy::Reject,
            MultitaskStrategy::Enqueue,
            MultitaskStrategy::Interrupt,
            MultitaskStrategy::Rollback,
        ] {
            let (admission, written) = lane(None, &[]).admit("run-b", strategy, 5);
            assert_eq!(admission, Admission::Start);
            assert_eq!(written.active_run.as_deref(), Some("run-b"));
            assert_eq!(written.active_since_millis, 5);
            assert!(!written.missing_active_run_is_lost(5 + 59_999));
            assert!(written.missing_active_run_is_lost(5 + 60_000));
        }
    }

    #[test]
    fn a_busy_thread_rejects_queues_or_replaces() {
        let busy = lane(Some("run-a"), &["run-q"]);
        let (admission, written) = busy.admit("run-b", MultitaskStrategy::Reject, 5);
        assert_eq!(
            admission,
            Admission::Reject {
                active: "run-a".into()
            }
        );
        assert_eq!(written, busy, "a refusal writes nothing new");

        let (admission, written) = busy.admit("run-b", MultitaskStrategy::Enqueue, 5);
        assert_eq!(
            admission,
            Admission::Queue {
                ahead: "run-q".into()
            }
        );
        assert_eq!(written.queued_runs, vec!["run-q", "run-b"]);
        let (next, released) = written.release("run-a", 7).unwrap();
        assert_eq!(next.as_deref(), Some("run-q"), "in order");
        assert_eq!(released.queued_runs, vec!["run-b"]);
        assert!(released.release("run-a", 7).is_none(), "released once");

        let (admission, written) = busy.admit("run-b", MultitaskStrategy::Interrupt, 5);
        assert_eq!(
            admission,
            Admission::Replace {
                cancelled: vec!["run-a".into(), "run-q".into()],
                rollback: false
            }
        );
        assert_eq!(written.active_run.as_deref(), Some("run-b"));
        assert!(written.queued_runs.is_empty());
        assert_eq!(written.interrupted_runs, vec!["run-a", "run-q"]);
        assert!(
            written.release("run-a", 7).is_none(),
            "the replaced run's end releases nothing"
        );

        let (_, written) = busy.admit("run-b", MultitaskStrategy::Rollback, 5);
        assert_eq!(written.rolled_back_runs, vec!["run-a", "run-q"]);
    }

    #[test]
    fn the_queue_is_bounded_and_readers_see_rollbacks_and_interruptions() {
        let queued: Vec<String> = (0..MAX_QUEUED_RUNS).map(|n| format!("run-{n}")).collect();
        let full = ThreadLane {
            active_run: Some("run-a".into()),
            queued_runs: queued,
            ..ThreadLane::default()
        };
        assert!(matches!(
            full.admit("run-b", MultitaskStrategy::Enqueue, 5).0,
            Admission::QueueFull { .. }
        ));

        let exchange = |run: &str| ChatExchange {
            run_id: run.into(),
            at_millis: 1,
            user: "hi".into(),
            assistant: "hello".into(),
            agent: None,
            drafts: Vec::new(),
            interrupted: false,
            summary: None,
        };
        let marked = ThreadLane {
            interrupted_runs: vec!["run-i".into()],
            rolled_back_runs: vec!["run-r".into()],
            ..ThreadLane::default()
        };
        let seen = marked.apply_to(vec![
            exchange("run-i"),
            exchange("run-r"),
            exchange("run-k"),
        ]);
        assert_eq!(seen.len(), 2);
        assert!(seen[0].interrupted);
        assert!(!seen[1].interrupted);
    }
}
