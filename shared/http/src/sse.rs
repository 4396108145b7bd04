//! SSE over HTTP: the run's frames from the one follower
//! (`baton_runtime::services::follow`), framed by axum's `Sse` with its `KeepAlive`
//! comment heartbeats while the run is quiet. Each frame's event carries
//! the same lines as `EventFrame::to_sse` (the CLI's `--format sse`; a test
//! keeps the two equal). Dropping the response body (the client went away)
//! stops the reads.
//! `?dialect=hooks` renders the same frames as hook events
//! (`baton_core::wire::hooks`): `event:` the hook name, `data:` its line, `id:`
//! the frame's sequence (so `Last-Event-ID` resumes as usual).

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use baton_core::wire::event::EventFrame;
use baton_core::wire::hooks::HookRenderer;
use futures_util::Stream;
use futures_util::stream::{self, StreamExt};

/// The text of the comment sent after every heartbeat interval of silence:
/// keeps proxies and clients from timing the stream out.
const HEARTBEAT_COMMENT: &str = "keep-alive";

/// A frame as an SSE event: `id` (not for a child's frame relayed in its
/// parent's stream), `event` its type, `data` the frame's JSON.
fn frame_event(frame: &EventFrame) -> Event {
    let data = serde_json::to_string(frame).unwrap_or_else(|_| "{}".to_string());
    let event = Event::default().event(frame.event_type.as_str()).data(data);
    if frame.forwarded {
        event
    } else {
        event.id(frame.id.to_string())
    }
}

/// A `text/event-stream` response relaying `frames`, with a heartbeat
/// comment after every `heartbeat` of silence; it ends with the frames.
pub fn sse_response(
    frames: impl Stream<Item = EventFrame> + Send + 'static,
    heartbeat: Duration,
) -> Response {
    sse_events_response(frames.map(|frame| frame_event(&frame)), heartbeat)
}

/// How a stream renders its frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// The frames themselves.
    Frames,
    /// As hook events (`prompt:submit` … `orchestrator:complete`).
    Hooks,
}

impl Dialect {
    /// `?dialect=`: `frames` (default) or `hooks`.
    /// An unknown one is a 400 naming the parameter.
    pub fn parse(value: Option<&str>) -> Result<Self, crate::error::ApiError> {
        match value {
            None | Some("frames") => Ok(Dialect::Frames),
            Some("hooks") => Ok(Dialect::Hooks),
            Some(other) => Err(crate::error::ApiError::new(
                axum::http::StatusCode::BAD_REQUEST,
                "invalid_dialect",
                format!("dialect `{other}`: `frames` or `hooks`"),
            )
            .with_details(serde_json::json!({"parameter": "dialect"}))),
        }
    }
}

fn hook_event(frame_id: u64, run_id: &str, event: &baton_core::wire::hooks::HookEvent) -> Event {
    Event::default()
        .id(frame_id.to_string())
        .event(event.event)
        .data(event.to_line(frame_id, run_id))
}

/// [`sse_response`] in `dialect`. In hooks, a model node's `node_start`
/// gets its instructions from the run's plan (`runs`, for `tenant_id`).
pub fn sse_response_in(
    frames: impl Stream<Item = EventFrame> + Send + 'static,
    heartbeat: Duration,
    dialect: Dialect,
    runs: std::sync::Arc<baton_runtime::services::RunService>,
    tenant_id: &str,
) -> Response {
    if dialect == Dialect::Frames {
        return sse_response(frames, heartbeat);
    }
    let tenant_id = tenant_id.to_string();
    let frames = frames.then(move |mut frame| {
        let (runs, tenant_id) = (runs.clone(), tenant_id.clone());
        async move {
            runs.fill_model_instructions(&tenant_id, &mut frame).await;
            frame
        }
    });
    let mut renderer = HookRenderer::default();
    let mut last: Option<(u64, String)> = None;
    let events = frames
        .map(Some)
        .chain(stream::once(async { None }))
        .flat_map(move |frame| {
            let events: Vec<Event> = match frame {
                Some(frame) => {
                    last = Some((frame.id, frame.run_id.clone()));
                    renderer
                        .render(&frame)
                        .iter()
                        .map(|event| hook_event(frame.id, &frame.run_id, event))
                        .collect()
                }
                // The frames ended without an ending (the run waits for a
                // person): the renderer ends the hook stream unless it did.
                None => match (renderer.finish_unended(), last.as_ref()) {
                    (Some(event), Some((id, run_id))) => vec![hook_event(*id, run_id, &event)],
                    _ => Vec::new(),
                },
            };
            stream::iter(events)
        });
    sse_events_response(events, heartbeat)
}

/// A `text/event-stream` response of events, with keep-alive comments.
pub(crate) fn sse_events_response(
    events: impl Stream<Item = Event> + Send + 'static,
    heartbeat: Duration,
) -> Response {
    Sse::new(events.map(Ok::<_, Infallible>))
        .keep_alive(KeepAlive::new().interval(heartbeat).text(HEARTBEAT_COMMENT))
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::wire::event::{EventDraft, EventType};

    async fn body_of(response: Response) -> String {
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    #[tokio::test]
    async fn the_http_stream_carries_exactly_the_lines_of_to_sse() {
        let frame = EventDraft::new(EventType::NodeStart, "2026-01-01T00:00:00Z", 1)
            .node("node_1")
            .payload(serde_json::json!({"a": 1}))
            .into_frame(7, "run-1", "corr-1");
        let mut relayed = frame.clone();
        relayed.forwarded = true;
        let response = sse_response(
            stream::iter(vec![frame.clone(), relayed.clone()]),
            Duration::from_secs(15),
        );
        assert_eq!(
            response.headers()[axum::http::header::CONTENT_TYPE],
            "text/event-stream"
        );
        let body = body_of(response).await;
        let expected = format!("{}{}", frame.to_sse(), relayed.to_sse());
        let normalise = |text: &str| {
            let mut lines: Vec<String> = Vec::new();
            for event in text.split("\n\n").filter(|event| !event.is_empty()) {
                let mut fields: Vec<&str> = event.lines().collect();
                fields.sort_unstable();
                lines.push(fields.join("\n"));
            }
            lines
        };
        assert_eq!(normalise(&body), normalise(&expected), "{body}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_stream_sends_keep_alive_comments() {
        let quiet = stream::pending::<EventFrame>();
        let response = sse_response(quiet, Duration::from_secs(1));
        let mut body = response.into_body().into_data_stream();
        let first = tokio::time::timeout(Duration::from_secs(5), body.next())
            .await
            .ok()
            .flatten()
            .and_then(Result::ok)
            .unwrap_or_default();
        assert_eq!(String::from_utf8_lossy(&first), ": keep-alive\n\n");
    }
}
