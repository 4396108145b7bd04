//! Workers: receive step messages, perform them, acknowledge or release.
//! `LocalRunner` drives the embedded default (in-memory queue) until a run
//! settles, which is what `baton run` does.

use std::sync::Arc;
use std::time::Duration;

use baton_core::instant::Instant;
use baton_core::run::RunStatus;
use tokio::task::JoinSet;

use crate::error::RuntimeError;
use crate::memory::InMemoryStepQueue;
use crate::ports::{ReceivedStep, StepQueue};
use crate::services::{RunService, StepOutcome, StepService};

/// Deliveries after which a failing message is dropped (the SQS DLQ bound).
pub const MAX_RECEIVES_BEFORE_DEAD_LETTER: u32 = 5;

/// Performs one received message and acknowledges or releases it.
pub async fn process_received_step(
    steps: &StepService,
    queue: &dyn StepQueue,
    received: ReceivedStep,
) -> Result<StepOutcome, RuntimeError> {
    let outcome = steps.handle(&received.message).await;
    match &outcome {
        Ok(StepOutcome::Busy { retry_after }) => {
            queue.release(&received.receipt, *retry_after).await?;
        }
        Ok(StepOutcome::NotYetDue { remaining }) => {
            queue.send_delayed(&received.message, *remaining).await?;
            queue.acknowledge(&received.receipt).await?;
        }
        Ok(_) => queue.acknowledge(&received.receipt).await?,
        Err(error)
            if error.is_retryable() && received.receive_count < MAX_RECEIVES_BEFORE_DEAD_LETTER =>
        {
            tracing::warn!(%error, receive_count = received.receive_count, "step failed; releasing for redelivery");
            let backoff = Duration::from_millis(50 * u64::from(received.receive_count));
            queue.release(&received.receipt, backoff).await?;
        }
        Err(error) => {
            tracing::error!(%error, message_id = %received.message.message_id, "step failed for good; dropping the message");
            queue.acknowledge(&received.receipt).await?;
        }
    }
    outcome
}

/// Receives and performs steps until `shutdown` resolves (`baton serve`,
/// long-running workers). Messages are processed concurrently.
pub async fn run_worker_until(
    steps: Arc<StepService>,
    queue: Arc<dyn StepQueue>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    const MAX_STEPS_IN_FLIGHT: usize = 32;
    tokio::pin!(shutdown);
    let mut in_progress = JoinSet::new();
    loop {
        while in_progress.try_join_next().is_some() {}
        if in_progress.len() >= MAX_STEPS_IN_FLIGHT {
            in_progress.join_next().await;
            continue;
        }
        // A receive is never raced against step completions: dropping an
        // in-flight SQS receive would hide its messages until they time out.
        tokio::select! {
            _ = &mut shutdown => break,
            received = queue.receive(10, Duration::from_secs(1)) => match received {
                Ok(batch) => {
                    for step in batch {
                        let (steps, queue) = (steps.clone(), queue.clone());
                        in_progress.spawn(async move { process_received_step(&steps, queue.as_ref(), step).await });
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "receiving steps failed; retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            },
        }
    }
    while in_progress.join_next().await.is_some() {}
}

/// One record of a queue-triggered invocation.
#[derive(Debug, Clone)]
pub struct QueuedRecord {
    pub message_id: String,
    pub body: String,
    /// The queue's handle for making the record visible again early.
    pub receipt: Option<String>,
}

/// A queue-triggered invocation: its records, its deadline, and the queue
/// that can make a record visible again before its visibility timeout.
pub struct QueueBatch<'a> {
    pub records: Vec<QueuedRecord>,
    pub deadline: Option<Instant>,
    pub redelivery: Option<&'a dyn StepQueue>,
}

/// A record that ran out of invocation time is visible again this soon.
pub const REDELIVER_AFTER_DEADLINE: Duration = Duration::from_secs(2);

/// One batch as a queue-triggered function receives it: `(message id, body)`
/// pairs, performed concurrently, with no deadline. See [`process_step_queue_batch`].
pub async fn process_step_batch(
    steps: &StepService,
    records: Vec<(String, String)>,
) -> Vec<String> {
    let records = records
        .into_iter()
        .map(|(message_id, body)| QueuedRecord {
            message_id,
            body,
            receipt: None,
        })
        .collect();
    process_step_queue_batch(
        steps,
        QueueBatch {
            records,
            deadline: None,
            redelivery: None,
        },
    )
    .await
}

/// Performs a batch concurrently before its deadline. Returns the ids to
/// report as failed, which the queue redelivers (and dead-letters after its
/// bound): malformed bodies, steps whose node another worker holds, steps
/// that errored, and steps that ran out of time. The last are made visible
/// again after [`REDELIVER_AFTER_DEADLINE`] instead of the queue's
/// visibility timeout (their claim was released).
pub async fn process_step_queue_batch(steps: &StepService, batch: QueueBatch<'_>) -> Vec<String> {
    let QueueBatch {
        records,
        deadline,
        redelivery,
    } = batch;
    let handled = records.into_iter().map(|record| async move {
        let QueuedRecord {
            message_id,
            body,
            receipt,
        } = record;
        let message: baton_core::run::StepMessage = match serde_json::from_str(&body) {
            Ok(message) => message,
            Err(error) => {
                tracing::error!(%message_id, %error, "step message body is not a StepMessage");
                return Some(message_id);
            }
        };
        match steps.handle_before(&message, deadline).await {
            Ok(StepOutcome::Busy { .. }) => Some(message_id),
            // A timer that came early goes back with its remaining delay
            // (a new message); without a queue to send it, it is redelivered.
            Ok(StepOutcome::NotYetDue { remaining }) => match redelivery {
                Some(queue) => match queue.send_delayed(&message, remaining).await {
                    Ok(()) => None,
                    Err(error) => {
                        tracing::warn!(%message_id, %error, "could not defer an early timer; redelivering it");
                        Some(message_id)
                    }
                },
                None => Some(message_id),
            },
            Ok(_) => None,
            Err(error @ RuntimeError::DeadlineExceeded { .. }) => {
                tracing::warn!(%message_id, %error, "step out of time; redelivering it soon");
                if let (Some(queue), Some(receipt)) = (redelivery, receipt.as_deref())
                    && let Err(release_error) =
                        queue.release(receipt, REDELIVER_AFTER_DEADLINE).await
                {
                    tracing::warn!(%message_id, %release_error, "could not shorten the visibility; it reappears after the queue's timeout");
                }
                Some(message_id)
            }
            Err(error) => {
                tracing::warn!(%message_id, %error, retryable = error.is_retryable(), "step failed; reporting it for redelivery");
                Some(message_id)
            }
        }
    });
    futures_util::future::join_all(handled)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// The embedded default's worker: one process, in-memory queue.
pub struct LocalRunner {
    pub steps: Arc<StepService>,
    pub runs: Arc<RunService>,
    pub queue: Arc<InMemoryStepQueue>,
}

impl LocalRunner {
    /// Processes messages (parallel ones concurrently) until the queue is
    /// empty. Returns how many steps ran.
    pub async fn drain(&self) -> Result<usize, RuntimeError> {
        let mut processed = 0;
        let mut in_progress = JoinSet::new();
        loop {
            if in_progress.is_empty() && self.queue.outstanding() == 0 {
                return Ok(processed);
            }
            let batch = self.queue.receive(10, Duration::ZERO).await?;
            let received_any = !batch.is_empty();
            for received in batch {
                let (steps, queue) = (self.steps.clone(), self.queue.clone());
                in_progress.spawn(async move {
                    process_received_step(&steps, queue.as_ref(), received).await
                });
            }
            if received_any {
                continue;
            }
            match in_progress.join_next().await {
                Some(joined) => {
                    processed += 1;
                    if let Ok(Err(error)) = joined
                        && !error.is_retryable()
                    {
                        tracing::error!(%error, "step failed");
                    }
                }
                // Only messages released with a delay remain: wait for them.
                None => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
    }

    /// Drains the queue and returns the run's status once nothing is left to do.
    pub async fn run_until_settled(
        &self,
        tenant_id: &str,
        run_id: &str,
    ) -> Result<RunStatus, RuntimeError> {
        self.drain().await?;
        let stored = self
            .runs
            .load(tenant_id, run_id)
            .await?
            .ok_or(RuntimeError::Store(crate::error::StoreError::RunNotFound))?;
        Ok(stored.state.status)
    }
}

/// A run submitted by another service through the ingest queue.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IngestMessage {
    /// The tenant the run belongs to (the queue's IAM policy decides who may send).
    pub tenant_id: String,
    /// The task envelope; its `idempotencyKey` makes a re-sent submission return the same run.
    pub envelope: serde_json::Value,
}

impl IngestMessage {
    /// The message in a record's body: `{tenantId, envelope}` itself, or an
    /// EventBridge event (`detail-type`, `detail`) whose `detail` is one (a
    /// rule routing events to the queue delivers the whole event).
    pub fn from_body(body: &str) -> Result<Self, serde_json::Error> {
        let value: serde_json::Value = serde_json::from_str(body)?;
        let is_event = value
            .get("detail-type")
            .is_some_and(serde_json::Value::is_string)
            && value
                .get("detail")
                .is_some_and(serde_json::Value::is_object);
        match value {
            serde_json::Value::Object(mut event) if is_event => {
                serde_json::from_value(event.remove("detail").unwrap_or_default())
            }
            other => serde_json::from_value(other),
        }
    }
}

/// The ingest function's use case: submits each record's envelope (a
/// message, or an EventBridge event carrying one as its `detail`). Returns
/// the ids to report as failed: after the queue's bound they reach its
/// dead-letter queue, so an invalid submission is kept for inspection,
/// never silently dropped.
pub async fn process_ingest_batch(
    runs: &RunService,
    records: Vec<(String, String)>,
) -> Vec<String> {
    let mut failed = Vec::new();
    for (message_id, body) in records {
        let submitted = match IngestMessage::from_body(&body) {
            Ok(message) => runs.submit(&message.tenant_id, &message.envelope).await,
            Err(error) => {
                tracing::error!(%message_id, %error, "ingest message is not {{tenantId, envelope}}");
                failed.push(message_id);
                continue;
            }
        };
        match submitted {
            Ok(run) => {
                tracing::info!(%message_id, run_id = %run.run_id, deduplicated = run.deduplicated, "ingested a run")
            }
            Err(error) => {
                tracing::error!(%message_id, %error, "ingest submission failed");
                failed.push(message_id);
            }
        }
    }
    failed
}
