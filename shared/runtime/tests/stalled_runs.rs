//! The sweeper re-drives a stalled run, and only a stalled one: an outbox
//! entry quiet for two leases is re-sent when its run holds no live lease,
//! left alone while a holder is at work, and re-sent again only after twice
//! the wait. The store is the in-memory one, the queue the in-process one
//! (the message the dead holder received is never handled: it is what the
//! queue keeps hidden); the model is the schema-shaped double.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::time::Duration;

use baton_core::basics::ids::RunKey;
use baton_core::state::run::StepCommand;
use baton_runtime::clock::OffsetClock;
use baton_runtime::memory::{InMemoryRunStore, InMemoryStepQueue};
use baton_runtime::ports::{Clock, NodeClaim, NodeLeases, StepQueue};
use baton_runtime::services::OutboxSweeper;
use baton_test_support::{SchemaShapedModel, TestServices};

/// The template's node lease, and the sweeper's wait: two of them.
const LEASE: Duration = Duration::from_secs(30);
const STALL_AFTER: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_stalled_run_is_re_sent_once_no_lease_in_it_is_live() {
    let store = Arc::new(InMemoryRunStore::new());
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(Arc::new(SchemaShapedModel))
        .store(store.clone())
        .queue(queue.clone())
        .build()
        .services;
    let envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    let run_id = services.runs.submit("t", &envelope).await.unwrap().run_id;
    // The holder received the first step and died before doing anything
    // with it: the queue keeps it (hidden), nothing acknowledges it.
    let lost = queue.receive(1, Duration::ZERO).await.unwrap();
    assert_eq!(lost.len(), 1);
    assert_eq!(lost[0].message.command, StepCommand::Plan);

    let clock = Arc::new(OffsetClock::new());
    let sweeper = OutboxSweeper::new(store.clone(), queue.clone(), clock.clone());
    // Another step of the run holds a lease, from now until three leases
    // on (renewed by its heartbeat).
    let claimed = store
        .claim_node(
            RunKey::new("t", &run_id),
            NodeClaim {
                claim_key: "node_elsewhere",
                attempt: 1,
                worker_id: "a-live-holder",
                now: clock.now(),
                lease_expires_at: clock.now().plus(3 * LEASE),
            },
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(claimed, baton_runtime::ports::ClaimOutcome::Claimed);

    let swept = sweeper.sweep(STALL_AFTER, 100).await.unwrap();
    assert_eq!(swept.resent + swept.held, 0, "not quiet for two leases yet");

    clock.advance(STALL_AFTER + Duration::from_secs(1));
    let swept = sweeper.sweep(STALL_AFTER, 100).await.unwrap();
    assert_eq!(
        (swept.resent, swept.held),
        (0, 1),
        "quiet, but a holder is at work in the run: left alone"
    );
    assert!(queue.receive(10, Duration::ZERO).await.unwrap().is_empty());

    // The holder's lease runs out (it died too); the entry has been quiet
    // two leases since the sweeper last looked.
    clock.advance(STALL_AFTER + Duration::from_secs(1));
    let swept = sweeper.sweep(STALL_AFTER, 100).await.unwrap();
    assert_eq!((swept.resent, swept.held), (1, 0), "re-driven");
    let redriven = queue.receive(10, Duration::ZERO).await.unwrap();
    assert_eq!(redriven.len(), 1);
    assert_eq!(
        redriven[0].message, lost[0].message,
        "the same step, its id unchanged"
    );

    // Not handled yet (a backlog): not re-sent two leases later, only four.
    clock.advance(STALL_AFTER + Duration::from_secs(1));
    assert_eq!(sweeper.sweep(STALL_AFTER, 100).await.unwrap().resent, 0);
    clock.advance(STALL_AFTER);
    assert_eq!(sweeper.sweep(STALL_AFTER, 100).await.unwrap().resent, 1);
    let again = queue.receive(10, Duration::ZERO).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].message, lost[0].message);

    // Handled: the commit consumes the entry, the sweeper has nothing left.
    let outcome = services.steps.handle(&redriven[0].message).await.unwrap();
    assert!(
        !matches!(outcome, baton_runtime::services::StepOutcome::Stale),
        "the re-sent step ran: {outcome:?}"
    );
    let stale = services.steps.handle(&lost[0].message).await.unwrap();
    assert!(
        matches!(stale, baton_runtime::services::StepOutcome::Stale),
        "its twin is stale: {stale:?}"
    );
    // An hour on, the only quiet entry is the run's next step (its send
    // went to the queue, nobody handled it): the handled one is gone.
    clock.advance(Duration::from_secs(3_600));
    let swept = sweeper.sweep(STALL_AFTER, 100).await.unwrap();
    assert_eq!(swept.resent, 1, "{swept:?}");
    let queued = queue.receive(10, Duration::ZERO).await.unwrap();
    assert!(!queued.is_empty());
    assert!(
        queued
            .iter()
            .all(|received| received.message.command != StepCommand::Plan),
        "the handled step is never re-sent again: {:?}",
        queued
            .iter()
            .map(|received| &received.message.command)
            .collect::<Vec<_>>()
    );
}
