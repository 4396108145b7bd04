//! What every `ThreadStore` adapter must do: no thread before its first
//! exchange, exchanges oldest first, recording a run's exchange twice keeps
//! one, tenants apart.

use std::sync::Arc;

use baton_core::chat::ChatExchange;
use baton_core::thread_lane::ThreadLane;

use super::check;
use crate::ports::ThreadStore;

fn exchange(run_id: &str, at_millis: u64, user: &str) -> ChatExchange {
    ChatExchange {
        run_id: run_id.into(),
        at_millis,
        user: user.into(),
        assistant: format!("answer to {user}"),
        agent: (run_id == "run-2").then(|| "writer.fr".to_string()),
        drafts: Vec::new(),
        interrupted: false,
    }
}

/// Runs the suite against `store`; `unique` keeps runs of it apart.
pub async fn thread_store_conformance(
    store: Arc<dyn ThreadStore>,
    unique: &str,
) -> Result<(), String> {
    let (tenant, other) = (format!("tenant-a-{unique}"), format!("tenant-b-{unique}"));
    let thread = format!("thread-{unique}");
    let failed = |error: crate::error::StoreError| error.to_string();
    check(
        store
            .thread_exchanges(&tenant, &thread)
            .await
            .map_err(failed)?
            .is_none(),
        "no thread before its first exchange",
    )?;
    // Recorded out of order, and the second one twice (a retried step).
    let second = exchange("run-2", 2_000, "and then?");
    let first = exchange("run-1", 1_000, "hello");
    store
        .record_exchange(&tenant, &thread, &second)
        .await
        .map_err(failed)?;
    store
        .record_exchange(&tenant, &thread, &first)
        .await
        .map_err(failed)?;
    store
        .record_exchange(&tenant, &thread, &second)
        .await
        .map_err(failed)?;
    let read = store
        .thread_exchanges(&tenant, &thread)
        .await
        .map_err(failed)?
        .unwrap_or_default();
    check(
        read == vec![first.clone(), second.clone()],
        "exchanges come back oldest first, each run's once, as recorded",
    )?;
    check(
        store
            .thread_exchanges(&other, &thread)
            .await
            .map_err(failed)?
            .is_none(),
        "another tenant does not see the thread",
    )?;
    let long = ChatExchange {
        assistant: "é…".repeat(20_000),
        ..exchange("run-3", 3_000, "a long answer, please")
    };
    store
        .record_exchange(&tenant, &thread, &long)
        .await
        .map_err(failed)?;
    let read = store
        .thread_exchanges(&tenant, &thread)
        .await
        .map_err(failed)?
        .unwrap_or_default();
    check(
        read.len() == 3 && read[2] == long,
        "a long exchange comes back whole",
    )?;
    thread_lane_conformance(store, &tenant, &other, &thread).await
}

/// A thread's lane: none at version 0, each put conditional on the version
/// read, of two puts at one version exactly one lands, tenants apart.
async fn thread_lane_conformance(
    store: Arc<dyn ThreadStore>,
    tenant: &str,
    other: &str,
    thread: &str,
) -> Result<(), String> {
    let failed = |error: crate::error::StoreError| error.to_string();
    let lane = |active: &str| ThreadLane {
        active_run: Some(active.into()),
        queued_runs: vec![format!("{active}-queued")],
        ..ThreadLane::default()
    };
    check(
        store.thread_lane(tenant, thread).await.map_err(failed)? == (ThreadLane::default(), 0),
        "no lane: an empty one at version 0",
    )?;
    check(
        store
            .put_thread_lane(tenant, thread, &lane("run-1"), 0)
            .await
            .map_err(failed)?,
        "the first lane is written at version 0",
    )?;
    check(
        !store
            .put_thread_lane(tenant, thread, &lane("run-x"), 0)
            .await
            .map_err(failed)?,
        "a second first write finds the lane there and writes nothing",
    )?;
    check(
        store.thread_lane(tenant, thread).await.map_err(failed)? == (lane("run-1"), 1),
        "the lane reads back at version 1",
    )?;
    // Two writers that read version 1 race: one lands.
    let (second, third) = (lane("run-2"), lane("run-3"));
    let (left, right) = tokio::join!(
        store.put_thread_lane(tenant, thread, &second, 1),
        store.put_thread_lane(tenant, thread, &third, 1),
    );
    let (left, right) = (left.map_err(failed)?, right.map_err(failed)?);
    check(
        left != right,
        "of two writes at one version exactly one lands",
    )?;
    let winner = if left { "run-2" } else { "run-3" };
    check(
        store.thread_lane(tenant, thread).await.map_err(failed)? == (lane(winner), 2),
        "the winner's lane is stored, at version 2",
    )?;
    check(
        store.thread_lane(other, thread).await.map_err(failed)? == (ThreadLane::default(), 0),
        "another tenant does not see the lane",
    )?;
    Ok(())
}
