//! The outbound guard against a table of targets it must refuse, one it must
//! allow, and a real local HTTP server (allow-listed, as for local
//! development) that redirects to loopback, answers too much, or too late.
//! Name resolution is a test double mapping test hostnames to addresses.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use baton_outbound::address::AddressClass;
use baton_outbound::{
    GuardedClient, OutboundPolicy, OutboundRefusal, ResolveError, Resolver, check,
};
use reqwest::Method;
use reqwest::header::HeaderMap;

/// Test double for DNS: fixed answers per hostname.
struct FixedResolver(BTreeMap<&'static str, Vec<IpAddr>>);

#[async_trait]
impl Resolver for FixedResolver {
    async fn resolve(&self, host: &str, _port: u16) -> Result<Vec<IpAddr>, ResolveError> {
        self.0
            .get(host)
            .cloned()
            .ok_or_else(|| ResolveError(format!("no test record for {host}")))
    }
}

fn resolver() -> FixedResolver {
    let ip = |text: &str| text.parse::<IpAddr>().unwrap();
    FixedResolver(BTreeMap::from([
        ("public.test", vec![ip("93.184.216.34")]),
        ("internal.test", vec![ip("10.0.0.1")]),
        ("localhost", vec![ip("127.0.0.1")]),
        ("mixed.test", vec![ip("93.184.216.34"), ip("10.0.0.2")]),
        ("metadata.test", vec![ip("169.254.169.254")]),
        ("v6-mapped.test", vec![ip("::ffff:192.168.0.1")]),
    ]))
}

#[tokio::test]
async fn refused_targets_are_refused_with_the_reason() {
    use AddressClass::*;
    let policy = OutboundPolicy::default();
    let resolver = resolver();
    let address = |class| Some(class);
    let cases: Vec<(&str, Option<AddressClass>)> = vec![
        (
            "https://169.254.169.254/latest/meta-data/",
            address(Metadata),
        ),
        ("https://metadata.test/", address(Metadata)),
        ("https://[fd00:ec2::254]/", address(Metadata)),
        ("https://100.100.100.200/", address(Metadata)),
        ("https://[::ffff:127.0.0.1]/", address(Loopback)),
        ("https://127.0.0.1/", address(Loopback)),
        ("https://127.1.2.3:8443/", address(Loopback)),
        ("https://2130706433/", address(Loopback)),
        ("https://localhost/", address(Loopback)),
        ("https://[::1]/", address(Loopback)),
        ("https://[64:ff9b::7f00:1]/", address(Loopback)),
        ("https://10.0.0.1/", address(Private)),
        ("https://internal.test/", address(Private)),
        ("https://mixed.test/", address(Private)),
        ("https://v6-mapped.test/", address(Private)),
        ("https://172.16.5.4/", address(Private)),
        ("https://192.168.1.1/", address(Private)),
        ("https://[2002:c0a8:0101::1]/", address(Private)),
        ("https://100.64.0.1/", address(SharedCgnat)),
        ("https://169.254.10.10/", address(LinkLocal)),
        ("https://[fe80::1]/", address(LinkLocal)),
        ("https://[fd12:3456::1]/", address(UniqueLocal)),
        ("https://224.0.0.1/", address(Multicast)),
        ("https://[ff02::1]/", address(Multicast)),
        ("https://0.0.0.0/", address(Unspecified)),
        ("https://[::]/", address(Unspecified)),
        ("https://255.255.255.255/", address(Broadcast)),
        ("https://192.0.2.7/", address(Documentation)),
        ("https://198.18.0.1/", address(Benchmarking)),
        ("https://240.0.0.1/", address(Reserved)),
        ("http://public.test/", None),
        ("ftp://public.test/", None),
        ("file:///etc/passwd", None),
        ("https://user:secret@public.test/", None),
        ("https://unknown.test/", None),
        ("not a url", None),
    ];
    assert!(cases.len() >= 15);
    for (url, expected_class) in cases {
        let refusal = check(url, &policy, &resolver)
            .await
            .expect_err(&format!("{url} must be refused"));
        match (expected_class, &refusal) {
            (Some(expected), OutboundRefusal::Address { class, .. }) => {
                assert_eq!(*class, expected, "{url}: {refusal}");
            }
            (Some(expected), other) => {
                panic!("{url}: expected a {expected:?} refusal, got {other}")
            }
            (None, OutboundRefusal::Address { .. }) => {
                panic!("{url}: refused for its address: {refusal}")
            }
            (None, _) => {}
        }
    }
    let scheme = check("http://public.test/", &policy, &resolver).await;
    assert_eq!(
        scheme,
        Err(OutboundRefusal::HttpNotAllowed("public.test".into()))
    );
}

#[tokio::test]
async fn a_public_https_target_is_allowed_and_pinned_to_its_checked_address() {
    let checked = check(
        "https://public.test/tools/search?q=1",
        &OutboundPolicy::default(),
        &resolver(),
    )
    .await
    .unwrap();
    assert_eq!(checked.address, "93.184.216.34:443".parse().unwrap());
    assert_eq!(checked.host, "public.test");
    assert!(!checked.allow_listed);
}

/// A local server standing in for a tool endpoint under development.
async fn local_server() -> u16 {
    let app = Router::new()
        .route("/ok", get(|| async { "tool result" }))
        .route(
            "/to-loopback",
            get(|| async {
                (
                    StatusCode::FOUND,
                    [(header::LOCATION, "https://localhost/admin")],
                )
                    .into_response()
            }),
        )
        .route(
            "/to-ok",
            get(|| async { (StatusCode::FOUND, [(header::LOCATION, "/ok")]).into_response() }),
        )
        .route("/large", get(|| async { "x".repeat(4096) }))
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(2)).await;
                "late"
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    port
}

#[tokio::test]
async fn redirects_are_checked_again_and_responses_are_capped() {
    let port = local_server().await;
    let policy = OutboundPolicy {
        max_response_bytes: 1024,
        timeout: Duration::from_millis(500),
        ..OutboundPolicy::default()
    }
    .with_http_allowed_hosts("127.0.0.1");
    let client = GuardedClient::new(policy, Arc::new(resolver()));
    let get = |path: &str| {
        let url = format!("http://127.0.0.1:{port}{path}");
        let client = &client;
        async move { client.send(Method::GET, &url, HeaderMap::new(), None).await }
    };
    let fetched = get("/ok").await.unwrap();
    assert_eq!(fetched.status, 200);
    assert_eq!(fetched.body, b"tool result");
    let followed = get("/to-ok").await.unwrap();
    assert_eq!(followed.body, b"tool result");
    assert!(followed.final_url.as_str().ends_with("/ok"));
    match get("/to-loopback").await {
        Err(OutboundRefusal::Address { host, class, .. }) => {
            assert_eq!(host, "localhost");
            assert_eq!(class, AddressClass::Loopback);
        }
        other => panic!("a redirect to loopback must be refused: {other:?}"),
    }
    assert_eq!(
        get("/large").await.unwrap_err(),
        OutboundRefusal::ResponseTooLarge(1024)
    );
    assert_eq!(
        get("/slow").await.unwrap_err(),
        OutboundRefusal::Timeout(Duration::from_millis(500))
    );
    // The same server without the allow-list: http and loopback are refused.
    let strict = GuardedClient::new(OutboundPolicy::default(), Arc::new(resolver()));
    assert!(matches!(
        strict
            .send(
                Method::GET,
                &format!("http://127.0.0.1:{port}/ok"),
                HeaderMap::new(),
                None
            )
            .await,
        Err(OutboundRefusal::HttpNotAllowed(_))
    ));
}
