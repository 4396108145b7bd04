//! Conformance of a settled run: once a commit writes the run's terminal
//! frame, nothing lands after it. An append outside a commit (a twin
//! attempt's deltas still streaming, a late warning) appends nothing and
//! answers the last sequence; a claim (its `node_start`) is refused. A
//! commit without frames on the ended run (a notification's delivery)
//! keeps it so. A later commit that takes the run up again lifts both.

use baton_core::basics::ids::RunKey;
use baton_core::state::run::RunStatus;
use baton_core::wire::event::{EventDraft, EventType};

use super::{NOW, check, commit, log, new_run};
use baton_runtime::error::StoreError;
use baton_runtime::ports::{ClaimOutcome, CreateOutcome, NodeClaim, RunStore};

fn terminal() -> EventDraft {
    let mut frame = log("the run ended");
    frame.event_type = EventType::Complete;
    frame
}

pub(super) async fn settled_run_conformance(
    store: &dyn RunStore,
    tenant: &str,
    unique: &str,
) -> Result<(), String> {
    let failed = |error: StoreError| format!("store error: {error}");
    let run_id = format!("run-{unique}-settles");
    let (state, events, outbox) = new_run(tenant, &run_id);
    check(
        store
            .create_run(&state, events, outbox, None)
            .await
            .map_err(failed)?
            == CreateOutcome::Created,
        "the settling run is created",
    )?;
    check(
        store
            .append_events(RunKey::new(tenant, &run_id), vec![log("a delta")])
            .await
            .map_err(failed)?
            == 2,
        "an append before the end lands",
    )?;
    let mut ended = state.clone();
    ended.set_status_for_fixtures(RunStatus::Completed);
    let version = store
        .commit_step(
            RunKey::new(tenant, &run_id),
            commit(1, state.status(), ended, vec![terminal()], vec![], None),
        )
        .await
        .map_err(failed)?;
    // A commit with no frame on the ended run (a completion notification's
    // delivery recorded) leaves it settled: the guard follows the run's
    // status, not the last commit's frames.
    let mut notified = state.clone();
    notified.set_status_for_fixtures(RunStatus::Completed);
    let version = store
        .commit_step(
            RunKey::new(tenant, &run_id),
            commit(
                version,
                RunStatus::Completed,
                notified,
                vec![],
                vec![],
                None,
            ),
        )
        .await
        .map_err(failed)?;
    let late = store
        .append_events(
            RunKey::new(tenant, &run_id),
            vec![log("a twin's late delta")],
        )
        .await
        .map_err(failed)?;
    check(
        late == 3,
        "an append after the terminal frame (and a commit without frames) answers the last sequence",
    )?;
    let claim = NodeClaim {
        claim_key: "node_late",
        attempt: 1,
        worker_id: "late-worker",
        now: NOW,
        lease_expires_at: NOW.plus(std::time::Duration::from_secs(30)),
    };
    let claimed = store
        .claim_node(
            RunKey::new(tenant, &run_id),
            claim.clone(),
            vec![log("node_start")],
        )
        .await
        .map_err(failed)?;
    check(
        claimed != ClaimOutcome::Claimed,
        "a claim on a settled run is refused",
    )?;
    let frames = store
        .read_events(RunKey::new(tenant, &run_id), 0, 100)
        .await
        .map_err(failed)?;
    check(
        frames.len() == 3
            && frames.last().map(|frame| frame.event_type) == Some(EventType::Complete),
        "the terminal frame is the last frame",
    )?;
    // A commit that takes the run up again (a revision) lifts the guard.
    let mut revived = state;
    revived.set_status_for_fixtures(RunStatus::Running);
    store
        .commit_step(
            RunKey::new(tenant, &run_id),
            commit(
                version,
                RunStatus::Completed,
                revived,
                vec![log("taken up again")],
                vec![],
                None,
            ),
        )
        .await
        .map_err(failed)?;
    check(
        store
            .append_events(RunKey::new(tenant, &run_id), vec![log("a delta again")])
            .await
            .map_err(failed)?
            == 5,
        "appends land again once a commit takes the run up",
    )?;
    check(
        store
            .claim_node(RunKey::new(tenant, &run_id), claim, vec![log("node_start")])
            .await
            .map_err(failed)?
            == ClaimOutcome::Claimed,
        "claims are taken again once a commit takes the run up",
    )
}
