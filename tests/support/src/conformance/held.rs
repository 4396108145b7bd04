//! Conformance of held runs: listed for their tenant only, loaded with
//! their request, timers and clarifications, their request pending until
//! it is resolved.

use baton_core::basics::ids::RunKey;
use baton_core::state::run::RunStatus;
use serde_json::json;

use super::{check, commit};
use baton_runtime::error::StoreError;
use baton_runtime::ports::RunStore;

pub(super) async fn held_runs_conformance(
    store: &dyn RunStore,
    tenant: &str,
    run_id: &str,
) -> Result<(), String> {
    let failed = |error: StoreError| format!("store error: {error}");
    let tenant = tenant.to_string();
    let run_id = run_id.to_string();
    // Runs waiting for a person are listed under their tenant only, and a
    // held run (its request, timers and clarifications) loads as committed.
    let current = store
        .load_run(RunKey::new(&tenant, &run_id))
        .await
        .map_err(failed)?
        .ok_or("run still loads")?;
    let mut parked = current.state.clone();
    parked.set_status_for_fixtures(RunStatus::AwaitingHitl);
    parked.governance = held_governance()?;
    let parked_version = store
        .commit_step(
            RunKey::new(&tenant, &run_id),
            commit(
                current.version,
                current.state.status(),
                parked.clone(),
                vec![],
                vec![],
                None,
            ),
        )
        .await
        .map_err(failed)?;
    let reloaded = store
        .load_run(RunKey::new(&tenant, &run_id))
        .await
        .map_err(failed)?
        .ok_or("run still loads")?;
    check(
        reloaded.state.governance == parked.governance
            && reloaded.state.status() == RunStatus::AwaitingHitl,
        "a held run loads with its request, timers and clarifications",
    )?;
    let requests = store.pending_requests(&tenant).await.map_err(failed)?;
    check(
        requests.len() == 1
            && requests[0].run_id == run_id
            && requests[0].request.request_id == "r:hitl:1",
        "the held run's request is pending for its tenant",
    )?;
    check(
        store
            .pending_requests(&format!("{tenant}-other"))
            .await
            .map_err(failed)?
            .is_empty(),
        "another tenant has no pending request of it",
    )?;
    let listed = store.runs_awaiting_human(&tenant).await.map_err(failed)?;
    check(
        listed.len() == 1 && listed[0].run_id == run_id,
        "a run waiting for a person is listed",
    )?;
    check(
        store
            .runs_awaiting_human(&format!("{tenant}-other"))
            .await
            .map_err(failed)?
            .is_empty(),
        "another tenant lists none of it",
    )?;
    let mut resumed = current.state;
    resumed.set_status_for_fixtures(RunStatus::Running);
    store
        .commit_step(
            RunKey::new(&tenant, &run_id),
            commit(
                parked_version,
                RunStatus::AwaitingHitl,
                resumed,
                vec![],
                vec![],
                None,
            ),
        )
        .await
        .map_err(failed)?;
    check(
        store
            .runs_awaiting_human(&tenant)
            .await
            .map_err(failed)?
            .is_empty(),
        "a run no longer waiting is no longer listed",
    )?;
    check(
        store
            .pending_requests(&tenant)
            .await
            .map_err(failed)?
            .is_empty(),
        "a resolved request is no longer pending",
    )?;
    Ok(())
}

fn held_governance() -> Result<baton_core::records::governance::Governance, String> {
    serde_json::from_value(json!({
        "fired": ["gate@start"],
        "hold": {"hold": "request", "requestId": "r:hitl:1", "kind": "approval", "policyId": "gate",
                 "operatorPrompt": "Approve?", "rejectAction": {"type": "pause"},
                 "createdAt": "2026-01-01T00:00:00.000Z"},
        "requestsIssued": 1,
        "clarifications": [{"nodeId": "node_1", "questionId": "node_1:q1", "question": "Which?",
                            "answer": "This", "createdAt": "2026-01-01T00:00:00.000Z"}],
        "timers": {"sla:node_2:1": {"dueAt": "2026-01-01T00:15:00.000Z",
                                     "purpose": {"kind": "human_task_sla", "nodeId": "node_2", "attempt": 1}}}
    }))
    .map_err(|error| format!("the held governance fixture does not parse: {error}"))
}
