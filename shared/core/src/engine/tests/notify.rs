//! Completion notifications: announced when a step ends or parks the run
//! (only when someone listens), each attempt its own step outside the run's
//! frames, retried with doubling delays through the queue, delivered at
//! most once, given up after the last attempt.

use serde_json::json;

use super::*;
use crate::records::notifications::MAX_NOTIFICATION_ATTEMPTS;

fn envelope_calling_back(callback: Option<&str>) -> TaskEnvelope {
    let mut document = json!({
        "objective": "o",
        "inputs": {"notes": {"text": "n"}},
        "outputContract": {"schema": {"type": "object", "required": ["draft"], "properties": {"draft": {"type": "object"}}}}
    });
    if let Some(url) = callback {
        document["callbackUrl"] = json!(url);
    }
    TaskEnvelope::parse_value(&document).unwrap()
}

fn completed_run(callback: Option<&str>, context: &EngineContext<'_>) -> Decision {
    let started = start_run(identity(), envelope_calling_back(callback), NOW, 3);
    assert!(
        started
            .outbox
            .iter()
            .all(|message| !matches!(message.command, StepCommand::Notify { .. }))
    );
    let planned = step(started.state, Observed::Plan, context);
    let briefed = step(
        planned.state,
        answer("node_1", 1, json!({"brief": {"text": "b"}})),
        context,
    );
    step(
        briefed.state,
        answer("node_2", 1, json!({"draft": {"text": "d"}})),
        context,
    )
}

fn notify(notification: &str, attempt: u32) -> StepCommand {
    StepCommand::Notify {
        notification_id: notification.into(),
        attempt,
    }
}

/// Begins the attempt and resumes it with `outcome` at `now`.
fn attempt(
    state: RunState,
    command: &StepCommand,
    outcome: TestOutcome,
    now: Instant,
    context: &EngineContext<'_>,
) -> Decision {
    let StepAdvance::Perform(effect) = begin_step(&state, command, now, context).unwrap() else {
        panic!("a due attempt delivers");
    };
    match resume_step(state, command, &performed(&effect, outcome), now, context).unwrap() {
        StepAdvance::Decided(decision) => *decision,
        other => panic!("decided, not {other:?}"),
    }
}

fn failed(message: &str) -> TestOutcome {
    TestOutcome::Delivery(Err(DeliveryFailure {
        message: message.into(),
    }))
}

#[test]
fn a_completed_run_with_a_callback_is_announced_once_after_its_last_frame() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let completed = completed_run(Some("https://hooks.example.com/baton"), &context);
    assert_eq!(completed.state.status(), RunStatus::Completed);
    assert_eq!(
        completed.events.last().unwrap().event_type.as_str(),
        "complete"
    );
    let notifications: Vec<&StepCommand> = completed
        .outbox
        .iter()
        .map(|message| &message.command)
        .filter(|command| matches!(command, StepCommand::Notify { .. }))
        .collect();
    assert_eq!(notifications, [&notify("completed-1", 1)]);
    // The attempt carries what the receiver gets.
    let StepAdvance::Perform(Effect::Notify(delivery)) =
        begin_step(&completed.state, &notify("completed-1", 1), NOW, &context).unwrap()
    else {
        panic!("the attempt delivers");
    };
    assert_eq!(
        delivery.callback_url.as_deref(),
        Some("https://hooks.example.com/baton")
    );
    assert!(!delivery.to_event_bus);
    let body = serde_json::to_value(&delivery.notification).unwrap();
    assert_eq!(body["type"], "baton.run.completed");
    assert_eq!(body["deliveryId"], "run:completed-1");
    assert_eq!(body["status"], "completed");
    assert_eq!(body["tenantId"], "t");
    assert!(body["usage"]["totalTokens"].is_u64());
}

#[test]
fn failed_attempts_are_retried_later_with_doubling_delays_and_delivered_once() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let completed = completed_run(Some("https://hooks.example.com/baton"), &context);
    let first = attempt(
        completed.state,
        &notify("completed-1", 1),
        failed("503 from the receiver"),
        NOW,
        &context,
    );
    assert!(first.events.is_empty(), "no frame after the run's last");
    assert_eq!(first.outbox.len(), 1);
    assert_eq!(first.outbox[0].command, notify("completed-1", 2));
    assert_eq!(
        first.outbox[0].not_before,
        Some(Instant::from_unix_millis(NOW.unix_millis() + 2_000))
    );
    let record = &first.state.notifications["completed-1"];
    assert_eq!((record.attempts, record.delivered), (1, false));
    assert_eq!(record.last_error.as_deref(), Some("503 from the receiver"));
    // A duplicate of the first attempt no longer applies.
    assert_eq!(
        begin_step(&first.state, &notify("completed-1", 1), NOW, &context).unwrap(),
        StepAdvance::Stale
    );
    let second = attempt(
        first.state,
        &notify("completed-1", 2),
        failed("timed out"),
        NOW,
        &context,
    );
    assert_eq!(
        second.outbox[0].not_before,
        Some(Instant::from_unix_millis(NOW.unix_millis() + 4_000))
    );
    let third = attempt(
        second.state,
        &notify("completed-1", 3),
        TestOutcome::Delivery(Ok(())),
        NOW,
        &context,
    );
    assert!(third.outbox.is_empty());
    assert!(third.state.notifications["completed-1"].delivered);
    for late in 1..=4 {
        assert_eq!(
            begin_step(&third.state, &notify("completed-1", late), NOW, &context).unwrap(),
            StepAdvance::Stale,
            "attempt {late} after the delivery"
        );
    }
}

#[test]
fn the_last_failed_attempt_gives_up_and_keeps_the_error() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let mut state = completed_run(Some("https://hooks.example.com/baton"), &context).state;
    for number in 1..=MAX_NOTIFICATION_ATTEMPTS {
        let decision = attempt(
            state,
            &notify("completed-1", number),
            failed(&format!("refused {number}")),
            NOW,
            &context,
        );
        assert_eq!(
            decision.outbox.len(),
            usize::from(number < MAX_NOTIFICATION_ATTEMPTS)
        );
        state = decision.state;
    }
    let record = &state.notifications["completed-1"];
    assert!(record.gave_up && !record.delivered);
    assert_eq!(record.last_error.as_deref(), Some("refused 5"));
}

#[test]
fn parking_is_announced_and_nobody_listening_means_no_notification() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    assert!(
        completed_run(None, &context).state.notifications.is_empty(),
        "no callback and no event bus: nothing to announce"
    );
    let with_bus = EngineContext {
        announce_to_event_bus: true,
        ..engine(&registry, &validators)
    };
    let announced = completed_run(None, &with_bus);
    assert_eq!(announced.state.notifications.len(), 1);
    let cancelled = cancel_run(
        parked_on_a_person(&with_bus),
        "changed our mind",
        NOW,
        &with_bus,
    )
    .unwrap();
    let kinds: Vec<(&String, &str)> = cancelled
        .state
        .notifications
        .iter()
        .map(|(id, record)| (id, record.event.event_type()))
        .collect();
    assert_eq!(
        kinds,
        [
            (&"awaiting_human-1".to_string(), "baton.run.awaiting_human"),
            (&"failed-2".to_string(), "baton.run.failed")
        ]
    );
}

#[test]
fn a_callback_url_that_is_not_http_is_refused_with_its_path() {
    let mut document = json!({"objective": "o", "outputContract": {"schema": {"type": "object"}}});
    for bad in [
        "ftp://example.com/x",
        "example.com/hook",
        "https://example.com/a b",
    ] {
        document["callbackUrl"] = json!(bad);
        let error = TaskEnvelope::parse_value(&document).unwrap_err();
        assert!(
            error.to_string().contains("$.callbackUrl"),
            "{bad}: {error}"
        );
    }
}

/// A person's parked task whose capability allows `max_notifications`
/// announcements, under `context`.
fn parked_with_reminders(max_notifications: u64, context: &EngineContext<'_>) -> Decision {
    parking_on_a_person(
        context,
        Some(crate::planning::plan::TaskSurface {
            instruction_templates: None,
            widgets: Default::default(),
            assignment_defaults: json!({"maxNotifications": max_notifications})
                .as_object()
                .cloned(),
        }),
    )
}

fn fire(state: &RunState, timer_id: &str, at: Instant, context: &EngineContext<'_>) -> Decision {
    let command = StepCommand::FireTimer {
        timer_id: timer_id.into(),
    };
    match begin_step(state, &command, at, context).unwrap() {
        StepAdvance::Decided(decision) => *decision,
        other => panic!("a timer is decided, not {other:?}"),
    }
}

#[test]
fn a_parked_task_is_announced_again_at_most_max_notifications_times() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let with_bus = EngineContext {
        announce_to_event_bus: true,
        ..engine(&registry, &validators)
    };
    let every = with_bus.human_task_timeout / 3;
    let reminder = crate::records::governance::task_reminder_timer_id("node_2", 1);
    let parked = parked_with_reminders(3, &with_bus);
    assert_eq!(parked.state.status(), RunStatus::AwaitingHuman);
    assert_eq!(parked.state.notifications.len(), 1, "announced at parking");
    let due = parked.state.governance.timers[&reminder].due_at;
    assert_eq!(due, NOW.plus(every), "spread over the SLA");
    // The first reminder: announced again, the next one set.
    let second = fire(&parked.state, &reminder, due, &with_bus);
    assert_eq!(second.state.status(), RunStatus::AwaitingHuman);
    assert!(
        second.state.notifications.contains_key("awaiting_human-2"),
        "{:?}",
        second.state.notifications.keys()
    );
    assert!(
        second
            .outbox
            .iter()
            .any(|message| message.command == notify("awaiting_human-2", 1))
    );
    let next_due = second.state.governance.timers[&reminder].due_at;
    assert_eq!(next_due, due.plus(every));
    // The second: the third announcement, and no more.
    let third = fire(&second.state, &reminder, next_due, &with_bus);
    assert_eq!(third.state.notifications.len(), 3);
    assert!(!third.state.governance.timers.contains_key(&reminder));
    // Once answered, a reminder left behind announces nothing.
    let mut answered_state = parked.state.clone();
    if let Some(record) = answered_state.node_mut("node_2") {
        record.set_status_for_fixtures(NodeStatus::Completed);
    }
    let answered = fire(&answered_state, &reminder, due, &with_bus);
    assert_eq!(answered.state.notifications.len(), 1);
    // Nobody listening: no reminder is set.
    let quiet = parked_with_reminders(3, &engine(&registry, &validators));
    assert!(!quiet.state.governance.timers.contains_key(&reminder));
    // One notification allowed: none either.
    let once = parked_with_reminders(1, &with_bus);
    assert!(!once.state.governance.timers.contains_key(&reminder));
}
