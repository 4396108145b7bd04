//! The one mapping of a failed AWS SDK call, for every adapter of the
//! crate (DynamoDB, SQS, EventBridge Scheduler, EventBridge): the SDK's
//! whole report (request ids, resource names) goes to the log; what the
//! caller, and so a tenant, reads is the service, the operation, the
//! service's error code and its message with every ARN and account id
//! taken out. A failure is retryable when asking again can help (the call
//! timed out or never arrived, the service throttled or failed inside),
//! permanent otherwise (access denied, a resource missing, a request the
//! service calls invalid).

use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

/// Error codes the AWS services answer when asking again can help.
const RETRYABLE_CODES: &[&str] = &[
    "ThrottlingException",
    "Throttling",
    "ThrottledException",
    "RequestThrottled",
    "RequestThrottledException",
    "TooManyRequestsException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "LimitExceededException",
    "SlowDown",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "InternalServerError",
    "InternalServerException",
    "InternalFailure",
    "InternalError",
    "TransactionConflictException",
    "TransactionInProgressException",
    "KMSThrottlingException",
    "KMS.ThrottlingException",
    "RequestTimeout",
    "RequestTimeoutException",
    "PriorRequestNotComplete",
    "BandwidthLimitExceeded",
    "OverLimit",
    // A transaction cancelled by a rival write, and a condition a rival
    // write broke: the caller reads again and retries (the callers that
    // treat these as an answer look at them before this mapping).
    "TransactionCanceledException",
    "ConditionalCheckFailedException",
];

/// A failed call, as the caller may read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CallFailure {
    /// `DynamoDB Query failed (ThrottlingException)`, then the service's
    /// message, scrubbed, for a permanent failure.
    pub(crate) text: String,
    /// The service's error code, or what kind of failure it was when the
    /// service never answered.
    pub(crate) code: String,
    /// The service's message, scrubbed.
    pub(crate) message: Option<String>,
    pub(crate) retryable: bool,
}

/// The operation an SDK error type belongs to (`QueryError` → `Query`).
fn operation_of<E>() -> &'static str {
    let name = std::any::type_name::<E>();
    let last = name.rsplit("::").next().unwrap_or(name);
    last.strip_suffix("Error").unwrap_or(last)
}

/// Maps `error` of a call to `service` (logged whole at `warn`).
pub(crate) fn call_failure<E, R>(service: &str, error: &SdkError<E, R>) -> CallFailure
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    let operation = operation_of::<E>();
    tracing::warn!(service, operation, error = %DisplayErrorContext(error), "an AWS call failed");
    let (code, message, answered) = match error {
        SdkError::ServiceError(failure) => (
            failure
                .err()
                .code()
                .unwrap_or("an unnamed service error")
                .to_string(),
            failure.err().message().map(scrub),
            true,
        ),
        SdkError::TimeoutError(_) => ("timed out".to_string(), None, false),
        SdkError::DispatchFailure(_) => ("not reached".to_string(), None, false),
        SdkError::ResponseError(_) => ("an unreadable response".to_string(), None, false),
        SdkError::ConstructionFailure(_) => {
            ("a request that could not be built".to_string(), None, true)
        }
        _ => ("an unknown failure".to_string(), None, false),
    };
    let retryable = !answered || RETRYABLE_CODES.contains(&code.as_str());
    let mut text = format!("{service} {operation} failed ({code})");
    if let (false, Some(message)) = (retryable, &message) {
        text.push_str(": ");
        text.push_str(message);
    }
    CallFailure {
        text,
        code,
        message,
        retryable,
    }
}

/// `text` with every ARN (`arn:…` up to a space or a quote) as `<arn>` and
/// every run of exactly twelve digits (an account id, also inside a queue
/// URL) as `<account>`.
pub(crate) fn scrub(text: &str) -> String {
    let mut scrubbed = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("arn:") {
        scrubbed.push_str(&rest[..at]);
        let end = rest[at..]
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ',' | ')' | ']'))
            .map_or(rest.len(), |length| at + length);
        scrubbed.push_str("<arn>");
        rest = &rest[end..];
    }
    scrubbed.push_str(rest);
    let mut out = String::with_capacity(scrubbed.len());
    let mut digits = String::new();
    for c in scrubbed.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        if digits.len() == 12 {
            out.push_str("<account>");
        } else {
            out.push_str(&digits);
        }
        digits.clear();
        out.push(c);
    }
    out.pop();
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code

    use super::*;
    use aws_sdk_dynamodb::operation::query::QueryError;
    use aws_smithy_runtime_api::http::{Response, StatusCode};
    use aws_smithy_types::body::SdkBody;
    use aws_smithy_types::error::ErrorMetadata;

    fn service_error(code: &str, message: &str) -> SdkError<QueryError, Response> {
        SdkError::service_error(
            QueryError::generic(ErrorMetadata::builder().code(code).message(message).build()),
            Response::new(StatusCode::try_from(400).unwrap(), SdkBody::empty()),
        )
    }

    #[test]
    fn throttling_is_retryable_and_a_missing_resource_is_not() {
        let throttled = call_failure(
            "DynamoDB",
            &service_error("ThrottlingException", "slow down"),
        );
        assert!(throttled.retryable);
        assert_eq!(
            throttled.text,
            "DynamoDB Query failed (ThrottlingException)"
        );
        let missing = call_failure(
            "DynamoDB",
            &service_error(
                "ResourceNotFoundException",
                "Requested resource not found: Table: arn:aws:dynamodb:us-east-1:123456789012:table/runs not found",
            ),
        );
        assert!(!missing.retryable);
        assert_eq!(
            missing.text,
            "DynamoDB Query failed (ResourceNotFoundException): Requested resource not found: Table: <arn> not found"
        );
        let timed_out: SdkError<QueryError, Response> =
            SdkError::timeout_error("the call took too long");
        assert!(call_failure("DynamoDB", &timed_out).retryable);
    }

    #[test]
    fn arns_and_account_ids_are_taken_out() {
        assert_eq!(
            scrub(
                "User: arn:aws:sts::123456789012:assumed-role/x is not authorized, queue https://sqs.us-east-1.amazonaws.com/123456789012/steps (ids 1234567890123, 42)"
            ),
            "User: <arn> is not authorized, queue https://sqs.us-east-1.amazonaws.com/<account>/steps (ids 1234567890123, 42)"
        );
    }
}
