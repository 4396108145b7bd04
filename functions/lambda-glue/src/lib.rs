//! `baton-lambda-glue`: what every Baton function does between the Lambda
//! runtime and a use case, written once.
//!
//! - [`run_sqs_batch_function`]: an SQS-triggered function whose handler
//!   takes `(message id, body)` pairs and returns the ids that failed; they
//!   are reported as `batchItemFailures`, so only those are redelivered
//!   (the event source mapping needs `ReportBatchItemFailures`).
//! - [`run_http_function`]: the shared router, buffered (API Gateway) or
//!   response-streamed (a function URL with `InvokeMode: RESPONSE_STREAM`).
//!
//! Invariant: no use-case logic here; a handler never sees a Lambda type.

/// One SQS record as a handler sees it.
#[cfg(feature = "sqs")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqsRecord {
    pub message_id: String,
    pub body: String,
    /// What `ChangeMessageVisibility` needs to make the record visible again soon.
    pub receipt_handle: Option<String>,
    /// `ApproximateReceiveCount`: how many times SQS delivered it (1 when absent).
    pub receive_count: u32,
}

/// One invocation's records and its deadline.
#[cfg(feature = "sqs")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqsBatch {
    pub records: Vec<SqsRecord>,
    /// When the invocation is cut off, in milliseconds since the Unix epoch.
    pub deadline_unix_millis: u64,
}

/// Runs an SQS-triggered function until the runtime stops it.
#[cfg(feature = "sqs")]
pub async fn run_sqs_batch_function<Handler, Handled>(
    handler: Handler,
) -> Result<(), lambda_runtime::Error>
where
    Handler: Fn(SqsBatch) -> Handled,
    Handled: std::future::Future<Output = Vec<String>>,
{
    use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
    use lambda_runtime::{LambdaEvent, service_fn};
    let handler = &handler;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        let batch = SqsBatch {
            records: sqs_records(event.payload),
            deadline_unix_millis: event.context.deadline,
        };
        let failed = handler(batch).await;
        let mut response = SqsBatchResponse::default();
        for message_id in failed {
            response.add_failure(message_id);
        }
        Ok::<_, lambda_runtime::Error>(response)
    }))
    .await
}

/// The records of an event; one without an id cannot be reported as
/// failed, so it is left out.
#[cfg(feature = "sqs")]
pub fn sqs_records(event: aws_lambda_events::event::sqs::SqsEvent) -> Vec<SqsRecord> {
    event
        .records
        .into_iter()
        .filter_map(|record| {
            Some(SqsRecord {
                message_id: record.message_id?,
                body: record.body.unwrap_or_default(),
                receipt_handle: record.receipt_handle,
                receive_count: record
                    .attributes
                    .get("ApproximateReceiveCount")
                    .and_then(|count| count.parse().ok())
                    .unwrap_or(1),
            })
        })
        .collect()
}

/// How an HTTP function answers.
#[cfg(feature = "http")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpResponses {
    /// Whole responses (API Gateway).
    Buffered,
    /// Streamed as written (SSE through a function URL).
    Streamed,
}

/// Serves `router` until the runtime stops it.
#[cfg(feature = "http")]
pub async fn run_http_function(
    router: baton_http::Router,
    responses: HttpResponses,
) -> Result<(), lambda_http::Error> {
    match responses {
        HttpResponses::Buffered => lambda_http::run(router).await,
        HttpResponses::Streamed => lambda_http::run_with_streaming_response(router).await,
    }
}

#[cfg(all(test, feature = "sqs"))]
mod tests {
    use super::*;

    #[test]
    fn records_keep_their_ids_and_bodies() {
        let event: aws_lambda_events::event::sqs::SqsEvent =
            serde_json::from_value(serde_json::json!({
                "Records": [
                    {"messageId": "a", "body": "{}"},
                    {"messageId": "b", "body": "{}", "attributes": {"ApproximateReceiveCount": "3"}},
                    {"body": "no id"}
                ]
            }))
            .unwrap_or_default();
        assert_eq!(
            sqs_records(event),
            vec![
                SqsRecord {
                    message_id: "a".into(),
                    body: "{}".into(),
                    receipt_handle: None,
                    receive_count: 1,
                },
                SqsRecord {
                    message_id: "b".into(),
                    body: "{}".into(),
                    receipt_handle: None,
                    receive_count: 3,
                }
            ]
        );
    }
}
