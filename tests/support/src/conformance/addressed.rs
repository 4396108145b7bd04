//! Conformance of outbox entries addressed to another run (a child run's
//! end is a step of its parent): the entry is kept under the run that
//! consumes it, so that run's pending outbox lists it, its commit consumes
//! it, and marking it sent finds it. Marking an entry that is already gone
//! (consumed meanwhile) is success, never an error that could stop a sweep.

use baton_core::basics::ids::RunKey;
use baton_core::state::run::{StepCommand, StepMessage};
use serde_json::json;

use super::{check, commit, new_run};
use baton_runtime::error::StoreError;
use baton_runtime::ports::{CreateOutcome, OutboxQuiet, RunStore};

/// A cutoff after any entry's write, whatever the store's clock says.
const LATER: baton_core::basics::instant::Instant =
    baton_core::basics::instant::Instant::from_unix_millis(4_102_444_800_000);

pub(super) async fn addressed_entries_conformance(
    store: &dyn RunStore,
    tenant: &str,
    unique: &str,
) -> Result<(), String> {
    let failed = |error: StoreError| format!("store error: {error}");
    let parent_id = format!("run-{unique}-parent");
    let child_id = format!("run-{unique}-child");
    for run_id in [&parent_id, &child_id] {
        let (state, events, _outbox) = new_run(tenant, run_id);
        check(
            store
                .create_run(&state, events, vec![], None)
                .await
                .map_err(failed)?
                == CreateOutcome::Created,
            "the parent and the child are created",
        )?;
    }
    let child_ended = StepMessage {
        message_id: format!("{parent_id}:child-ended"),
        tenant_id: tenant.to_string(),
        run_id: parent_id.clone(),
        command: StepCommand::ChildRunEnded {
            node_id: "node_agent".into(),
            attempt: 1,
            turn: 1,
            call_id: "call_1".into(),
            summary: json!({"status": "completed"}),
        },
        not_before: None,
        traceparent: None,
    };
    // The child's last commit writes its parent's step.
    let child = store
        .load_run(RunKey::new(tenant, &child_id))
        .await
        .map_err(failed)?
        .ok_or("the child loads")?;
    store
        .commit_step(
            RunKey::new(tenant, &child_id),
            commit(
                child.version,
                child.state.status(),
                child.state,
                vec![],
                vec![child_ended.clone()],
                None,
            ),
        )
        .await
        .map_err(failed)?;
    let parent_pending = store
        .pending_outbox(RunKey::new(tenant, &parent_id))
        .await
        .map_err(failed)?;
    check(
        parent_pending
            .iter()
            .any(|message| message.message_id == child_ended.message_id),
        "an entry addressed to the parent is in the parent's pending outbox",
    )?;
    let quiet = store.quiet_outbox(LATER, 1_000).await.map_err(failed)?;
    check(
        quiet
            .iter()
            .any(|entry| entry.message.message_id == child_ended.message_id),
        "the sweeper sees the entry addressed to the parent",
    )?;
    // Marking it re-sent finds it; marking an entry that is gone succeeds.
    store
        .mark_outbox_quiet(
            RunKey::new(tenant, &parent_id),
            &[child_ended.message_id.clone(), format!("{parent_id}:gone")],
            OutboxQuiet {
                since: LATER,
                resends: 1,
            },
        )
        .await
        .map_err(|error| format!("marking a present and a gone entry: {error}"))?;
    // The parent's commit that handles the message consumes its entry.
    let parent = store
        .load_run(RunKey::new(tenant, &parent_id))
        .await
        .map_err(failed)?
        .ok_or("the parent loads")?;
    store
        .commit_step(
            RunKey::new(tenant, &parent_id),
            commit(
                parent.version,
                parent.state.status(),
                parent.state,
                vec![],
                vec![],
                Some(child_ended.message_id.clone()),
            ),
        )
        .await
        .map_err(failed)?;
    let quiet = store
        .quiet_outbox(
            baton_core::basics::instant::Instant::from_unix_millis(u64::MAX / 2),
            1_000,
        )
        .await
        .map_err(failed)?;
    check(
        !quiet
            .iter()
            .any(|entry| entry.message.message_id == child_ended.message_id),
        "the parent's commit consumed the entry its child wrote: the sweeper no longer sees it",
    )?;
    store
        .mark_outbox_quiet(
            RunKey::new(tenant, &parent_id),
            std::slice::from_ref(&child_ended.message_id),
            OutboxQuiet {
                since: LATER,
                resends: 2,
            },
        )
        .await
        .map_err(|error| format!("marking a consumed entry re-sent: {error}"))
}
