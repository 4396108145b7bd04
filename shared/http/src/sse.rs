//! SSE over HTTP: the run's frames from the one follower
//! (`baton_runtime::follow`), encoded by the one encoder
//! (`EventFrame::to_sse`), with comment heartbeats while the run is quiet.
//! Dropping the response body (the client went away) stops the reads.
//! `?dialect=hooks` renders the same frames as hook events
//! (`baton_core::hooks`): `event:` the hook name, `data:` its line, `id:`
//! the frame's sequence (so `Last-Event-ID` resumes as usual).

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use baton_core::event::EventFrame;
use baton_core::hooks::HookRenderer;
use futures_util::Stream;
use futures_util::stream::{self, BoxStream, StreamExt};

/// A comment line: keeps proxies and clients from timing the stream out.
const HEARTBEAT: &[u8] = b": keep-alive\n\n";

/// A `text/event-stream` response relaying `frames`, with a heartbeat
/// comment after every `heartbeat` of silence; it ends with the frames.
pub fn sse_response(
    frames: impl Stream<Item = EventFrame> + Send + 'static,
    heartbeat: Duration,
) -> Response {
    sse_bytes_response(frames.map(|frame| Bytes::from(frame.to_sse())), heartbeat)
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
    pub fn parse(value: Option<&str>) -> Result<Self, String> {
        match value {
            None | Some("frames") => Ok(Dialect::Frames),
            Some("hooks") => Ok(Dialect::Hooks),
            Some(other) => Err(format!("dialect `{other}`: `frames` or `hooks`")),
        }
    }
}

fn hook_sse(frame_id: u64, run_id: &str, event: &baton_core::hooks::HookEvent) -> Bytes {
    Bytes::from(format!(
        "id: {frame_id}\nevent: {}\ndata: {}\n\n",
        event.event,
        event.to_line(frame_id, run_id)
    ))
}

/// [`sse_response`] in `dialect`.
pub fn sse_response_in(
    frames: impl Stream<Item = EventFrame> + Send + 'static,
    heartbeat: Duration,
    dialect: Dialect,
) -> Response {
    if dialect == Dialect::Frames {
        return sse_response(frames, heartbeat);
    }
    let mut renderer = HookRenderer::default();
    let mut last: Option<(u64, String)> = None;
    let events = frames
        .map(Some)
        .chain(stream::once(async { None }))
        .filter_map(move |frame| {
            let bytes: Vec<Bytes> = match frame {
                Some(frame) => {
                    last = Some((frame.id, frame.run_id.clone()));
                    renderer
                        .render(&frame)
                        .iter()
                        .map(|event| hook_sse(frame.id, &frame.run_id, event))
                        .collect()
                }
                // The frames ended without an ending (the run waits for a
                // person): the renderer ends the hook stream unless it did.
                None => match (renderer.finish_unended(), last.as_ref()) {
                    (Some(event), Some((id, run_id))) => vec![hook_sse(*id, run_id, &event)],
                    _ => Vec::new(),
                },
            };
            let joined: Vec<u8> = bytes.concat();
            async move { (!joined.is_empty()).then(|| Bytes::from(joined)) }
        });
    sse_bytes_response(events, heartbeat)
}

/// A `text/event-stream` response of ready-made event bytes, with heartbeats.
fn sse_bytes_response(
    events: impl Stream<Item = Bytes> + Send + 'static,
    heartbeat: Duration,
) -> Response {
    let events: BoxStream<'static, Bytes> = events.boxed();
    let body = stream::unfold(events, move |mut events| async move {
        // `next()` is cancel-safe: the follower keeps its pending read.
        tokio::select! {
            bytes = events.next() => Some((Ok::<_, Infallible>(bytes?), events)),
            _ = tokio::time::sleep(heartbeat) => Some((Ok(Bytes::from_static(HEARTBEAT)), events)),
        }
    });
    let mut response = Body::from_stream(body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}
