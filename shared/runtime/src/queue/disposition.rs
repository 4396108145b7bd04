//! What a worker does with a delivery once its step was handled: one table,
//! read by the long-running worker (`process_received_step`) and by the
//! queue-triggered function (`process_step_queue_batch`) alike, so the two
//! cannot drift apart.

use std::time::Duration;

use crate::error::RuntimeError;
use crate::services::StepOutcome;

/// Deliveries after which a failing message is given up (the SQS redrive
/// policy's `maxReceiveCount`, as `infra/template.yaml` ships it: each
/// death of a holder counts one, so a step survives nine deaths).
pub const MAX_RECEIVES_BEFORE_DEAD_LETTER: u32 = 10;

/// A record that ran out of invocation time is visible again this soon
/// (its claim was released, so the next delivery can take the node at once).
pub const REDELIVER_AFTER_DEADLINE: Duration = Duration::from_secs(2);

/// The first retry of a step that failed with a retryable error waits this
/// long; each further delivery doubles it.
pub const FIRST_RETRY_BACKOFF: Duration = Duration::from_millis(200);

/// What becomes of one delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepDisposition {
    /// The step is done with (committed, stale, its run gone): remove it.
    Acknowledge,
    /// Make the same delivery visible again after `after`: it failed in a
    /// way worth retrying, or it ran out of time, with receives left.
    Release { after: Duration },
    /// Send a fresh copy visible after `remaining` and remove this
    /// delivery: a timer that came before it is due, or a node busy in
    /// another worker's hands. The copy's receive count starts again, so
    /// waiting never uses up the receives the queue's redrive policy counts.
    Defer { remaining: Duration },
    /// Failed for good, or at its last receive (the redrive policy would
    /// take the next one to the dead-letter queue): its run is ended
    /// (`StepService::give_up`) before the message is let go.
    DeadLetter,
}

/// The one table from a step's result (and how often its message was
/// received) to what the queue does with it.
pub fn step_disposition(
    outcome: &Result<StepOutcome, RuntimeError>,
    receive_count: u32,
) -> StepDisposition {
    match outcome {
        Ok(StepOutcome::Committed { .. } | StepOutcome::Stale | StepOutcome::RunNotFound) => {
            StepDisposition::Acknowledge
        }
        Ok(StepOutcome::Busy { retry_after }) => StepDisposition::Defer {
            remaining: *retry_after,
        },
        Ok(StepOutcome::NotYetDue { remaining }) => StepDisposition::Defer {
            remaining: *remaining,
        },
        Err(RuntimeError::DeadlineExceeded { .. })
            if receive_count < MAX_RECEIVES_BEFORE_DEAD_LETTER =>
        {
            StepDisposition::Release {
                after: REDELIVER_AFTER_DEADLINE,
            }
        }
        Err(error) if error.is_retryable() && receive_count < MAX_RECEIVES_BEFORE_DEAD_LETTER => {
            StepDisposition::Release {
                after: retry_backoff(receive_count),
            }
        }
        Err(_) => StepDisposition::DeadLetter,
    }
}

/// The wait before delivery `receive_count + 1` of a retryable failure.
pub fn retry_backoff(receive_count: u32) -> Duration {
    let doublings = receive_count.saturating_sub(1).min(8);
    FIRST_RETRY_BACKOFF.saturating_mul(1 << doublings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::StoreError;

    #[test]
    fn every_outcome_has_one_disposition() {
        let second = Duration::from_secs(1);
        let table = [
            (
                Ok(StepOutcome::Committed { new_version: 2 }),
                1,
                StepDisposition::Acknowledge,
            ),
            (Ok(StepOutcome::Stale), 1, StepDisposition::Acknowledge),
            // A panic is a bug a redelivery meets again: failed for good at once.
            (
                Err(RuntimeError::StepPanicked {
                    message: "index out of bounds".into(),
                }),
                1,
                StepDisposition::DeadLetter,
            ),
            (
                Ok(StepOutcome::RunNotFound),
                1,
                StepDisposition::Acknowledge,
            ),
            (
                Ok(StepOutcome::Busy {
                    retry_after: second,
                }),
                MAX_RECEIVES_BEFORE_DEAD_LETTER,
                StepDisposition::Defer { remaining: second },
            ),
            (
                Ok(StepOutcome::NotYetDue { remaining: second }),
                1,
                StepDisposition::Defer { remaining: second },
            ),
            (
                Err(RuntimeError::DeadlineExceeded {
                    remaining_millis: 10,
                    needed_millis: 5_000,
                }),
                3,
                StepDisposition::Release {
                    after: REDELIVER_AFTER_DEADLINE,
                },
            ),
            // At its last receive a step out of time ends its run: the
            // redrive policy would take the next delivery away unseen.
            (
                Err(RuntimeError::DeadlineExceeded {
                    remaining_millis: 10,
                    needed_millis: 5_000,
                }),
                MAX_RECEIVES_BEFORE_DEAD_LETTER,
                StepDisposition::DeadLetter,
            ),
            (
                Err(RuntimeError::Store(StoreError::Unavailable("down".into()))),
                2,
                StepDisposition::Release {
                    after: Duration::from_millis(400),
                },
            ),
            (
                Err(RuntimeError::Store(StoreError::Unavailable("down".into()))),
                MAX_RECEIVES_BEFORE_DEAD_LETTER,
                StepDisposition::DeadLetter,
            ),
            (
                Err(RuntimeError::Store(StoreError::Corrupt("bad".into()))),
                1,
                StepDisposition::DeadLetter,
            ),
        ];
        for (outcome, receive_count, expected) in table {
            assert_eq!(
                step_disposition(&outcome, receive_count),
                expected,
                "{outcome:?} at delivery {receive_count}"
            );
        }
    }

    #[test]
    fn the_backoff_doubles_and_is_bounded() {
        assert_eq!(retry_backoff(0), FIRST_RETRY_BACKOFF);
        assert_eq!(retry_backoff(1), FIRST_RETRY_BACKOFF);
        assert_eq!(retry_backoff(3), FIRST_RETRY_BACKOFF * 4);
        assert_eq!(retry_backoff(u32::MAX), FIRST_RETRY_BACKOFF * 256);
    }
}
