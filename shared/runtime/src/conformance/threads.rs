//! What every `ThreadStore` adapter must do: no thread before its first
//! exchange, exchanges oldest first, recording a run's exchange twice keeps
//! one, tenants apart.

use std::sync::Arc;

use baton_core::chat::ChatExchange;

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
    Ok(())
}
