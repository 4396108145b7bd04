//! The Lambda Runtime API as a test double of the Lambda service speaks it
//! to a function under test: the headers of a `next` invocation. Shared by
//! the `step` function's kill test and its cold-start bench, which each run
//! the real binary against an emulated Runtime API.

use axum::http::{HeaderMap, HeaderValue};

/// The function ARN every emulated invocation names.
pub const EMULATED_FUNCTION_ARN: &str = "arn:aws:lambda:us-east-1:123456789012:function:step";

/// The headers of a `GET /2018-06-01/runtime/invocation/next` answer: the
/// request id, the deadline (Unix milliseconds), the function's ARN and a
/// trace id.
pub fn next_invocation_headers(request_id: &str, deadline_unix_millis: u128) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let value = |text: &str| {
        HeaderValue::from_str(text)
            .unwrap_or_else(|error| panic!("`{text}` is no header value: {error}"))
    };
    headers.insert("lambda-runtime-aws-request-id", value(request_id));
    headers.insert(
        "lambda-runtime-deadline-ms",
        value(&deadline_unix_millis.to_string()),
    );
    headers.insert(
        "lambda-runtime-invoked-function-arn",
        value(EMULATED_FUNCTION_ARN),
    );
    headers.insert(
        "lambda-runtime-trace-id",
        value("Root=1-00000000-000000000000000000000000"),
    );
    headers
}
