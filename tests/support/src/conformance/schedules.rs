//! Conformance of the schedule book: kept and read back whole, listed by
//! tenant (oldest first, tenants apart), the tenant's limit, changes
//! conditional on the revision, due schedules (only active, store-kept and
//! due, the most overdue first, at most the limit), deleted.

use std::time::Duration;

use baton_core::basics::instant::Instant;
use baton_core::records::schedules::{MissedFirePolicy, Schedule, ScheduleState, ScheduleTrigger};
use baton_runtime::ports::{ScheduleBook, ScheduleWrite};
use serde_json::json;

use super::{NOW, check};

fn schedule(tenant_id: &str, schedule_id: &str, created: Instant, next: Instant) -> Schedule {
    Schedule {
        schedule_id: schedule_id.into(),
        tenant_id: tenant_id.into(),
        expression: "rate(1 minute)".into(),
        timezone: "UTC".into(),
        envelope: json!({"objective": format!("conformance {schedule_id}"), "outputContract": {"schema": {"type": "object"}}}),
        missed_fires: MissedFirePolicy::Skip,
        description: Some("a conformance schedule".into()),
        state: ScheduleState::Active,
        trigger: ScheduleTrigger::Store,
        created_at: created,
        anchor_at: created,
        next_fire_at: Some(next),
        last_fire_at: None,
        last_run_id: None,
        fires: 0,
        missed: 0,
        revision: 0,
        failed_fires: 0,
        last_error: None,
        retry_fire_at: None,
        trigger_out_of_step: None,
        deleting: false,
    }
}

/// Runs the case on `book`; `unique` keeps tenants apart from other runs of
/// the case on a shared store. The book must hold no other tenant's due
/// schedules at `NOW` (a fresh table or file).
pub async fn schedule_book_conformance(
    book: &dyn ScheduleBook,
    unique: &str,
) -> Result<(), String> {
    let failed = |error: baton_runtime::error::StoreError| format!("store error: {error}");
    let (tenant, other) = (format!("tenant-{unique}-a"), format!("tenant-{unique}-b"));
    let minute = |n: u64| NOW.plus(Duration::from_secs(60 * n));
    let first = schedule(&tenant, "sch_first", NOW, minute(1));
    let second = schedule(&tenant, "sch_second", minute(1), minute(3));
    let theirs = schedule(&other, "sch_theirs", NOW, minute(2));
    for kept in [&first, &second, &theirs] {
        check(
            book.create_schedule(kept, 2).await.map_err(failed)? == ScheduleWrite::Written,
            "a schedule under its tenant's limit is kept",
        )?;
    }
    check(
        book.create_schedule(&schedule(&tenant, "sch_third", NOW, minute(1)), 2)
            .await
            .map_err(failed)?
            == ScheduleWrite::LimitReached { count: 2 },
        "a third schedule past a limit of two is refused",
    )?;
    check(
        book.load_schedule(&tenant, "sch_third")
            .await
            .map_err(failed)?
            .is_none(),
        "the refused schedule was not kept",
    )?;
    check(
        book.load_schedule(&tenant, "sch_first")
            .await
            .map_err(failed)?
            == Some(first.clone()),
        "a schedule reads back whole",
    )?;
    check(
        book.load_schedule(&other, "sch_first")
            .await
            .map_err(failed)?
            .is_none(),
        "another tenant does not read it",
    )?;
    let listed: Vec<String> = book
        .list_schedules(&tenant)
        .await
        .map_err(failed)?
        .into_iter()
        .map(|kept| kept.schedule_id)
        .collect();
    check(
        listed == ["sch_first", "sch_second"],
        &format!("the tenant's schedules, oldest first, its own only: {listed:?}"),
    )?;

    // Due: active, kept by the store, at or before now; most overdue first.
    let due_ids = |due: Vec<Schedule>| -> Vec<String> {
        due.into_iter().map(|kept| kept.schedule_id).collect()
    };
    check(
        book.due_schedules(NOW, 10)
            .await
            .map_err(failed)?
            .is_empty(),
        "nothing is due before its time",
    )?;
    let due = due_ids(book.due_schedules(minute(3), 10).await.map_err(failed)?);
    check(
        due == ["sch_first", "sch_theirs", "sch_second"],
        &format!("every tenant's due schedules, the most overdue first: {due:?}"),
    )?;
    let due = due_ids(book.due_schedules(minute(3), 1).await.map_err(failed)?);
    check(due == ["sch_first"], &format!("at most the limit: {due:?}"))?;

    // A change is conditional on the revision it was made from.
    let mut moved = first.clone();
    moved.revision = 1;
    moved.next_fire_at = Some(minute(10));
    moved.fires = 1;
    moved.last_fire_at = Some(minute(1));
    moved.last_run_id = Some("run-1".into());
    check(
        book.update_schedule(&moved).await.map_err(failed)? == ScheduleWrite::Written,
        "a change from the kept revision is written",
    )?;
    check(
        book.update_schedule(&moved).await.map_err(failed)? == ScheduleWrite::Conflict,
        "the same change again (from a revision no longer kept) is refused",
    )?;
    check(
        book.load_schedule(&tenant, "sch_first")
            .await
            .map_err(failed)?
            == Some(moved.clone()),
        "the change reads back",
    )?;
    let due = due_ids(book.due_schedules(minute(3), 10).await.map_err(failed)?);
    check(
        due == ["sch_theirs", "sch_second"],
        &format!("a schedule moved past now is no longer due: {due:?}"),
    )?;
    let mut paused = second.clone();
    paused.revision = 1;
    paused.state = ScheduleState::Paused;
    paused.next_fire_at = None;
    book.update_schedule(&paused).await.map_err(failed)?;
    let mut elsewhere = theirs.clone();
    elsewhere.revision = 1;
    elsewhere.trigger = ScheduleTrigger::EventBridge;
    book.update_schedule(&elsewhere).await.map_err(failed)?;
    check(
        book.due_schedules(minute(30), 10)
            .await
            .map_err(failed)?
            .len()
            == 1,
        "paused schedules and those EventBridge fires are never due here",
    )?;
    let mut gone = first.clone();
    gone.schedule_id = "sch_never_kept".into();
    gone.revision = 1;
    check(
        book.update_schedule(&gone).await.map_err(failed)? == ScheduleWrite::Conflict,
        "a change to a schedule that is not kept is refused",
    )?;

    check(
        book.delete_schedule(&tenant, "sch_first")
            .await
            .map_err(failed)?,
        "a schedule is deleted",
    )?;
    check(
        !book
            .delete_schedule(&tenant, "sch_first")
            .await
            .map_err(failed)?,
        "deleting it again finds none",
    )?;
    check(
        book.load_schedule(&tenant, "sch_first")
            .await
            .map_err(failed)?
            .is_none()
            && book
                .due_schedules(minute(30), 10)
                .await
                .map_err(failed)?
                .is_empty(),
        "a deleted schedule neither reads nor is due",
    )?;
    check(
        book.create_schedule(&schedule(&tenant, "sch_third", NOW, minute(1)), 2)
            .await
            .map_err(failed)?
            == ScheduleWrite::Written,
        "with one deleted, the tenant is under its limit again",
    )?;

    // Creates arriving at once: exactly the limit is kept.
    let crowd = format!("tenant-{unique}-crowd");
    let creates = (0..8).map(|index| {
        let kept = schedule(&crowd, &format!("sch_crowd_{index}"), NOW, minute(1));
        async move { book.create_schedule(&kept, 3).await }
    });
    let written = futures_util::future::join_all(creates)
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(failed)?
        .into_iter()
        .filter(|write| *write == ScheduleWrite::Written)
        .count();
    let listed = book.list_schedules(&crowd).await.map_err(failed)?.len();
    check(
        written == 3 && listed == 3,
        &format!("eight creates at once under a limit of 3: {written} written, {listed} listed"),
    )?;
    Ok(())
}
