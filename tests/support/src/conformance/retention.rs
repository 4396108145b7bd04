//! Conformance of what keeps a tenant's costs flat as its history grows:
//! the live-run counter the commits keep (a create at the limit refused,
//! writing nothing), the runs list by status, and retention (an ended run
//! past its retention is gone, a parked run of the same age is whole and
//! resumes).

use baton_core::basics::ids::RunKey;
use baton_core::state::listing::RunListQuery;
use baton_core::state::run::RunStatus;
use baton_runtime::clock::OffsetClock;
use baton_runtime::error::StoreError;
use baton_runtime::ports::{Clock, CreateOutcome, RetentionUpkeep, RunStore};

use super::{check, commit, log, new_run};

/// The runs the case left: the adapter's own test checks its storage holds
/// nothing of `ended_run_id` (or only what its store deletes by itself).
#[derive(Debug, Clone)]
pub struct RetentionCase {
    pub tenant_id: String,
    pub ended_run_id: String,
    pub parked_run_id: String,
}

/// Retention kept for the case's ended run: one day.
const RETAINED: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

async fn listed(
    store: &dyn RunStore,
    tenant: &str,
    status: Option<RunStatus>,
) -> Result<Vec<String>, StoreError> {
    let page = store
        .list_runs(
            tenant,
            &RunListQuery {
                status,
                limit: 100,
                cursor: None,
                forked_from: None,
            },
        )
        .await?;
    Ok(page.runs.into_iter().map(|run| run.run_id).collect())
}

/// Runs the case on `store`, whose clock is `clock`.
pub async fn retention_conformance(
    store: &dyn RunStore,
    clock: &OffsetClock,
    upkeep: &dyn RetentionUpkeep,
    unique: &str,
) -> Result<RetentionCase, String> {
    let failed = |error: StoreError| format!("store error: {error}");
    let tenant = format!("tenant-{unique}-retention");
    let ended_id = format!("ended-{unique}");
    let parked_id = format!("parked-{unique}");
    let late_id = format!("late-{unique}");

    // The counter: two runs at work.
    check(
        store.live_runs(&tenant).await.map_err(failed)? == 0,
        "a tenant without runs has none at work",
    )?;
    let (ended, events, outbox) = new_run(&tenant, &ended_id);
    store
        .create_run(&ended, events, outbox, Some(&format!("key-{ended_id}")))
        .await
        .map_err(failed)?;
    let (parked, events, outbox) = new_run(&tenant, &parked_id);
    store
        .create_run(&parked, events, outbox, None)
        .await
        .map_err(failed)?;
    check(
        store.live_runs(&tenant).await.map_err(failed)? == 2,
        "two queued runs are two at work",
    )?;
    let (late, late_events, late_outbox) = new_run(&tenant, &late_id);
    let refused = store
        .create_run_within(
            &late,
            late_events.clone(),
            late_outbox.clone(),
            None,
            Some(2),
        )
        .await
        .map_err(failed)?;
    check(
        refused == CreateOutcome::LiveRunLimitReached { live_runs: 2 },
        "a create at the live-run limit is refused with the count",
    )?;
    check(
        store
            .load_run(RunKey::new(&tenant, &late_id))
            .await
            .map_err(failed)?
            .is_none()
            && store.live_runs(&tenant).await.map_err(failed)? == 2,
        "the refused create wrote nothing and counted nothing",
    )?;

    // Running still counts; parked and ended do not.
    let mut running = ended.clone();
    running.set_status_for_fixtures(RunStatus::Running);
    let version = store
        .commit_step(
            RunKey::new(&tenant, &ended_id),
            commit(1, RunStatus::Queued, running.clone(), vec![], vec![], None),
        )
        .await
        .map_err(failed)?;
    let mut waiting = parked.clone();
    waiting.set_status_for_fixtures(RunStatus::AwaitingHuman);
    let parked_version = store
        .commit_step(
            RunKey::new(&tenant, &parked_id),
            commit(
                1,
                RunStatus::Queued,
                waiting,
                vec![log("parked")],
                vec![],
                None,
            ),
        )
        .await
        .map_err(failed)?;
    check(
        store.live_runs(&tenant).await.map_err(failed)? == 1,
        "a parked run is not at work",
    )?;
    let mut completed = running;
    completed.set_status_for_fixtures(RunStatus::Completed);
    let mut ending = commit(
        version,
        RunStatus::Running,
        completed,
        vec![log("ended")],
        vec![],
        None,
    );
    ending.retain_until = Some(clock.now().plus(RETAINED));
    store
        .commit_step(RunKey::new(&tenant, &ended_id), ending)
        .await
        .map_err(failed)?;
    check(
        store.live_runs(&tenant).await.map_err(failed)? == 0,
        "an ended run is not at work",
    )?;
    check(
        store
            .create_run_within(&late, late_events, late_outbox, None, Some(2))
            .await
            .map_err(failed)?
            == CreateOutcome::Created
            && store.live_runs(&tenant).await.map_err(failed)? == 1,
        "below the limit again, the create lands and counts",
    )?;

    // The list by status.
    check(
        listed(store, &tenant, Some(RunStatus::Completed))
            .await
            .map_err(failed)?
            == vec![ended_id.clone()],
        "the completed list holds the ended run alone",
    )?;
    check(
        listed(store, &tenant, Some(RunStatus::AwaitingHuman))
            .await
            .map_err(failed)?
            == vec![parked_id.clone()],
        "the awaiting list holds the parked run alone",
    )?;
    check(
        listed(store, &tenant, Some(RunStatus::Running))
            .await
            .map_err(failed)?
            .is_empty(),
        "no run is listed under a status it left",
    )?;

    // Two days on: the ended run is past its retention, the parked one
    // (as old) waits on.
    clock.advance(RETAINED * 2);
    loop {
        let batch = upkeep
            .expire_ended_runs(clock.now(), 1)
            .await
            .map_err(|error| format!("retention's batch failed: {error}"))?;
        if !batch.more {
            break;
        }
    }
    check(
        store
            .load_run(RunKey::new(&tenant, &ended_id))
            .await
            .map_err(failed)?
            .is_none(),
        "an ended run past its retention does not load",
    )?;
    // Its idempotency key expired with it: submitting under it again makes
    // a new run (not the old one's ghost, not an error).
    let again_id = ended_id.replacen("ended", "resubmitted", 1);
    let (again, events, outbox) = new_run(&tenant, &again_id);
    check(
        store
            .create_run(&again, events, outbox, Some(&format!("key-{ended_id}")))
            .await
            .map_err(failed)?
            == CreateOutcome::Created
            && store
                .load_run(RunKey::new(&tenant, &again_id))
                .await
                .map_err(failed)?
                .is_some(),
        "an expired run's idempotency key makes a new run",
    )?;
    let everything = listed(store, &tenant, None).await.map_err(failed)?;
    check(
        !everything.contains(&ended_id)
            && listed(store, &tenant, Some(RunStatus::Completed))
                .await
                .map_err(failed)?
                .is_empty(),
        "an ended run past its retention is in no list",
    )?;
    check(
        everything.contains(&parked_id) && everything.contains(&late_id),
        "runs that wait or work are listed whatever their age",
    )?;
    let parked_now = store
        .load_run(RunKey::new(&tenant, &parked_id))
        .await
        .map_err(failed)?
        .ok_or("a parked run as old as the expired one still loads")?;
    check(
        parked_now.version == parked_version
            && parked_now.state.status() == RunStatus::AwaitingHuman,
        "the parked run is whole",
    )?;
    let frames = store
        .read_events(RunKey::new(&tenant, &parked_id), 0, 100)
        .await
        .map_err(failed)?;
    check(
        frames.len() == 2,
        "the parked run keeps its frames past the ended run's retention",
    )?;
    let mut resumed = parked_now.state;
    resumed.set_status_for_fixtures(RunStatus::Running);
    store
        .commit_step(
            RunKey::new(&tenant, &parked_id),
            commit(
                parked_version,
                RunStatus::AwaitingHuman,
                resumed,
                vec![log("resumed")],
                vec![],
                None,
            ),
        )
        .await
        .map_err(failed)?;
    check(
        store.live_runs(&tenant).await.map_err(failed)? == 3,
        "the parked run resumes, at work again (with the late run and the one under the expired key)",
    )?;
    Ok(RetentionCase {
        tenant_id: tenant,
        ended_run_id: ended_id,
        parked_run_id: parked_id,
    })
}
