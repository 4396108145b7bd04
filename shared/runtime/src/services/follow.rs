//! The one event follower: a `Stream` of a run's frames after a sequence
//! number that owns the cursor, replays what is stored, then follows new
//! frames until the run's stream ends (`complete` or `error`) or the run
//! parks. Used by the SSE routes, the CLI and the tests; a reconnecting
//! client passes its `Last-Event-ID` as `after_sequence`.
//!
//! An idle stream backs off: each empty poll doubles the wait, from the
//! poll interval (100 ms) to [`MAX_IDLE_POLL_INTERVAL`] (1 s), and a frame
//! resets it; an ended run's last frame is awaited at the poll interval.
//! Its run's status is read only on the first empty poll after frames (a
//! run parks or ends only in a commit that writes frames) and on every
//! tenth empty poll: an idle stream-minute costs about 60 event reads and
//! 6 run reads, not 600 of each.

use std::sync::Arc;
use std::time::Duration;

use baton_core::basics::ids::RunKey;
use baton_core::wire::event::EventFrame;
use futures_util::Stream;
use futures_util::stream::{self, StreamExt};

use crate::ports::RunLog;

/// Polls to wait for an ended run's terminal frame before giving up.
const MAX_GRACE_POLLS: u32 = 50;

/// A stream gives up after this many failed reads in a row.
const MAX_CONSECUTIVE_READ_ERRORS: u32 = 20;

/// Frames per store read.
const PAGE_SIZE: usize = 200;

/// An idle stream reads its run's status on the first empty poll after
/// frames and on every this many empty polls after that.
const STATUS_EVERY_IDLE_POLLS: u32 = 10;

/// The longest an idle stream waits between polls.
pub const MAX_IDLE_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// The wait after `idle_polls` empty polls in a row: the poll interval
/// doubled each time, at most [`MAX_IDLE_POLL_INTERVAL`] (never less than
/// the interval itself).
pub fn idle_wait(poll_interval: Duration, idle_polls: u32) -> Duration {
    let grown = poll_interval.saturating_mul(1_u32 << idle_polls.min(16));
    grown.min(MAX_IDLE_POLL_INTERVAL.max(poll_interval))
}

/// Which run to follow, from where, how often to look.
#[derive(Debug, Clone)]
pub struct FollowRequest {
    pub tenant_id: String,
    pub run_id: String,
    /// Frames with a greater id are streamed (0: from the start).
    pub after_sequence: u64,
    pub poll_interval: Duration,
}

struct Cursor {
    store: Arc<dyn RunLog>,
    request: FollowRequest,
    finished: bool,
    consecutive_errors: u32,
    grace_polls: u32,
    /// Empty polls in a row (the back-off's exponent).
    idle_polls: u32,
    /// The run was seen ended: its terminal frame is awaited at the poll
    /// interval.
    ended: bool,
}

impl Cursor {
    async fn read_page(&self) -> Result<Vec<EventFrame>, crate::error::StoreError> {
        let request = &self.request;
        self.store
            .read_events(
                RunKey::new(&request.tenant_id, &request.run_id),
                request.after_sequence,
                PAGE_SIZE,
            )
            .await
    }

    /// The next page, or None when the stream is over.
    async fn next_page(&mut self) -> Option<Vec<EventFrame>> {
        let request = self.request.clone();
        loop {
            if self.finished {
                return None;
            }
            let page = self.read_page().await;
            let frames = match page {
                Ok(frames) => {
                    self.consecutive_errors = 0;
                    frames
                }
                Err(error) => {
                    self.consecutive_errors += 1;
                    if self.consecutive_errors >= MAX_CONSECUTIVE_READ_ERRORS {
                        tracing::warn!(%error, run_id = %request.run_id, "reading events keeps failing; ending the stream (the client can resume with Last-Event-ID)");
                        return None;
                    }
                    tracing::debug!(%error, run_id = %request.run_id, "reading events failed; retrying");
                    tokio::time::sleep(request.poll_interval * self.consecutive_errors).await;
                    continue;
                }
            };
            if let Some(last) = frames.last() {
                self.idle_polls = 0;
                self.request.after_sequence = last.id;
                if frames.iter().any(|frame| frame.event_type.is_terminal()) {
                    self.finished = true;
                }
                return Some(frames);
            }
            // A run changes its status only in a commit that writes
            // frames (parking, ending, cancelling): the status is read on
            // the first empty poll after frames, and on every tenth while
            // idle (a run deleted by retention), not on every poll.
            let status = if self.idle_polls.is_multiple_of(STATUS_EVERY_IDLE_POLLS) {
                match self
                    .store
                    .load_run(RunKey::new(&request.tenant_id, &request.run_id))
                    .await
                {
                    Ok(Some(stored)) => Some(stored.state.status()),
                    Ok(None) => return None,
                    Err(error) => {
                        tracing::debug!(%error, run_id = %request.run_id, "loading the run failed; following on");
                        None
                    }
                }
            } else {
                None
            };
            let mut wait = idle_wait(request.poll_interval, self.idle_polls);
            match status {
                // An ended run's stream ends on its `complete`/`error` frame;
                // wait (bounded) for it in case it is not readable yet.
                Some(status) if status.is_terminal() => self.ended = true,
                // A parked run: one last read for frames committed with the parking.
                Some(status) if status.is_settled() => {
                    self.finished = true;
                    let last = self.read_page().await.unwrap_or_default();
                    if let Some(frame) = last.last() {
                        self.request.after_sequence = frame.id;
                    }
                    return Some(last);
                }
                _ => {}
            }
            if self.ended {
                self.grace_polls += 1;
                wait = request.poll_interval;
                if self.grace_polls > MAX_GRACE_POLLS {
                    tracing::warn!(run_id = %request.run_id, "the run ended but its last frame never became readable");
                    return None;
                }
            }
            self.idle_polls = self.idle_polls.saturating_add(1);
            tokio::time::sleep(wait).await;
        }
    }
}

/// [`follow_run`], with each child run an agent of the run starts relayed
/// in place: after the parent's `agent_state` `executing_plan` frame naming
/// `childRunId`, the child's frames (marked `forwarded`, keeping their own
/// run id and sequence) until the child's stream ends, then the parent's
/// again. Children of children are relayed the same way.
pub fn follow_run_and_children(
    store: Arc<dyn RunLog>,
    request: FollowRequest,
) -> futures_util::stream::BoxStream<'static, EventFrame> {
    let poll_interval = request.poll_interval;
    let tenant_id = request.tenant_id.clone();
    follow_run(store.clone(), request)
        .flat_map(move |frame| {
            let child = (frame.event_type == baton_core::wire::event::EventType::AgentState)
                .then_some(frame.payload.as_ref())
                .flatten()
                .filter(|payload| payload["state"] == "executing_plan")
                .and_then(|payload| payload["childRunId"].as_str())
                .map(str::to_string);
            let own = stream::iter([frame]).boxed();
            match child {
                None => own,
                Some(child_run_id) => {
                    let relayed = follow_run_and_children(
                        store.clone(),
                        FollowRequest {
                            tenant_id: tenant_id.clone(),
                            run_id: child_run_id,
                            after_sequence: 0,
                            poll_interval,
                        },
                    )
                    .map(|mut frame| {
                        frame.forwarded = true;
                        frame
                    });
                    own.chain(relayed).boxed()
                }
            }
        })
        .boxed()
}

/// The frames of `request.run_id` after `request.after_sequence`, followed
/// until the run's stream ends or the run parks. Dropping the stream stops
/// the reads.
pub fn follow_run(
    store: Arc<dyn RunLog>,
    request: FollowRequest,
) -> impl Stream<Item = EventFrame> + Send + 'static {
    let cursor = Cursor {
        store,
        request,
        finished: false,
        consecutive_errors: 0,
        grace_polls: 0,
        idle_polls: 0,
        ended: false,
    };
    stream::unfold(cursor, |mut cursor| async move {
        let page = cursor.next_page().await?;
        Some((stream::iter(page), cursor))
    })
    .flatten()
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;
    use baton_core::state::run::RunState;
    use baton_core::wire::event::{EventDraft, EventType};

    use super::*;
    use crate::error::StoreError;
    use crate::ports::{CreateOutcome, StepCommit, StoredRun};
    use baton_core::records::entries::RunEntry;

    /// A run log whose run is never readable (so the follower keeps
    /// following) and whose frames the test appends: it counts reads.
    #[derive(Default)]
    struct QuietLog {
        frames: Mutex<Vec<EventFrame>>,
        reads: AtomicUsize,
    }

    #[async_trait]
    impl RunLog for QuietLog {
        async fn create_run_within(
            &self,
            _state: &RunState,
            _events: Vec<EventDraft>,
            _outbox: Vec<baton_core::state::run::StepMessage>,
            _idempotency_key: Option<&str>,
            _live_run_limit: Option<u64>,
        ) -> Result<CreateOutcome, StoreError> {
            Err(StoreError::Unavailable("not in this test".into()))
        }
        async fn load_run(&self, _key: RunKey<'_>) -> Result<Option<StoredRun>, StoreError> {
            Err(StoreError::Unavailable(
                "the run is not read in this test".into(),
            ))
        }
        async fn commit_step(
            &self,
            _key: RunKey<'_>,
            _commit: StepCommit,
        ) -> Result<u64, StoreError> {
            Err(StoreError::Unavailable("not in this test".into()))
        }
        async fn read_entries(
            &self,
            _key: RunKey<'_>,
            _prefix: &str,
        ) -> Result<Vec<RunEntry>, StoreError> {
            Ok(Vec::new())
        }
        async fn append_events(
            &self,
            _key: RunKey<'_>,
            _events: Vec<EventDraft>,
        ) -> Result<u64, StoreError> {
            Err(StoreError::Unavailable("not in this test".into()))
        }
        async fn read_events(
            &self,
            _key: RunKey<'_>,
            after_sequence: u64,
            _limit: usize,
        ) -> Result<Vec<EventFrame>, StoreError> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            let frames = self
                .frames
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            Ok(frames
                .iter()
                .filter(|frame| frame.id > after_sequence)
                .cloned()
                .collect())
        }
    }

    #[test]
    fn the_idle_wait_doubles_to_a_second_and_never_drops_below_the_interval() {
        let interval = Duration::from_millis(100);
        let waits: Vec<u128> = (0..6)
            .map(|idle| idle_wait(interval, idle).as_millis())
            .collect();
        assert_eq!(waits, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(idle_wait(Duration::from_secs(3), 4), Duration::from_secs(3));
        assert_eq!(idle_wait(interval, u32::MAX), MAX_IDLE_POLL_INTERVAL);
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_stream_backs_off_and_a_frame_resets_it() {
        let log = Arc::new(QuietLog::default());
        let stream = follow_run(
            log.clone(),
            FollowRequest {
                tenant_id: "t".into(),
                run_id: "run".into(),
                after_sequence: 0,
                poll_interval: Duration::from_millis(100),
            },
        );
        let mut stream = Box::pin(stream);
        let reader = tokio::spawn(async move {
            let frame = stream.next().await;
            (frame, stream)
        });
        // Ten idle seconds: about 14 reads (100 ms growing to 1 s), not 100.
        tokio::time::sleep(Duration::from_secs(10)).await;
        let idle_reads = log.reads.load(Ordering::SeqCst);
        assert!(
            (10..=16).contains(&idle_reads),
            "{idle_reads} reads in 10 idle seconds"
        );
        // A frame arrives: read within the current (longest) wait.
        log.frames.lock().unwrap().push(
            EventDraft::new(EventType::Log, "2026-11-28T00:00:00Z", 1).into_frame(1, "run", "corr"),
        );
        tokio::time::sleep(MAX_IDLE_POLL_INTERVAL).await;
        let (frame, mut stream) = reader.await.unwrap();
        assert_eq!(frame.expect("the frame is streamed").id, 1);
        // The frame reset the back-off: polls at 100 ms and 300 ms again.
        let before = log.reads.load(Ordering::SeqCst);
        let _reader = tokio::spawn(async move { stream.next().await });
        tokio::time::sleep(Duration::from_millis(350)).await;
        let after_reset = log.reads.load(Ordering::SeqCst) - before;
        assert!(
            after_reset >= 2,
            "{after_reset} reads in 350 ms after a frame"
        );
    }
}
