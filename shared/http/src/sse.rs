//! The SSE relay: replays a run's frames after a sequence number, then
//! follows new ones until the run ends or parks. Dropping the stream (the
//! client went away) stops the reads.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::Event;
use baton_core::event::EventFrame;
use baton_runtime::orchestrator::Orchestrator;
use futures_util::Stream;
use futures_util::stream::{self, StreamExt};

/// One SSE event for a frame: `id`, `event` and the frame JSON as `data`.
pub fn sse_event_for(frame: &EventFrame) -> Event {
    Event::default()
        .id(frame.id.to_string())
        .event(frame.event_type.as_str())
        .data(serde_json::to_string(frame).unwrap_or_default())
}

struct FollowState {
    orchestrator: Arc<Orchestrator>,
    tenant_id: String,
    run_id: String,
    cursor: u64,
    finished: bool,
    poll_interval: Duration,
    consecutive_errors: u32,
    grace_polls: u32,
}

/// Polls to wait for an ended run's terminal frame before giving up.
const MAX_GRACE_POLLS: u32 = 50;

/// A stream gives up after this many failed reads in a row.
const MAX_CONSECUTIVE_READ_ERRORS: u32 = 20;

/// Frames of `run_id` after `after_sequence`, followed until the run settles.
pub fn follow_run_events(
    orchestrator: Arc<Orchestrator>,
    tenant_id: String,
    run_id: String,
    after_sequence: u64,
    poll_interval: Duration,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let initial = FollowState {
        orchestrator,
        tenant_id,
        run_id,
        cursor: after_sequence,
        finished: false,
        poll_interval,
        consecutive_errors: 0,
        grace_polls: 0,
    };
    stream::unfold(initial, |mut state| async move {
        loop {
            if state.finished {
                return None;
            }
            let page = state
                .orchestrator
                .store
                .read_events(&state.tenant_id, &state.run_id, state.cursor, 200)
                .await;
            let frames = match page {
                Ok(frames) => {
                    state.consecutive_errors = 0;
                    frames
                }
                Err(error) => {
                    state.consecutive_errors += 1;
                    if state.consecutive_errors >= MAX_CONSECUTIVE_READ_ERRORS {
                        tracing::warn!(%error, run_id = %state.run_id, "reading events keeps failing; ending the stream (the client can resume with Last-Event-ID)");
                        return None;
                    }
                    tracing::debug!(%error, run_id = %state.run_id, "reading events failed; retrying");
                    tokio::time::sleep(state.poll_interval * state.consecutive_errors).await;
                    continue;
                }
            };
            if let Some(last) = frames.last() {
                state.cursor = last.id;
                if frames.iter().any(|frame| frame.event_type.is_terminal()) {
                    state.finished = true;
                }
                let events: Vec<Result<Event, Infallible>> = frames.iter().map(|frame| Ok(sse_event_for(frame))).collect();
                return Some((stream::iter(events), state));
            }
            let status = match state.orchestrator.load_run(&state.tenant_id, &state.run_id).await {
                Ok(Some(stored)) => Some(stored.state.status),
                Ok(None) => return None,
                Err(error) => {
                    tracing::debug!(%error, run_id = %state.run_id, "loading the run failed; following on");
                    None
                }
            };
            match status {
                // An ended run's stream ends on its `complete`/`error` frame; wait
                // (bounded) for it in case it is not readable yet.
                Some(status) if status.is_terminal() => {
                    state.grace_polls += 1;
                    if state.grace_polls > MAX_GRACE_POLLS {
                        tracing::warn!(run_id = %state.run_id, "the run ended but its last frame never became readable");
                        return None;
                    }
                }
                // A parked run: one last read for frames committed with the parking.
                Some(status) if status.is_settled() => {
                    state.finished = true;
                    let last = state
                        .orchestrator
                        .store
                        .read_events(&state.tenant_id, &state.run_id, state.cursor, 200)
                        .await
                        .unwrap_or_default();
                    if let Some(frame) = last.last() {
                        state.cursor = frame.id;
                    }
                    let events: Vec<Result<Event, Infallible>> = last.iter().map(|frame| Ok(sse_event_for(frame))).collect();
                    return Some((stream::iter(events), state));
                }
                _ => {}
            }
            tokio::time::sleep(state.poll_interval).await;
        }
    })
    .flatten()
}
