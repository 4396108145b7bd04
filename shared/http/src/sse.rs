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
}

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
                Ok(frames) => frames,
                Err(error) => {
                    tracing::warn!(%error, run_id = %state.run_id, "reading events failed; ending the stream");
                    return None;
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
            let settled = match state.orchestrator.load_run(&state.tenant_id, &state.run_id).await {
                Ok(Some(stored)) => stored.state.status.is_settled(),
                Ok(None) | Err(_) => true,
            };
            if settled {
                // One last read: frames committed together with the settling status.
                state.finished = true;
                continue;
            }
            tokio::time::sleep(state.poll_interval).await;
        }
    })
    .flatten()
}
