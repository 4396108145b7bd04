//! The SQS step queue (standard queue; steps are idempotent, so
//! at-least-once delivery and reordering are harmless).
//!
//! Every message carries its tenant as `MessageGroupId`: on a standard
//! queue that makes it an SQS fair queue, where a tenant with a backlog
//! (a noisy neighbour) does not hold back the others' messages. Ordering
//! and throughput stay a standard queue's.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{MessageSystemAttributeName, SendMessageBatchRequestEntry};
use baton_core::state::run::StepMessage;
use baton_runtime::error::QueueError;
use baton_runtime::ports::{ReceivedStep, StepQueue};

/// `StepQueue` on an SQS queue URL.
#[derive(Clone)]
pub struct SqsStepQueue {
    client: Client,
    queue_url: String,
    /// How long a message this queue receives stays hidden before its
    /// holder's first heartbeat (`StepQueue::hold`): short, so a holder
    /// that dies gives it back within about one node lease, whatever the
    /// queue's own visibility timeout.
    receive_hold: Duration,
}

/// The visibility a received message starts with unless set otherwise
/// ([`SqsStepQueue::with_receive_hold`]): the default node lease.
pub const DEFAULT_RECEIVE_HOLD: Duration = Duration::from_secs(30);

/// SQS's visibility timeout is at most 12 hours.
const MAX_VISIBILITY_SECONDS: u128 = 43_200;

/// `duration` as SQS's whole seconds, rounded up (never shorter than asked).
fn visibility_seconds(duration: Duration) -> i32 {
    i32::try_from(
        duration
            .as_millis()
            .div_ceil(1_000)
            .min(MAX_VISIBILITY_SECONDS),
    )
    .unwrap_or(0)
}

fn unavailable(error: impl std::fmt::Display) -> QueueError {
    QueueError::Unavailable(error.to_string())
}

/// A failed SQS call through the crate's one mapping
/// (`sdk_errors::call_failure`): retryable as `Unavailable`, permanent as
/// `Refused`.
fn sqs_failure<E, R>(error: aws_sdk_sqs::error::SdkError<E, R>) -> QueueError
where
    E: aws_sdk_sqs::error::ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    let failure = crate::sdk_errors::call_failure("SQS", &error);
    if failure.retryable {
        QueueError::Unavailable(failure.text)
    } else {
        QueueError::Refused(failure.text)
    }
}

/// SQS's limit on one message, and on one batch's messages together.
pub const MAX_MESSAGE_BYTES: usize = 1024 * 1024;

/// What a message's `traceparent` attribute adds to its size, at most.
const TRACE_ATTRIBUTE_BYTES: usize = 128;

/// SQS delays a message by 15 minutes at most.
const MAX_DELAY_SECONDS: u64 = 900;

/// The message's `traceparent` as a `traceparent` message attribute too,
/// where tracing tools that read SQS attributes look for it (the body
/// carries it for the step itself).
fn trace_attributes(
    message: &StepMessage,
) -> Option<std::collections::HashMap<String, aws_sdk_sqs::types::MessageAttributeValue>> {
    let traceparent = message.traceparent.as_deref()?;
    let value = aws_sdk_sqs::types::MessageAttributeValue::builder()
        .data_type("String")
        .string_value(traceparent)
        .build()
        .ok()?;
    Some(std::collections::HashMap::from([(
        "traceparent".to_string(),
        value,
    )]))
}

fn delay_seconds(delay: Duration) -> i32 {
    i32::try_from(delay.as_secs().min(MAX_DELAY_SECONDS)).unwrap_or(0)
}

/// A timer's first hop: delayed until its `notBefore` (wall clock), as far
/// as SQS allows; the worker defers it again if it comes early.
fn delay_until(not_before: Option<baton_core::basics::instant::Instant>) -> Option<i32> {
    let due = not_before?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .and_then(|since| u64::try_from(since.as_millis()).ok())
        .map(baton_core::basics::instant::Instant::from_unix_millis)?;
    Some(delay_seconds(due.since(now))).filter(|seconds| *seconds > 0)
}

impl SqsStepQueue {
    /// The queue at `queue_url`, reached through `connection`.
    pub fn new(connection: &crate::AwsConnection, queue_url: impl Into<String>) -> Self {
        Self::over_client(connection.sqs_client(), queue_url)
    }

    pub(crate) fn over_client(client: Client, queue_url: impl Into<String>) -> Self {
        SqsStepQueue {
            client,
            queue_url: queue_url.into(),
            receive_hold: DEFAULT_RECEIVE_HOLD,
        }
    }

    /// Received messages start hidden for `hold` (at least a second), to
    /// be extended by their holder's heartbeat: the worker's node lease.
    #[must_use]
    pub fn with_receive_hold(mut self, hold: Duration) -> Self {
        self.receive_hold = hold.max(Duration::from_secs(1));
        self
    }

    pub fn queue_url(&self) -> &str {
        &self.queue_url
    }

    /// Parses a message body as delivered to the `step` function.
    pub fn parse_body(body: &str) -> Result<StepMessage, QueueError> {
        serde_json::from_str(body).map_err(|error| {
            QueueError::Unavailable(format!("step message body is not a StepMessage: {error}"))
        })
    }
}

#[async_trait]
impl StepQueue for SqsStepQueue {
    async fn send(&self, messages: &[StepMessage]) -> Result<(), QueueError> {
        // Batches of at most ten messages and 1 MiB together, as SQS takes
        // them; a message over 1 MiB alone is refused before it is sent.
        let mut bodies = Vec::with_capacity(messages.len());
        for message in messages {
            let body = serde_json::to_string(message).map_err(unavailable)?;
            let bytes = body.len() + message.tenant_id.len() + TRACE_ATTRIBUTE_BYTES;
            if bytes > MAX_MESSAGE_BYTES {
                return Err(QueueError::TooLarge(format!(
                    "step {} is {bytes} bytes, over SQS's {MAX_MESSAGE_BYTES}",
                    message.message_id
                )));
            }
            bodies.push((message, body, bytes));
        }
        let mut start = 0;
        while start < bodies.len() {
            let mut end = start;
            let mut batch_bytes = 0;
            while end < bodies.len()
                && end - start < 10
                && batch_bytes + bodies[end].2 <= MAX_MESSAGE_BYTES
            {
                batch_bytes += bodies[end].2;
                end += 1;
            }
            let mut request = self.client.send_message_batch().queue_url(&self.queue_url);
            for (index, (message, body, _)) in bodies[start..end].iter().enumerate() {
                request = request.entries(
                    SendMessageBatchRequestEntry::builder()
                        .id(format!("m{index}"))
                        .message_body(body.clone())
                        .message_group_id(&message.tenant_id)
                        .set_delay_seconds(delay_until(message.not_before))
                        .set_message_attributes(trace_attributes(message))
                        .build()
                        .map_err(unavailable)?,
                );
            }
            let output = request.send().await.map_err(sqs_failure)?;
            if let Some(failed) = output.failed().first() {
                return Err(QueueError::Unavailable(format!(
                    "SQS refused a step message: {} {}",
                    failed.code(),
                    failed.message().unwrap_or_default()
                )));
            }
            start = end;
        }
        Ok(())
    }

    async fn receive(
        &self,
        max_messages: usize,
        wait: Duration,
    ) -> Result<Vec<ReceivedStep>, QueueError> {
        let output = self
            .client
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(i32::try_from(max_messages.clamp(1, 10)).unwrap_or(10))
            .wait_time_seconds(i32::try_from(wait.as_secs().min(20)).unwrap_or(20))
            .visibility_timeout(visibility_seconds(self.receive_hold))
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .send()
            .await
            .map_err(sqs_failure)?;
        let mut received = Vec::new();
        for message in output.messages() {
            let (Some(body), Some(receipt)) = (message.body(), message.receipt_handle()) else {
                continue;
            };
            let receive_count = message
                .attributes()
                .and_then(|attributes| {
                    attributes.get(&MessageSystemAttributeName::ApproximateReceiveCount)
                })
                .and_then(|count| count.parse().ok())
                .unwrap_or(1);
            match Self::parse_body(body) {
                Ok(step) => received.push(ReceivedStep {
                    message: step,
                    receipt: receipt.to_string(),
                    receive_count,
                }),
                Err(error) => {
                    tracing::error!(%error, "dropping a malformed step message to the redrive path")
                }
            }
        }
        Ok(received)
    }

    async fn acknowledge(&self, receipt: &str) -> Result<(), QueueError> {
        self.client
            .delete_message()
            .queue_url(&self.queue_url)
            .receipt_handle(receipt)
            .send()
            .await
            .map_err(sqs_failure)?;
        Ok(())
    }

    async fn release(&self, receipt: &str, delay: Duration) -> Result<(), QueueError> {
        self.client
            .change_message_visibility()
            .queue_url(&self.queue_url)
            .receipt_handle(receipt)
            // SQS counts whole seconds: rounded up, so a release is never
            // visible before its delay.
            .visibility_timeout(visibility_seconds(delay))
            .send()
            .await
            .map_err(sqs_failure)?;
        Ok(())
    }

    async fn hold(&self, receipt: &str, hold: Duration) -> Result<(), QueueError> {
        self.client
            .change_message_visibility()
            .queue_url(&self.queue_url)
            .receipt_handle(receipt)
            .visibility_timeout(visibility_seconds(hold).max(1))
            .send()
            .await
            .map_err(sqs_failure)?;
        Ok(())
    }

    async fn send_delayed(&self, message: &StepMessage, delay: Duration) -> Result<(), QueueError> {
        let body = serde_json::to_string(message).map_err(unavailable)?;
        let entry = SendMessageBatchRequestEntry::builder()
            .id("m0")
            .message_body(body)
            .message_group_id(&message.tenant_id)
            .delay_seconds(delay_seconds(delay))
            .set_message_attributes(trace_attributes(message))
            .build()
            .map_err(unavailable)?;
        let output = self
            .client
            .send_message_batch()
            .queue_url(&self.queue_url)
            .entries(entry)
            .send()
            .await
            .map_err(sqs_failure)?;
        if let Some(failed) = output.failed().first() {
            return Err(QueueError::Unavailable(format!(
                "SQS refused a delayed step message: {} {}",
                failed.code(),
                failed.message().unwrap_or_default()
            )));
        }
        Ok(())
    }
}
