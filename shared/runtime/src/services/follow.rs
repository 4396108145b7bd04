//! The one event follower: a `Stream` of a run's frames after a sequence
//! number that owns the cursor, replays what is stored, then follows new
//! frames until the run's stream ends (`complete` or `error`) or the run
//! parks. Used by the SSE routes, the CLI and the tests; a reconnecting
//! client passes its `Last-Event-ID` as `after_sequence`.

use std::sync::Arc;
use std::time::Duration;

use baton_core::event::EventFrame;
use baton_core::ids::RunKey;
use futures_util::Stream;
use futures_util::stream::{self, StreamExt};

use crate::ports::RunLog;

/// Polls to wait for an ended run's terminal frame before giving up.
const MAX_GRACE_POLLS: u32 = 50;

/// A stream gives up after this many failed reads in a row.
const MAX_CONSECUTIVE_READ_ERRORS: u32 = 20;

/// Frames per store read.
const PAGE_SIZE: usize = 200;

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
                self.request.after_sequence = last.id;
                if frames.iter().any(|frame| frame.event_type.is_terminal()) {
                    self.finished = true;
                }
                return Some(frames);
            }
            let status = match self
                .store
                .load_run(RunKey::new(&request.tenant_id, &request.run_id))
                .await
            {
                Ok(Some(stored)) => Some(stored.state.status),
                Ok(None) => return None,
                Err(error) => {
                    tracing::debug!(%error, run_id = %request.run_id, "loading the run failed; following on");
                    None
                }
            };
            match status {
                // An ended run's stream ends on its `complete`/`error` frame;
                // wait (bounded) for it in case it is not readable yet.
                Some(status) if status.is_terminal() => {
                    self.grace_polls += 1;
                    if self.grace_polls > MAX_GRACE_POLLS {
                        tracing::warn!(run_id = %request.run_id, "the run ended but its last frame never became readable");
                        return None;
                    }
                }
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
            tokio::time::sleep(request.poll_interval).await;
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
            let child = (frame.event_type == baton_core::event::EventType::AgentState)
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
    };
    stream::unfold(cursor, |mut cursor| async move {
        let page = cursor.next_page().await?;
        Some((stream::iter(page), cursor))
    })
    .flatten()
}
