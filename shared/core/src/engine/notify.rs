//! The completion notification's steps: announcing it when a step leaves
//! the run ended or parked, and each delivery attempt (a `Notify` step:
//! the shell delivers, the engine records the result and schedules the
//! next attempt after a failure).

use crate::basics::error::CoreError;
use crate::basics::instant::Instant;
use crate::records::notifications::{
    MAX_NOTIFICATION_ATTEMPTS, NotificationRecord, RunEvent, RunNotification, retry_delay,
};
use crate::state::run::{RunState, StepCommand, StepMessage};

use super::decision::Decision;
pub use super::effects::NotificationDelivery;
use super::effects::{DeliveryOutcome, StepAdvance};
use super::step_context::StepContext;

/// Records a notification and sends its first attempt when this step moved
/// the run into an ending or a wait for people and someone listens.
pub(super) fn announce(step: &mut StepContext<'_, '_>) {
    if step.state().status() == step.initial_status() {
        return;
    }
    announce_status(step);
}

/// Whether a notification would reach anyone: the envelope's callback or
/// the event bus.
pub(super) fn someone_listens(step: &StepContext<'_, '_>) -> bool {
    step.state().envelope.callback_url.is_some() || step.engine().announce_to_event_bus
}

/// Announces the run's current status again (a parked task's reminder),
/// when someone listens.
pub(super) fn announce_again(step: &mut StepContext<'_, '_>) {
    announce_status(step);
}

/// Records a notification of the run's status and sends its first attempt.
fn announce_status(step: &mut StepContext<'_, '_>) {
    let Some(event) = RunEvent::of(step.state().status()) else {
        return;
    };
    if !someone_listens(step) {
        return;
    }
    let notification_id = format!(
        "{}-{}",
        event.event_type().trim_start_matches("baton.run."),
        step.state().notifications.len() + 1
    );
    let (status, occurred_at) = (step.state().status(), step.now().rfc3339());
    step.state_mut().notifications.insert(
        notification_id.clone(),
        NotificationRecord {
            event,
            status,
            occurred_at,
            attempts: 0,
            delivered: false,
            gave_up: false,
            last_error: None,
        },
    );
    step.send(StepMessage::new(
        &step.state().tenant_id,
        &step.state().run_id,
        StepCommand::Notify {
            notification_id,
            attempt: 1,
        },
    ));
}

/// Whether a `Notify` step no longer applies (delivered, given up, or not
/// the attempt due).
pub(super) fn notify_is_stale(state: &RunState, notification_id: &str, attempt: u32) -> bool {
    !state
        .notifications
        .get(notification_id)
        .is_some_and(|record| {
            !record.delivered && !record.gave_up && record.attempts + 1 == attempt
        })
}

pub(super) fn begin_notify(
    state: &RunState,
    notification_id: &str,
    attempt: u32,
    engine: &super::decision::EngineContext<'_>,
) -> Result<StepAdvance, CoreError> {
    let record = state
        .notifications
        .get(notification_id)
        .ok_or_else(|| CoreError::StepDoesNotApply(format!("no notification {notification_id}")))?;
    Ok(StepAdvance::Perform(super::effects::Effect::Notify(
        Box::new(NotificationDelivery {
            notification_id: notification_id.to_string(),
            attempt,
            notification: notification_of(state, notification_id, record),
            callback_url: state.envelope.callback_url.clone(),
            to_event_bus: engine.announce_to_event_bus,
        }),
    )))
}

/// Records the attempt: delivered, retried later, or given up.
pub(super) fn resume_notify(
    mut state: RunState,
    delivery: &NotificationDelivery,
    outcome: &DeliveryOutcome,
    now: Instant,
) -> Result<StepAdvance, CoreError> {
    let failure = outcome
        .as_ref()
        .err()
        .map(|failure| failure.message.clone());
    let mut outbox = Vec::new();
    let Some(record) = state.notifications.get_mut(&delivery.notification_id) else {
        return Err(CoreError::StepDoesNotApply(format!(
            "no notification {}",
            delivery.notification_id
        )));
    };
    record.attempts = delivery.attempt;
    match failure {
        None => record.delivered = true,
        Some(message) if delivery.attempt < MAX_NOTIFICATION_ATTEMPTS => {
            record.last_error = Some(message);
            let next = delivery.attempt + 1;
            let message = retried_later(
                &state,
                StepCommand::Notify {
                    notification_id: delivery.notification_id.clone(),
                    attempt: next,
                },
                next,
                now,
            );
            outbox.push(message);
        }
        Some(message) => {
            record.last_error = Some(message);
            record.gave_up = true;
        }
    }
    Ok(recorded_after_the_end(state, outbox, now))
}

/// The decision of a step that outlives the run's end (a notification's
/// attempt, a `Remember` step): the state as changed, the retry in the
/// outbox if any, and no frame, since `complete`/`error` stay last.
pub(super) fn recorded_after_the_end(
    mut state: RunState,
    outbox: Vec<StepMessage>,
    now: Instant,
) -> StepAdvance {
    state.updated_at = now;
    StepAdvance::Decided(Box::new(Decision {
        state,
        events: Vec::new(),
        outbox,
        transcripts: Vec::new(),
        exchanges: Vec::new(),
        entries: Vec::new(),
    }))
}

/// `command`'s message for `state`'s run, sent `attempt`'s retry delay
/// after `now` (`records::notifications::retry_delay`).
pub(super) fn retried_later(
    state: &RunState,
    command: StepCommand,
    attempt: u32,
    now: Instant,
) -> StepMessage {
    let mut message = StepMessage::new(&state.tenant_id, &state.run_id, command);
    message.not_before = Some(Instant::from_unix_millis(
        now.unix_millis() + retry_delay(attempt).as_millis() as u64,
    ));
    message
}

/// The notification `notification_id` of `state`, as delivered.
fn notification_of(
    state: &RunState,
    notification_id: &str,
    record: &NotificationRecord,
) -> RunNotification {
    RunNotification {
        event_type: record.event.event_type().to_string(),
        delivery_id: format!("{}:{notification_id}", state.run_id),
        run_id: state.run_id.clone(),
        tenant_id: state.tenant_id.clone(),
        correlation_id: state.correlation_id.clone(),
        status: record.status,
        occurred_at: record.occurred_at.clone(),
        usage: crate::records::notifications::NotificationUsage::of(state.total_usage(), state.total_cost_usd()),
        failure: state.failure.as_ref().map(|failure| {
            serde_json::json!({"code": failure.code.as_str(), "message": failure.message})
        }),
    }
}
