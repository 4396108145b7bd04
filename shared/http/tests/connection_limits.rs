//! The connection limits of `server::serve_with_limits`, over a real socket
//! with raw TCP clients: a client that sends nothing, or trickles its
//! headers, is disconnected after the header read timeout; headers larger
//! than the limit get a 431; a response that streams longer than the
//! timeout is not cut; after shutdown no connection is accepted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use baton_http::server::{ConnectionLimits, serve_with_limits};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const TIMEOUT: Duration = Duration::from_secs(1);

async fn start() -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let app = Router::new().route("/", get(|| async { "ok" })).route(
        "/slow",
        get(|| async {
            // A body that takes 2.5 s, past the header timeout.
            let chunks = futures_util::stream::unfold(0, |sent| async move {
                if sent == 5 {
                    return None;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
                Some((
                    Ok::<_, std::convert::Infallible>(format!("chunk{sent};")),
                    sent + 1,
                ))
            });
            axum::body::Body::from_stream(chunks)
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(serve_with_limits(
        listener,
        app,
        ConnectionLimits {
            header_read_timeout: TIMEOUT,
            max_header_bytes: 16 * 1024,
        },
        async {
            let _ = stopped.await;
        },
    ));
    (address, stop)
}

/// Reads until the server closes the connection (or 10 s pass); what it sent.
async fn read_until_closed(stream: &mut TcpStream) -> (String, Duration) {
    let started = Instant::now();
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buffer)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(read)) => received.extend_from_slice(&buffer[..read]),
            Err(_) => panic!("the server kept the connection open for 10 s"),
        }
    }
    (
        String::from_utf8_lossy(&received).into_owned(),
        started.elapsed(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_silent_client_is_disconnected_after_the_header_timeout() {
    let (address, _stop) = start().await;
    let mut silent = TcpStream::connect(address).await.unwrap();
    let (received, after) = read_until_closed(&mut silent).await;
    assert!(
        !received.contains("200 OK"),
        "nothing was served: {received}"
    );
    assert!(after >= TIMEOUT / 2, "closed after {after:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_trickling_its_headers_is_disconnected() {
    let (address, _stop) = start().await;
    let mut slow = TcpStream::connect(address).await.unwrap();
    let request = b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Padding: aaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    let started = Instant::now();
    let mut closed = false;
    for byte in request {
        if slow.write_all(&[*byte]).await.is_err() {
            closed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        if started.elapsed() > Duration::from_secs(5) {
            break;
        }
    }
    let (received, _) = read_until_closed(&mut slow).await;
    assert!(
        closed || !received.contains("200 OK"),
        "a request trickled over {:?} was served: {received}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn headers_over_the_limit_get_431_and_a_normal_request_is_served() {
    let (address, _stop) = start().await;
    let mut large = TcpStream::connect(address).await.unwrap();
    let padding = "a".repeat(32 * 1024);
    large
        .write_all(
            format!("GET / HTTP/1.1\r\nHost: localhost\r\nX-Padding: {padding}\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
    let (received, _) = read_until_closed(&mut large).await;
    assert!(
        received.starts_with("HTTP/1.1 431"),
        "headers over the limit: {}",
        received.lines().next().unwrap_or_default()
    );

    let mut normal = TcpStream::connect(address).await.unwrap();
    normal
        .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let (received, _) = read_until_closed(&mut normal).await;
    assert!(received.starts_with("HTTP/1.1 200"), "{received}");
    assert!(received.ends_with("ok"), "{received}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_response_streaming_past_the_timeout_is_not_cut() {
    let (address, _stop) = start().await;
    let mut client = TcpStream::connect(address).await.unwrap();
    client
        .write_all(b"GET /slow HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let (received, took) = read_until_closed(&mut client).await;
    assert!(took > TIMEOUT, "the body took {took:?}");
    for chunk in 0..5 {
        assert!(received.contains(&format!("chunk{chunk};")), "{received}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn after_shutdown_no_connection_is_accepted() {
    let (address, stop) = start().await;
    stop.send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    if let Ok(mut stream) = TcpStream::connect(address).await {
        let _ = stream
            .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .await;
        let (received, _) = read_until_closed(&mut stream).await;
        assert!(
            !received.contains("200"),
            "served after shutdown: {received}"
        );
    }
}
