//! The life cycle, live, for code that embeds the runtime: a subscriber
//! gets each write's frames as the write succeeds (before the run goes on),
//! the same frames the event log stores, in the same order, and the same
//! frames rendered as hook events.
//!
//! The model is a test double (schema-shaped answers); the steps are
//! handled one at a time off the in-memory queue, so the test sees what a
//! subscriber holds between two steps.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;

use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::ports::StepQueue;
use baton_runtime::services::lifecycle_bus::{LifecycleReceived, LifecycleSubscription};
use baton_test_support::{SchemaShapedModel, TestServices, plain_example_envelope};

/// The event types a subscription holds now (it does not wait).
async fn received_now(subscription: &mut LifecycleSubscription) -> Vec<String> {
    let mut types = Vec::new();
    while let Ok(Some(received)) =
        tokio::time::timeout(std::time::Duration::from_millis(20), subscription.next()).await
    {
        match received {
            LifecycleReceived::Event(event) => {
                assert_eq!(event.tenant_id, "t");
                types.extend(
                    event
                        .frames
                        .iter()
                        .map(|frame| frame.event_type.as_str().to_string()),
                );
            }
            LifecycleReceived::Lagged(missed) => panic!("lagged by {missed}"),
        }
    }
    types
}

#[tokio::test(flavor = "multi_thread")]
async fn a_subscriber_gets_each_writes_frames_as_it_is_stored() {
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(Arc::new(SchemaShapedModel))
        .queue(queue.clone())
        .build()
        .services;
    let mut raw = services.subscribe_to_lifecycle();
    let mut hooks = services.subscribe_to_lifecycle();

    let run = services
        .runs
        .submit(
            "t",
            &plain_example_envelope("seed-10.1-sample-envelope.json"),
        )
        .await
        .unwrap();
    let mut seen = received_now(&mut raw).await;
    assert_eq!(seen.first().map(String::as_str), Some("start"), "{seen:?}");

    // One step at a time: what each step stored is there before the next.
    let mut steps = 0;
    loop {
        let messages = queue.receive(1, std::time::Duration::ZERO).await.unwrap();
        let Some(message) = messages.into_iter().next() else {
            break;
        };
        services.steps.handle(&message.message).await.unwrap();
        queue.acknowledge(&message.receipt).await.unwrap();
        steps += 1;
        let this_step = received_now(&mut raw).await;
        if steps == 1 {
            assert!(
                this_step.contains(&"plan_generated".to_string()),
                "the plan step's frames, before any node runs: {this_step:?}"
            );
        }
        seen.extend(this_step);
    }
    assert!(steps >= 3, "a plan and its nodes: {steps} steps");
    assert_eq!(seen.last().map(String::as_str), Some("complete"));

    // The same frames as the stored log, in its order.
    let stored: Vec<String> = services
        .runs
        .read_all_events_after("t", &run.run_id, 0)
        .await
        .unwrap()
        .iter()
        .map(|frame| frame.event_type.as_str().to_string())
        .collect();
    assert_eq!(seen, stored);

    // Rendered as hook events, as `--format hooks` renders the log.
    let mut events = Vec::new();
    while let Ok(Some((event, rendered))) =
        tokio::time::timeout(std::time::Duration::from_millis(20), hooks.next_hooks()).await
    {
        assert_eq!(event.run_id, run.run_id);
        events.extend(rendered.into_iter().map(|hook| hook.event));
    }
    assert_eq!(events.first(), Some(&"prompt:submit"), "{events:?}");
    assert!(events.contains(&"provider:request"), "{events:?}");
    assert!(events.contains(&"provider:response"), "{events:?}");
    assert_eq!(
        &events[events.len() - 2..],
        ["prompt:complete", "orchestrator:complete"],
        "{events:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn with_no_subscriber_nothing_is_kept_and_a_late_one_starts_from_now() {
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(Arc::new(SchemaShapedModel))
        .queue(queue.clone())
        .build()
        .services;
    assert!(!services.lifecycle.is_heard());
    services
        .runs
        .submit(
            "t",
            &plain_example_envelope("seed-10.1-sample-envelope.json"),
        )
        .await
        .unwrap();
    let mut late = services.subscribe_to_lifecycle();
    assert!(services.lifecycle.is_heard());
    assert!(
        received_now(&mut late).await.is_empty(),
        "a write before the subscription is not replayed"
    );
}
