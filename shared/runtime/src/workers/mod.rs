//! Workers: receive step messages, perform them, acknowledge or release.
//! `LocalRunner` drives the embedded default (in-memory queue) until a run
//! settles, which is what `baton run` does.

use std::sync::Arc;
use std::time::Duration;

use baton_core::basics::instant::Instant;
use baton_core::state::run::RunStatus;
use tokio::task::JoinSet;

use crate::error::RuntimeError;
use crate::memory::InMemoryStepQueue;
use crate::ports::{ReceivedStep, StepQueue};
use crate::services::{RunService, StepOutcome, StepService};

mod ingest;
mod schedule_keeper;

pub use ingest::{IngestMessage, ScheduleFireMessage, process_ingest_batch};
pub use schedule_keeper::{SCHEDULE_TICK, keep_schedules_until};

pub use crate::queue::disposition::{
    MAX_RECEIVES_BEFORE_DEAD_LETTER, REDELIVER_AFTER_DEADLINE, StepDisposition, step_disposition,
};

/// Performs one received message and does with it what
/// [`step_disposition`] says, holding the message hidden while the step
/// runs ([`holding_message`], one node lease at a time). There is no
/// dead-letter queue behind a long-running worker's in-memory queue: a
/// message failed for good ends its run (`give_up`) and is removed; a
/// message whose run could not even be ended is released again, never
/// acknowledged (on SQS its redrive policy then moves it to the
/// dead-letter queue, which the sweeper reads).
pub async fn process_received_step(
    steps: &StepService,
    queue: &dyn StepQueue,
    received: ReceivedStep,
) -> Result<StepOutcome, RuntimeError> {
    // Boxed: a worker's task holds this future for its step's whole life,
    // and inline it would keep room for the message twice more.
    Box::pin(process_received_step_holding(
        steps,
        queue,
        received,
        Some(steps.message_hold()),
    ))
    .await
}

/// [`process_received_step`], the message held for `hold` at a time
/// while its step runs, or not at all (`None`: the embedded runner's
/// in-memory queue, whose messages die with the process that holds them).
async fn process_received_step_holding(
    steps: &StepService,
    queue: &dyn StepQueue,
    received: ReceivedStep,
    hold: Option<Duration>,
) -> Result<StepOutcome, RuntimeError> {
    // Bounded like a Lambda invocation's step: a call that hangs ends on
    // its own, and the step is delivered again.
    // Boxed: `holding_message` holds its work twice (argument and pinned
    // local), and this future lives as long as its step.
    let step = Box::pin(caught(
        steps.handle_before(&received.message, steps.step_deadline()),
    ));
    let outcome = match hold {
        Some(hold) => holding_message(queue, &received.receipt, hold, false, step).await,
        None => step.await,
    };
    let disposition = step_disposition(&outcome, received.receive_count);
    log_disposition(
        &outcome,
        disposition,
        &received.message.message_id,
        received.receive_count,
    );
    let disposition = if disposition == StepDisposition::DeadLetter
        && !Box::pin(give_up(
            steps,
            &received.message,
            &outcome,
            received.receive_count,
        ))
        .await
    {
        // The run could not be ended: the message stays, to try again.
        StepDisposition::Release {
            after: REDELIVER_AFTER_DEADLINE,
        }
    } else {
        disposition
    };
    match disposition {
        StepDisposition::Acknowledge | StepDisposition::DeadLetter => {
            crate::crash_points::reached(
                crate::crash_points::CrashPoint::AfterSendBeforeAcknowledge,
            );
            queue.acknowledge(&received.receipt).await?;
        }
        StepDisposition::Release { after } => queue.release(&received.receipt, after).await?,
        StepDisposition::Defer { remaining } => {
            queue.send_delayed(&received.message, remaining).await?;
            queue.acknowledge(&received.receipt).await?;
        }
    }
    outcome
}

/// Runs `work` while keeping the received message `receipt` hidden, `hold`
/// at a time, renewed every third of it (the node lease's heartbeat
/// period): a holder that dies gives its message back within one `hold`,
/// whatever the queue's own visibility timeout. `at_once`: the first hold
/// is asked for right away (a Lambda's records arrive hidden for the
/// queue's whole visibility timeout); otherwise the receive itself set it.
/// A failed renewal is logged and tried again at the next beat.
pub async fn holding_message<T>(
    queue: &dyn StepQueue,
    receipt: &str,
    hold: Duration,
    at_once: bool,
    work: impl std::future::Future<Output = T>,
) -> T {
    let heartbeat = renew_hold_forever(queue, receipt, hold, at_once);
    tokio::pin!(work);
    tokio::select! {
        biased;
        output = &mut work => output,
        never = heartbeat => match never {},
    }
}

/// The heartbeat of [`holding_message`]: never ends on its own.
async fn renew_hold_forever(
    queue: &dyn StepQueue,
    receipt: &str,
    hold: Duration,
    at_once: bool,
) -> std::convert::Infallible {
    let beat = (hold / 3).max(Duration::from_millis(10));
    let mut wait_first = !at_once;
    loop {
        if wait_first {
            tokio::time::sleep(beat).await;
        }
        wait_first = true;
        if let Err(error) = queue.hold(receipt, hold).await {
            tracing::warn!(%error, "could not keep a step message hidden; trying again at the next beat");
        }
    }
}

/// A step's outcome, its panic (a bug) turned into a step failed for good
/// (`RuntimeError::StepPanicked`): the disposition table ends its run
/// `step_failed` naming the panic, where the message would otherwise wait
/// in flight for a worker that can never finish it.
async fn caught(
    step: impl std::future::Future<Output = Result<StepOutcome, RuntimeError>>,
) -> Result<StepOutcome, RuntimeError> {
    use futures_util::FutureExt;
    match std::panic::AssertUnwindSafe(step).catch_unwind().await {
        Ok(outcome) => outcome,
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|text| (*text).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_string());
            Err(RuntimeError::StepPanicked { message })
        }
    }
}

/// Ends the run of a message failed for good (`StepService::give_up`);
/// true when the run's end is recorded (or it had ended already).
async fn give_up(
    steps: &StepService,
    message: &baton_core::state::run::StepMessage,
    outcome: &Result<StepOutcome, RuntimeError>,
    receive_count: u32,
) -> bool {
    let Err(error) = outcome else {
        return false;
    };
    match steps.give_up(message, error, receive_count).await {
        Ok(ended) => {
            tracing::error!(message_id = %message.message_id, run_id = %message.run_id, ended, "a step failed for good: its run ends step_failed");
            true
        }
        Err(give_up_error) => {
            tracing::error!(message_id = %message.message_id, run_id = %message.run_id, %give_up_error, "a step failed for good and its run could not be ended: the message goes to the dead-letter queue");
            false
        }
    }
}

/// One log line for a delivery that did not simply succeed.
fn log_disposition(
    outcome: &Result<StepOutcome, RuntimeError>,
    disposition: StepDisposition,
    message_id: &str,
    receive_count: u32,
) {
    let Err(error) = outcome else {
        return;
    };
    match disposition {
        StepDisposition::DeadLetter => {
            tracing::error!(%error, %message_id, receive_count, "step failed for good; dead-lettering the message");
        }
        StepDisposition::Release { after } => {
            tracing::warn!(%error, %message_id, receive_count, retry_in_millis = after.as_millis(), "step failed; releasing it for redelivery");
        }
        StepDisposition::Acknowledge | StepDisposition::Defer { .. } => {}
    }
}

/// How many steps one worker process keeps in flight by default
/// (`BATON_WORKER_MAX_STEPS_IN_FLIGHT`). A step waiting on a model holds
/// no thread, only its task: what bounds the work is what it waits on (a
/// provider's `maxConcurrentCalls` in the model catalog, the store's
/// connections), so this is a memory safety cap, not a throughput knob.
pub const DEFAULT_MAX_STEPS_IN_FLIGHT: usize = 10_000;

/// Receives and performs steps until `shutdown` resolves (`baton serve`,
/// long-running workers), at most [`DEFAULT_MAX_STEPS_IN_FLIGHT`] at once.
pub async fn run_worker_until(
    steps: Arc<StepService>,
    queue: Arc<dyn StepQueue>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    run_worker_with_bound(steps, queue, shutdown, DEFAULT_MAX_STEPS_IN_FLIGHT).await;
}

/// [`run_worker_until`] with at most `max_steps_in_flight` steps at once.
pub async fn run_worker_with_bound(
    steps: Arc<StepService>,
    queue: Arc<dyn StepQueue>,
    shutdown: impl std::future::Future<Output = ()>,
    max_steps_in_flight: usize,
) {
    let max_steps_in_flight = max_steps_in_flight.max(1);
    tokio::pin!(shutdown);
    let mut in_progress = JoinSet::new();
    loop {
        while in_progress.try_join_next().is_some() {}
        if in_progress.len() >= max_steps_in_flight {
            in_progress.join_next().await;
            continue;
        }
        // A receive is never raced against step completions: dropping an
        // in-flight SQS receive would hide its messages until they time out.
        tokio::select! {
            _ = &mut shutdown => break,
            received = queue.receive(10.min(max_steps_in_flight - in_progress.len()).max(1), Duration::from_secs(1)) => match received {
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
    /// How many times the queue has delivered it (SQS's
    /// `ApproximateReceiveCount`; 1 when unknown).
    pub receive_count: u32,
}

/// A queue-triggered invocation: its records, its deadline, and the queue
/// that can make a record visible again before its visibility timeout.
pub struct QueueBatch<'a> {
    pub records: Vec<QueuedRecord>,
    pub deadline: Option<Instant>,
    pub redelivery: Option<&'a dyn StepQueue>,
}

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
            receive_count: 1,
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

/// Performs a batch concurrently before its deadline and does with each
/// record what [`step_disposition`] says. Each record is held while its
/// step runs and, once done with, deleted at once (not when the whole batch
/// answers): a sibling may run for minutes after its hold has ended. Returns the ids to report as
/// failed, which the queue redelivers (and dead-letters after its bound).
/// A released record (busy node, retryable failure, out of time) is also
/// made visible again after its delay through `redelivery`, instead of
/// waiting out the queue's visibility timeout; a malformed body or a step
/// failed for good is reported failed and left to the dead-letter queue.
pub async fn process_step_queue_batch(steps: &StepService, batch: QueueBatch<'_>) -> Vec<String> {
    let QueueBatch {
        records,
        deadline,
        redelivery,
    } = batch;
    let handled = records.into_iter().map(|record| async move {
        let receipt = record.receipt.clone();
        let failed = handle_record(steps, record, deadline, redelivery).await;
        // A record done with is deleted now, not when the whole batch
        // answers: its hold ended with its step, and a sibling may run for
        // minutes (the queue's deletion of it afterwards changes nothing).
        if failed.is_none()
            && let (Some(queue), Some(receipt)) = (redelivery, receipt.as_deref())
            && let Err(error) = queue.acknowledge(receipt).await
        {
            tracing::warn!(%error, "could not delete a finished record before its batch ended; a redelivery of it is stale");
        }
        failed
    });
    futures_util::future::join_all(handled)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// One record of a batch: performed while held, then done with (`None`),
/// or its id to report failed.
async fn handle_record(
    steps: &StepService,
    record: QueuedRecord,
    deadline: Option<Instant>,
    redelivery: Option<&dyn StepQueue>,
) -> Option<String> {
    let QueuedRecord {
        message_id,
        body,
        receipt,
        receive_count,
    } = record;
    let message: baton_core::state::run::StepMessage = match serde_json::from_str(&body) {
        Ok(message) => message,
        Err(error) => {
            tracing::error!(%message_id, %error, "step message body is not a StepMessage; dead-lettering it");
            return Some(message_id);
        }
    };
    let step = caught(steps.handle_before(&message, deadline));
    let outcome = match (redelivery, receipt.as_deref()) {
        (Some(queue), Some(receipt)) => {
            holding_message(queue, receipt, steps.message_hold(), true, step).await
        }
        _ => step.await,
    };
    let disposition = step_disposition(&outcome, receive_count);
    log_disposition(&outcome, disposition, &message_id, receive_count);
    match disposition {
        // The run says why and the entry is consumed: nothing is left
        // for a redelivery to do. A run that cannot even be failed
        // leaves its message to the dead-letter queue.
        StepDisposition::DeadLetter if give_up(steps, &message, &outcome, receive_count).await => {
            None
        }
        StepDisposition::Acknowledge => {
            crate::crash_points::reached(
                crate::crash_points::CrashPoint::AfterSendBeforeAcknowledge,
            );
            None
        }
        // Its run could not be ended: redelivered soon (not after the
        // hold), to try again; the last receive's failure leaves it to
        // the dead-letter queue, whose reader tries once more.
        StepDisposition::DeadLetter => {
            if let (Some(queue), Some(receipt)) = (redelivery, receipt.as_deref())
                && let Err(release_error) = queue.release(receipt, REDELIVER_AFTER_DEADLINE).await
            {
                tracing::warn!(%message_id, %release_error, "could not shorten the visibility; it reappears after its hold");
            }
            Some(message_id)
        }
        StepDisposition::Release { after } => {
            if let (Some(queue), Some(receipt)) = (redelivery, receipt.as_deref())
                && let Err(release_error) = queue.release(receipt, after).await
            {
                tracing::warn!(%message_id, %release_error, "could not shorten the visibility; it reappears after the queue's timeout");
            }
            Some(message_id)
        }
        // A new message carries the remaining delay; without a queue to
        // send it, the record itself is redelivered.
        StepDisposition::Defer { remaining } => match redelivery {
            Some(queue) => match queue.send_delayed(&message, remaining).await {
                Ok(()) => None,
                Err(error) => {
                    tracing::warn!(%message_id, %error, "could not defer an early timer; redelivering it");
                    Some(message_id)
                }
            },
            None => Some(message_id),
        },
    }
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
    ///
    /// The steps in flight are polled by this future itself (one task, as
    /// the embedded default runs one process's runs), not spawned: a step
    /// that finishes without waiting costs no task, no wake-up through the
    /// scheduler and no timer. A step that panics ends its run
    /// `step_failed` (`caught`, as on every worker); the others go on.
    pub async fn drain(&self) -> Result<usize, RuntimeError> {
        use futures_util::StreamExt;
        let mut processed = 0;
        let mut in_progress = futures_util::stream::FuturesUnordered::new();
        // While steps are in flight, the queue is looked at again at least
        // this often: a timer may come due meanwhile (a run's deadline
        // passing while a model call is in flight).
        let mut look_again = tokio::time::interval(Duration::from_millis(5));
        look_again.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if in_progress.is_empty() && self.queue.outstanding() == 0 {
                return Ok(processed);
            }
            let batch = self.queue.receive(10, Duration::ZERO).await?;
            let received_any = !batch.is_empty();
            for received in batch {
                in_progress.push(process_received_step_holding(
                    &self.steps,
                    self.queue.as_ref(),
                    received,
                    None,
                ));
            }
            if received_any {
                continue;
            }
            if in_progress.is_empty() {
                // Only messages released with a delay remain: wait for them.
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
            // A step finishing, or the time to look at the queue again.
            tokio::select! {
                biased;
                Some(finished) = in_progress.next() => {
                    processed += 1;
                    if let Err(error) = finished
                        && !error.is_retryable()
                    {
                        tracing::error!(%error, "step failed");
                    }
                }
                _ = look_again.tick() => {}
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
        Ok(stored.state.status())
    }
}
