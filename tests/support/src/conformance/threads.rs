//! What every `ThreadStore` adapter must do: no thread before its first
//! exchange, exchanges oldest first, recording a run's exchange twice keeps
//! one, a thread read by page from its newest end, threads listed by last
//! activity a page at a time, tenants apart.

use std::sync::Arc;

use baton_core::basics::ids::ThreadKey;
use baton_core::records::chat::ChatExchange;
use baton_core::records::thread_lane::ThreadLane;
use baton_core::records::thread_listing::{ThreadListQuery, ThreadListing};

use super::check;
use baton_runtime::ports::ThreadStore;

fn exchange(run_id: &str, at_millis: u64, user: &str) -> ChatExchange {
    ChatExchange {
        run_id: run_id.into(),
        at_millis,
        user: user.into(),
        assistant: format!("answer to {user}"),
        agent: (run_id == "run-2").then(|| "writer.fr".to_string()),
        drafts: Vec::new(),
        interrupted: false,
        summary: None,
    }
}

/// Runs the suite against `store`; `unique` keeps runs of it apart.
pub async fn thread_store_conformance(
    store: Arc<dyn ThreadStore>,
    unique: &str,
) -> Result<(), String> {
    let (tenant, other) = (format!("tenant-a-{unique}"), format!("tenant-b-{unique}"));
    let thread = format!("thread-{unique}");
    let failed = |error: baton_runtime::error::StoreError| error.to_string();
    check(
        store
            .thread_exchanges(ThreadKey::new(&tenant, &thread))
            .await
            .map_err(failed)?
            .is_none(),
        "no thread before its first exchange",
    )?;
    // Recorded out of order, and the second one twice (a retried step).
    let second = exchange("run-2", 2_000, "and then?");
    let first = exchange("run-1", 1_000, "hello");
    store
        .record_exchange(ThreadKey::new(&tenant, &thread), &second)
        .await
        .map_err(failed)?;
    store
        .record_exchange(ThreadKey::new(&tenant, &thread), &first)
        .await
        .map_err(failed)?;
    store
        .record_exchange(ThreadKey::new(&tenant, &thread), &second)
        .await
        .map_err(failed)?;
    let read = store
        .thread_exchanges(ThreadKey::new(&tenant, &thread))
        .await
        .map_err(failed)?
        .unwrap_or_default();
    check(
        read == vec![first.clone(), second.clone()],
        "exchanges come back oldest first, each run's once, as recorded",
    )?;
    check(
        store
            .thread_exchanges(ThreadKey::new(&other, &thread))
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
        .record_exchange(ThreadKey::new(&tenant, &thread), &long)
        .await
        .map_err(failed)?;
    let read = store
        .thread_exchanges(ThreadKey::new(&tenant, &thread))
        .await
        .map_err(failed)?
        .unwrap_or_default();
    check(
        read.len() == 3 && read[2] == long,
        "a long exchange comes back whole",
    )?;
    // Read by page from the newest end.
    let page = |before: Option<(u64, String)>, limit: usize| {
        let (store, tenant, thread) = (store.clone(), tenant.clone(), thread.clone());
        async move {
            store
                .thread_exchanges_before(ThreadKey::new(&tenant, &thread), before.as_ref(), limit)
                .await
        }
    };
    let newest =
        page(None, 2)
            .await
            .map_err(failed)?
            .unwrap_or_else(|| baton_runtime::ports::ThreadPage {
                exchanges: Vec::new(),
                older: false,
            });
    check(
        newest.exchanges == vec![second.clone(), long.clone()] && newest.older,
        "a page from the newest end: the newest two, oldest first, older ones left",
    )?;
    let oldest = page(Some((second.at_millis, second.run_id.clone())), 2)
        .await
        .map_err(failed)?;
    check(
        oldest
            .as_ref()
            .is_some_and(|oldest| oldest.exchanges == vec![first.clone()] && !oldest.older),
        "the page before a position: what is older, and nothing older left",
    )?;
    check(
        page(None, 0)
            .await
            .map_err(failed)?
            .is_some_and(|empty| empty.exchanges.is_empty() && empty.older),
        "a page of none still says older ones remain",
    )?;
    check(
        store
            .thread_exchanges_before(ThreadKey::new(&other, &thread), None, 10)
            .await
            .map_err(failed)?
            .is_none(),
        "another tenant's page finds no thread",
    )?;
    thread_listing_conformance(store.as_ref(), &tenant, &other, &thread).await?;
    thread_lane_conformance(store, &tenant, &other, &thread).await
}

/// The threads list: the most recently answered first, a page at a time,
/// each thread titled by its first message; tenants apart.
async fn thread_listing_conformance(
    store: &dyn ThreadStore,
    tenant: &str,
    other: &str,
    thread: &str,
) -> Result<(), String> {
    let failed = |error: baton_runtime::error::StoreError| error.to_string();
    let (middle, oldest) = (format!("{thread}-middle"), format!("{thread}-oldest"));
    store
        .record_exchange(
            ThreadKey::new(tenant, &middle),
            &exchange("run-m", 2_500, "middle"),
        )
        .await
        .map_err(failed)?;
    store
        .record_exchange(
            ThreadKey::new(tenant, &oldest),
            &exchange("run-o", 500, "oldest"),
        )
        .await
        .map_err(failed)?;
    let query = |cursor: Option<String>| ThreadListQuery { limit: 2, cursor };
    let first = store
        .list_threads(tenant, &query(None))
        .await
        .map_err(failed)?;
    let ids: Vec<&str> = first
        .threads
        .iter()
        .map(|listing| listing.thread_id.as_str())
        .collect();
    check(
        ids == [thread, middle.as_str()],
        &format!("the most recently answered threads come first, two to a page: {ids:?}"),
    )?;
    check(
        first.threads[0]
            == ThreadListing {
                thread_id: thread.to_string(),
                started_at_millis: 1_000,
                last_at_millis: 3_000,
                first_message: "hello".into(),
                last_message: "a long answer, please".into(),
            },
        &format!(
            "a listing has the first and latest messages and times: {:?}",
            first.threads[0]
        ),
    )?;
    let second = store
        .list_threads(tenant, &query(first.next_cursor.clone()))
        .await
        .map_err(failed)?;
    let ids: Vec<&str> = second
        .threads
        .iter()
        .map(|listing| listing.thread_id.as_str())
        .collect();
    check(
        first.next_cursor.is_some() && ids == [oldest.as_str()] && second.next_cursor.is_none(),
        &format!("the cursor leads to the rest, and the last page has none: {ids:?}"),
    )?;
    check(
        store
            .list_threads(other, &query(None))
            .await
            .map_err(failed)?
            .threads
            .is_empty(),
        "another tenant lists none of them",
    )
}

/// A thread's lane: none at version 0, each put conditional on the version
/// read, of two puts at one version exactly one lands, tenants apart.
async fn thread_lane_conformance(
    store: Arc<dyn ThreadStore>,
    tenant: &str,
    other: &str,
    thread: &str,
) -> Result<(), String> {
    let failed = |error: baton_runtime::error::StoreError| error.to_string();
    let lane = |active: &str| ThreadLane {
        active_run: Some(active.into()),
        queued_runs: vec![format!("{active}-queued")],
        ..ThreadLane::default()
    };
    check(
        store
            .thread_lane(ThreadKey::new(tenant, thread))
            .await
            .map_err(failed)?
            == (ThreadLane::default(), 0),
        "no lane: an empty one at version 0",
    )?;
    check(
        store
            .put_thread_lane(ThreadKey::new(tenant, thread), &lane("run-1"), 0)
            .await
            .map_err(failed)?,
        "the first lane is written at version 0",
    )?;
    check(
        !store
            .put_thread_lane(ThreadKey::new(tenant, thread), &lane("run-x"), 0)
            .await
            .map_err(failed)?,
        "a second first write finds the lane there and writes nothing",
    )?;
    check(
        store
            .thread_lane(ThreadKey::new(tenant, thread))
            .await
            .map_err(failed)?
            == (lane("run-1"), 1),
        "the lane reads back at version 1",
    )?;
    // Two writers that read version 1 race: one lands.
    let (second, third) = (lane("run-2"), lane("run-3"));
    let (left, right) = tokio::join!(
        store.put_thread_lane(ThreadKey::new(tenant, thread), &second, 1),
        store.put_thread_lane(ThreadKey::new(tenant, thread), &third, 1),
    );
    let (left, right) = (left.map_err(failed)?, right.map_err(failed)?);
    check(
        left != right,
        "of two writes at one version exactly one lands",
    )?;
    let winner = if left { "run-2" } else { "run-3" };
    check(
        store
            .thread_lane(ThreadKey::new(tenant, thread))
            .await
            .map_err(failed)?
            == (lane(winner), 2),
        "the winner's lane is stored, at version 2",
    )?;
    check(
        store
            .thread_lane(ThreadKey::new(other, thread))
            .await
            .map_err(failed)?
            == (ThreadLane::default(), 0),
        "another tenant does not see the lane",
    )?;
    Ok(())
}
