//! The conformance suites: one set of checks every `RunStore`
//! (with [`two_branches_take_one`], a whole run on it),
//! `CapabilityDirectory`, `ThreadStore`, `StreamLeases`, `ScheduleBook` and
//! `AuditLog` adapter must pass (in-memory,
//! SQLite and DynamoDB alike), called from each adapter's tests.

mod addressed;
mod audit;
mod branching;
mod directory;
mod entries;
mod held;
mod large;
mod memory;
pub mod memory_runs;
mod request_keys;
mod retention;
mod run_list;
mod schedules;
mod settled;
mod streams;
mod threads;

pub use audit::audit_log_conformance;
pub use branching::{BranchesTaken, ReviewSays, run_two_branches, two_branches_take_one};
pub use directory::capability_directory_conformance;
pub use large::incompressible_text;
pub use memory::memory_store_conformance;
pub use request_keys::request_keys_conformance;
pub use retention::{RetentionCase, retention_conformance};
pub use schedules::schedule_book_conformance;
pub use streams::stream_lease_conformance;
pub use threads::thread_store_conformance;

use std::sync::Arc;

use baton_core::basics::ids::RunKey;
use baton_core::contracts::envelope::TaskEnvelope;
use baton_core::engine::{NewRunIdentity, start_run};
use baton_core::state::run::{RunState, RunStatus, StepCommand, StepMessage};
use baton_core::wire::event::{EventDraft, EventType};
use serde_json::json;

use baton_core::basics::instant::Instant;
use baton_runtime::error::StoreError;
use baton_runtime::ports::{
    ClaimOutcome, CreateOutcome, NodeClaim, OutboxQuiet, RunStore, StepCommit,
};

const NOW: Instant = Instant::from_unix_millis(1_767_225_600_000);

/// Every conformance run's trace: kept in state, frames and outbox.
const CONFORMANCE_TRACE: baton_core::basics::trace_context::RunTrace =
    baton_core::basics::trace_context::RunTrace {
        trace_id: baton_core::basics::trace_context::TraceId(
            0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736,
        ),
        root_span_id: baton_core::basics::trace_context::SpanId(0x0102_0304_0506_0708),
        caller_span_id: None,
        sampled: true,
    };

/// A new run of a minimal envelope, its first frames and outbox (the
/// conformance suites' run).
pub fn new_run(tenant_id: &str, run_id: &str) -> (RunState, Vec<EventDraft>, Vec<StepMessage>) {
    let envelope = TaskEnvelope::parse_value(
        &json!({"objective": "conformance", "outputContract": {"schema": {"type": "object"}}}),
    );
    let Ok(envelope) = envelope else {
        unreachable!("the conformance envelope is valid")
    };
    let mut decision = start_run(
        NewRunIdentity {
            run_id: run_id.into(),
            tenant_id: tenant_id.into(),
            correlation_id: format!("corr-{run_id}"),
            thread_id: format!("thread-{run_id}"),
            trace: Some(CONFORMANCE_TRACE),
            submitted_by: None,
        },
        envelope,
        NOW,
        3,
    );
    // Stamped as a write stamps them (a span id as if spans were exported).
    for event in &mut decision.events {
        event.trace_id = Some(CONFORMANCE_TRACE.trace_id);
        event.span_id = Some(baton_core::basics::trace_context::SpanId(
            0x00f0_67aa_0ba9_02b7,
        ));
    }
    for message in &mut decision.outbox {
        message.traceparent = Some(CONFORMANCE_TRACE.step_traceparent());
    }
    // The suite counts sequences from here: the `start` frame alone.
    let start = decision
        .events
        .into_iter()
        .filter(|event| event.event_type == EventType::Start)
        .collect();
    (decision.state, start, decision.outbox)
}

fn log(message: &str) -> EventDraft {
    baton_core::wire::frames::log(&baton_core::wire::frames::FrameStamp::new(NOW, 0), message)
}

/// A commit on `expected_version`, where the run was `previous_status`.
fn commit(
    expected_version: u64,
    previous_status: RunStatus,
    state: RunState,
    events: Vec<EventDraft>,
    outbox: Vec<StepMessage>,
    consumed_message_id: Option<String>,
) -> StepCommit {
    StepCommit {
        expected_version,
        previous_status,
        // Kept for ever: the retention case sets its own.
        retain_until: None,
        state,
        events,
        outbox,
        consumed_message_id,
        entries: Vec::new(),
    }
}

fn check(condition: bool, what: &str) -> Result<(), String> {
    if condition {
        Ok(())
    } else {
        Err(what.to_string())
    }
}

/// Runs every check; returns the first failure as text. `unique` keeps ids
/// apart when several suites share one table.
pub async fn run_store_conformance(store: Arc<dyn RunStore>, unique: &str) -> Result<(), String> {
    let tenant = format!("tenant-{unique}");
    let run_id = format!("run-{unique}");
    let failed = |error: StoreError| format!("store error: {error}");

    // Create and load.
    let (state, events, outbox) = new_run(&tenant, &run_id);
    let created = store
        .create_run(&state, events, outbox, Some(&format!("key-{unique}")))
        .await
        .map_err(failed)?;
    check(
        created == CreateOutcome::Created,
        "create_run reports Created",
    )?;
    let loaded = store
        .load_run(RunKey::new(&tenant, &run_id))
        .await
        .map_err(failed)?
        .ok_or("created run loads")?;
    check(loaded.version == 1, "a new run has version 1")?;
    check(
        loaded.state.run_id == run_id,
        "the loaded state is the stored one",
    )?;
    check(
        store
            .load_run(RunKey::new("another-tenant", &run_id))
            .await
            .map_err(failed)?
            .is_none(),
        "another tenant cannot load the run",
    )?;
    let first = store
        .read_events(RunKey::new(&tenant, &run_id), 0, 100)
        .await
        .map_err(failed)?;
    check(
        first.len() == 1 && first[0].id == 1 && first[0].event_type == EventType::Start,
        "the start frame is sequence 1",
    )?;
    check(
        first[0].run_id == run_id && first[0].correlation_id == format!("corr-{run_id}"),
        "frames carry run and correlation ids",
    )?;
    check(
        first[0].trace_id == Some(CONFORMANCE_TRACE.trace_id)
            && first[0].span_id
                == Some(baton_core::basics::trace_context::SpanId(
                    0x00f0_67aa_0ba9_02b7,
                )),
        "frames keep their trace and span ids",
    )?;
    check(
        loaded.state.trace == Some(CONFORMANCE_TRACE),
        "the run's trace is kept in its state",
    )?;

    // Idempotency keys.
    let (twin_state, twin_events, twin_outbox) = new_run(&tenant, &format!("{run_id}-twin"));
    let again = store
        .create_run(
            &twin_state,
            twin_events,
            twin_outbox,
            Some(&format!("key-{unique}")),
        )
        .await
        .map_err(failed)?;
    check(
        again
            == CreateOutcome::AlreadyExists {
                run_id: run_id.clone(),
            },
        "a reused idempotency key returns the first run",
    )?;
    check(
        store
            .load_run(RunKey::new(&tenant, &format!("{run_id}-twin")))
            .await
            .map_err(failed)?
            .is_none(),
        "the refused twin wrote nothing",
    )?;

    // Outbox.
    let pending = store
        .pending_outbox(RunKey::new(&tenant, &run_id))
        .await
        .map_err(failed)?;
    check(
        pending.len() == 1 && pending[0].command == StepCommand::Plan,
        "the planning step is pending in the outbox",
    )?;
    check(
        pending[0].traceparent.as_deref() == Some(CONFORMANCE_TRACE.step_traceparent().as_str()),
        "an outbox entry keeps its traceparent",
    )?;
    let plan_message_id = pending[0].message_id.clone();
    store
        .mark_outbox_quiet(
            RunKey::new(&tenant, &run_id),
            std::slice::from_ref(&plan_message_id),
            OutboxQuiet {
                since: Instant::from_unix_millis(5_000),
                resends: 1,
            },
        )
        .await
        .map_err(failed)?;
    check(
        store
            .pending_outbox(RunKey::new(&tenant, &run_id))
            .await
            .map_err(failed)?
            .is_empty(),
        "a re-sent entry is no longer pending",
    )?;

    // Conditional commit: the loser appends nothing.
    let mut next = loaded.state.clone();
    next.set_status_for_fixtures(RunStatus::Running);
    let stale = store
        .commit_step(
            RunKey::new(&tenant, &run_id),
            commit(
                7,
                RunStatus::Queued,
                next.clone(),
                vec![log("loser")],
                vec![],
                Some(plan_message_id.clone()),
            ),
        )
        .await;
    check(
        matches!(stale, Err(StoreError::VersionConflict { .. })),
        "a commit on a stale version conflicts",
    )?;
    check(
        store
            .read_events(RunKey::new(&tenant, &run_id), 0, 100)
            .await
            .map_err(failed)?
            .len()
            == 1,
        "a conflicting commit appends no event",
    )?;
    let message = StepMessage::new(
        &tenant,
        &run_id,
        StepCommand::ExecuteNode {
            node_id: "node_1".into(),
            attempt: 1,
        },
    );
    let version = store
        .commit_step(
            RunKey::new(&tenant, &run_id),
            commit(
                1,
                RunStatus::Queued,
                next,
                vec![log("a"), log("b")],
                vec![message.clone()],
                Some(plan_message_id.clone()),
            ),
        )
        .await
        .map_err(failed)?;
    check(version == 2, "a commit bumps the version")?;
    let reloaded = store
        .load_run(RunKey::new(&tenant, &run_id))
        .await
        .map_err(failed)?
        .ok_or("run still loads")?;
    check(
        reloaded.version == 2 && reloaded.state.status() == RunStatus::Running,
        "the committed state is stored",
    )?;
    check(
        store
            .pending_outbox(RunKey::new(&tenant, &run_id))
            .await
            .map_err(failed)?
            .iter()
            .any(|m| m.message_id == message.message_id),
        "commit writes its outbox",
    )?;
    let far_future = Instant::from_unix_millis(u64::MAX / 2);
    check(
        !store
            .quiet_outbox(far_future, 1000)
            .await
            .map_err(failed)?
            .iter()
            .any(|entry| entry.message.message_id == plan_message_id),
        "the commit consumed the handled message's entry",
    )?;

    // The sweeper's view: unconsumed entries quiet since before a cutoff,
    // across runs, with their re-send counts.
    let quiet = store.quiet_outbox(far_future, 1000).await.map_err(failed)?;
    check(
        quiet
            .iter()
            .any(|entry| entry.message.message_id == message.message_id && entry.resends == 0),
        "an entry never re-sent is quiet once the cutoff passes its write",
    )?;
    check(
        store
            .quiet_outbox(Instant::from_unix_millis(0), 1000)
            .await
            .map_err(failed)?
            .is_empty(),
        "nothing is quiet since before the epoch",
    )?;
    // Re-sent: quiet again only from the instant the sweeper set, counted.
    let quiet_again = Instant::from_unix_millis(u64::MAX / 4);
    store
        .mark_outbox_quiet(
            RunKey::new(&tenant, &run_id),
            std::slice::from_ref(&message.message_id),
            OutboxQuiet {
                since: quiet_again,
                resends: 2,
            },
        )
        .await
        .map_err(failed)?;
    check(
        !store
            .quiet_outbox(quiet_again, 1000)
            .await
            .map_err(failed)?
            .iter()
            .any(|entry| entry.message.message_id == message.message_id),
        "a re-sent entry is off the sweeper's list until its new quiet-since",
    )?;
    check(
        store
            .quiet_outbox(far_future, 1000)
            .await
            .map_err(failed)?
            .iter()
            .any(|entry| entry.message.message_id == message.message_id && entry.resends == 2),
        "a re-sent entry is quiet again after its new quiet-since, with its count",
    )?;
    check(
        !store
            .pending_outbox(RunKey::new(&tenant, &run_id))
            .await
            .map_err(failed)?
            .iter()
            .any(|m| m.message_id == message.message_id),
        "a re-sent entry is not pending (a stale delivery does not re-send it again)",
    )?;
    let follow_up = StepMessage::new(
        &tenant,
        &run_id,
        StepCommand::ExecuteNode {
            node_id: "node_1".into(),
            attempt: 2,
        },
    );

    // Appends between commits keep sequences contiguous.
    let last = store
        .append_events(
            RunKey::new(&tenant, &run_id),
            vec![log("delta-1"), log("delta-2")],
        )
        .await
        .map_err(failed)?;
    check(last == 5, "appended events continue the sequence")?;
    check(
        store
            .last_sequence(RunKey::new(&tenant, &run_id))
            .await
            .map_err(failed)?
            == Some(5),
        "the last sequence is the last frame's, read without the log",
    )?;
    check(
        store
            .last_sequence(RunKey::new(&tenant, "no-such-run"))
            .await
            .map_err(failed)?
            .is_none(),
        "a run that does not exist has no last sequence",
    )?;
    store
        .commit_step(
            RunKey::new(&tenant, &run_id),
            commit(
                2,
                reloaded.state.status(),
                reloaded.state.clone(),
                vec![log("c")],
                vec![follow_up.clone()],
                None,
            ),
        )
        .await
        .map_err(failed)?;
    check(
        store
            .pending_outbox(RunKey::new(&tenant, &run_id))
            .await
            .map_err(failed)?
            .iter()
            .any(|m| m.message_id == follow_up.message_id),
        "a committed entry waits for its step",
    )?;
    let all = store
        .read_events(RunKey::new(&tenant, &run_id), 0, 100)
        .await
        .map_err(failed)?;
    let ids: Vec<u64> = all.iter().map(|frame| frame.id).collect();
    check(
        ids == vec![1, 2, 3, 4, 5, 6],
        "sequence numbers are contiguous across commits and appends",
    )?;

    // Paging.
    let page = store
        .read_events(RunKey::new(&tenant, &run_id), 2, 2)
        .await
        .map_err(failed)?;
    check(
        page.iter().map(|frame| frame.id).collect::<Vec<_>>() == vec![3, 4],
        "paging returns the frames after the cursor",
    )?;
    check(
        store
            .read_events(RunKey::new(&tenant, &run_id), 6, 10)
            .await
            .map_err(failed)?
            .is_empty(),
        "nothing after the last frame",
    )?;

    // Leases.
    let claim = |claimant: &'static str, now: u64| NodeClaim {
        claim_key: "node_1",
        attempt: 1,
        worker_id: claimant,
        now: Instant::from_unix_millis(now),
        lease_expires_at: Instant::from_unix_millis(now + 1_000),
    };
    let live_at = |at: u64| {
        store.run_holds_live_lease(RunKey::new(&tenant, &run_id), Instant::from_unix_millis(at))
    };
    check(
        !live_at(10_000).await.map_err(failed)?,
        "a run nobody claimed holds no live lease",
    )?;
    let won = store
        .claim_node(
            RunKey::new(&tenant, &run_id),
            claim("worker-a", 10_000),
            vec![log("node_start")],
        )
        .await
        .map_err(failed)?;
    check(won == ClaimOutcome::Claimed, "the first claim wins")?;
    check(
        live_at(10_500).await.map_err(failed)?,
        "a claimed run holds a live lease until its expiry",
    )?;
    check(
        !live_at(11_000).await.map_err(failed)?,
        "a lease past its expiry is not live",
    )?;
    check(
        store
            .pending_outbox(RunKey::new(&tenant, &run_id))
            .await
            .map_err(failed)?
            .iter()
            .any(|m| m.message_id == follow_up.message_id),
        "the claim leaves the handled message's entry (only the commit consumes it)",
    )?;
    let lost = store
        .claim_node(
            RunKey::new(&tenant, &run_id),
            claim("worker-b", 10_500),
            vec![log("twin node_start")],
        )
        .await
        .map_err(failed)?;
    check(
        matches!(
            lost,
            ClaimOutcome::HeldByOther { lease_expires_at }
                if lease_expires_at == Instant::from_unix_millis(11_000)
        ),
        "a twin claim within the lease loses",
    )?;
    check(
        store
            .renew_claim(RunKey::new(&tenant, &run_id), claim("worker-a", 10_800))
            .await
            .map_err(failed)?,
        "the holder renews its lease",
    )?;
    check(
        !store
            .renew_claim(RunKey::new(&tenant, &run_id), claim("worker-b", 10_800))
            .await
            .map_err(failed)?,
        "a rival cannot renew a lease it does not hold",
    )?;
    let renewed = store
        .claim_node(
            RunKey::new(&tenant, &run_id),
            claim("worker-b", 11_500),
            vec![],
        )
        .await
        .map_err(failed)?;
    check(
        matches!(
            renewed,
            ClaimOutcome::HeldByOther { lease_expires_at }
                if lease_expires_at == Instant::from_unix_millis(11_800)
        ),
        "a renewed lease holds past its first expiry",
    )?;
    let after_claims = store
        .read_events(RunKey::new(&tenant, &run_id), 6, 10)
        .await
        .map_err(failed)?;
    check(
        after_claims.len() == 1 && after_claims[0].message.as_deref() == Some("node_start"),
        "only the winning claim appended",
    )?;
    let expired = store
        .claim_node(
            RunKey::new(&tenant, &run_id),
            claim("worker-b", 20_000),
            vec![],
        )
        .await
        .map_err(failed)?;
    check(
        expired == ClaimOutcome::Claimed,
        "an expired lease can be claimed again",
    )?;
    check(
        !store
            .renew_claim(RunKey::new(&tenant, &run_id), claim("worker-a", 20_100))
            .await
            .map_err(failed)?,
        "a lease taken over cannot be renewed by its former holder",
    )?;
    store
        .release_claim(RunKey::new(&tenant, &run_id), "node_1", 1, "worker-a")
        .await
        .map_err(failed)?;
    let still_held = store
        .claim_node(
            RunKey::new(&tenant, &run_id),
            claim("worker-c", 20_500),
            vec![],
        )
        .await
        .map_err(failed)?;
    check(
        matches!(still_held, ClaimOutcome::HeldByOther { .. }),
        "releasing someone else's claim does nothing",
    )?;
    store
        .release_claim(RunKey::new(&tenant, &run_id), "node_1", 1, "worker-b")
        .await
        .map_err(failed)?;
    let after_release = store
        .claim_node(
            RunKey::new(&tenant, &run_id),
            claim("worker-c", 20_600),
            vec![],
        )
        .await
        .map_err(failed)?;
    check(
        after_release == ClaimOutcome::Claimed,
        "a released claim can be taken at once",
    )?;

    held::held_runs_conformance(store.as_ref(), &tenant, &run_id).await?;
    entries::run_entries_conformance(store.as_ref(), &tenant, &run_id).await?;
    settled::settled_run_conformance(store.as_ref(), &tenant, unique).await?;
    addressed::addressed_entries_conformance(store.as_ref(), &tenant, unique).await?;
    large::large_payload_conformance(store.as_ref(), &tenant, unique).await?;
    run_list::run_list_conformance(store.as_ref(), unique).await
}
