//! SSE over HTTP: the run's frames from the one follower
//! (`baton_runtime::follow`), encoded by the one encoder
//! (`EventFrame::to_sse`), with comment heartbeats while the run is quiet.
//! Dropping the response body (the client went away) stops the reads.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use baton_core::event::EventFrame;
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
    let frames: BoxStream<'static, EventFrame> = frames.boxed();
    let body = stream::unfold(frames, move |mut frames| async move {
        // `next()` is cancel-safe: the follower keeps its pending read.
        tokio::select! {
            frame = frames.next() => {
                let frame = frame?;
                Some((Ok::<_, Infallible>(Bytes::from(frame.to_sse())), frames))
            }
            _ = tokio::time::sleep(heartbeat) => Some((Ok(Bytes::from_static(HEARTBEAT)), frames)),
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
