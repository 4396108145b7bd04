//! The sample events in `events/lambda/` (for `cargo lambda invoke
//! --data-file`) are real Lambda HTTP events that reach the router's routes
//! (the API's, the run viewer's page at `/`, the A2A agent card).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::Path;

#[test]
fn sample_http_events_parse_as_lambda_requests_for_api_routes() {
    let directory = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../events/lambda");
    let mut checked = 0;
    for entry in std::fs::read_dir(&directory).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !(name.starts_with("api-") || name.starts_with("stream-")) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let request =
            lambda_http::request::from_str(&text).unwrap_or_else(|error| panic!("{name}: {error}"));
        if name == "api-agent-card.json" {
            // The A2A agent card: public, at the well-known path.
            assert_eq!(
                request.uri().path(),
                "/.well-known/agent-card.json",
                "{name}"
            );
            assert!(!request.headers().contains_key("authorization"), "{name}");
            checked += 1;
            continue;
        }
        if name == "api-viewer-page.json" {
            // The run viewer's page: served beside the API, without a token.
            assert_eq!(request.uri().path(), "/", "{name}");
            assert!(!request.headers().contains_key("authorization"), "{name}");
            checked += 1;
            continue;
        }
        assert!(
            request.uri().path().starts_with("/api/v1/flex/"),
            "{name}: {}",
            request.uri()
        );
        assert!(request.headers().contains_key("authorization"), "{name}");
        checked += 1;
    }
    assert!(checked >= 5, "{checked} samples checked");
}
