//! Tests of schedule times, fires and failures.
use super::*;

fn at(text: &str) -> Instant {
    Instant::parse_rfc3339(text).unwrap()
}

fn schedule(expression: &str, timezone: &str, created: &str) -> (Schedule, ScheduleTimes) {
    let times = ScheduleTimes::parse(expression, timezone).unwrap();
    let created_at = at(created);
    let schedule = Schedule {
        schedule_id: "sch_1".into(),
        tenant_id: "t".into(),
        expression: expression.into(),
        timezone: timezone.into(),
        envelope: serde_json::json!({}),
        missed_fires: MissedFirePolicy::Skip,
        description: None,
        state: ScheduleState::Active,
        trigger: ScheduleTrigger::Store,
        created_at,
        anchor_at: created_at,
        next_fire_at: times.next_after(created_at, created_at),
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
    };
    (schedule, times)
}

#[test]
fn a_cron_is_read_in_its_time_zone_across_a_daylight_saving_change() {
    let times = ScheduleTimes::parse("cron(0 8 * * ? *)", "Europe/Paris").unwrap();
    let anchor = at("2026-03-27T00:00:00Z");
    // 08:00 in Paris is 07:00 UTC before 29 March 2026, 06:00 after.
    assert_eq!(
        times.next_after(anchor, anchor),
        Some(at("2026-03-27T07:00:00Z"))
    );
    assert_eq!(
        times.next_after(at("2026-03-29T00:00:00Z"), anchor),
        Some(at("2026-03-29T06:00:00Z"))
    );
}

#[test]
fn day_of_week_counts_from_sunday_as_one() {
    let times = ScheduleTimes::parse("cron(30 9 ? * 2 *)", "UTC").unwrap();
    // 2026-11-28 is a Saturday: the next day 2 (Monday) is 30 November.
    let now = at("2026-11-28T12:00:00Z");
    assert_eq!(times.next_after(now, now), Some(at("2026-11-30T09:30:00Z")));
}

#[test]
fn a_rate_counts_from_its_anchor() {
    let times = ScheduleTimes::parse("rate(5 minutes)", "UTC").unwrap();
    let anchor = at("2026-11-28T12:00:10Z");
    assert_eq!(
        times.next_after(anchor, anchor),
        Some(at("2026-11-28T12:05:10Z"))
    );
    assert_eq!(
        times.next_after(at("2026-11-28T12:05:10Z"), anchor),
        Some(at("2026-11-28T12:10:10Z"))
    );
}

#[test]
fn bad_expressions_and_zones_name_their_field() {
    for (expression, zone, field) in [
        ("every 5 minutes", "UTC", "expression"),
        ("rate(0 minutes)", "UTC", "expression"),
        ("rate(1 minutes)", "UTC", "expression"),
        ("rate(5 weeks)", "UTC", "expression"),
        ("cron(0 8 * * *)", "UTC", "expression"),
        ("cron(0 8 * * * *)", "UTC", "expression"),
        ("cron(0 25 * * ? *)", "UTC", "expression"),
        ("rate(5 minutes)", "Mars/Olympus", "timezone"),
    ] {
        let error = ScheduleTimes::parse(expression, zone).unwrap_err();
        assert_eq!(error.field, field, "{expression} in {zone}: {error}");
    }
}

#[test]
fn an_on_time_tick_fires_once_and_moves_past_now() {
    let (schedule, times) = schedule("rate(1 minute)", "UTC", "2026-11-28T12:00:00Z");
    assert_eq!(
        plan_fires(&schedule, &times, at("2026-11-28T12:00:59Z")),
        None
    );
    let plan = plan_fires(&schedule, &times, at("2026-11-28T12:01:02Z")).unwrap();
    assert_eq!(plan.fire_at, Some(at("2026-11-28T12:01:00Z")));
    assert_eq!(plan.missed, 0);
    assert_eq!(plan.next_fire_at, Some(at("2026-11-28T12:02:00Z")));
}

#[test]
fn missed_fires_are_skipped_or_caught_up_once() {
    let (mut schedule, times) = schedule("rate(5 minutes)", "UTC", "2026-11-28T12:00:00Z");
    // Nothing ran the schedule for an hour: the latest fire is on time.
    let now = at("2026-11-28T13:00:30Z");
    let on_time = plan_fires(&schedule, &times, now).unwrap();
    assert_eq!(on_time.fire_at, Some(at("2026-11-28T13:00:00Z")));
    assert_eq!(on_time.missed, 11);
    // The latest fire is 90 s late.
    let late = at("2026-11-28T13:01:30Z");
    let skipped = plan_fires(&schedule, &times, late).unwrap();
    assert_eq!(skipped.fire_at, None);
    assert_eq!(skipped.missed, 12);
    assert_eq!(skipped.next_fire_at, Some(at("2026-11-28T13:05:00Z")));
    schedule.missed_fires = MissedFirePolicy::CatchUpOnce;
    let caught_up = plan_fires(&schedule, &times, late).unwrap();
    assert_eq!(caught_up.fire_at, Some(at("2026-11-28T13:00:00Z")));
    assert_eq!(caught_up.missed, 11);
    assert_eq!(caught_up.next_fire_at, Some(at("2026-11-28T13:05:00Z")));
}

#[test]
fn a_paused_schedule_never_fires() {
    let (mut schedule, times) = schedule("rate(1 minute)", "UTC", "2026-11-28T12:00:00Z");
    schedule.state = ScheduleState::Paused;
    assert_eq!(
        plan_fires(&schedule, &times, at("2026-11-28T12:01:00Z")),
        None
    );
}

#[test]
fn a_delivered_fire_runs_on_time_or_under_catch_up() {
    let fire = at("2026-11-28T12:00:00Z");
    assert!(delivered_fire_runs(
        MissedFirePolicy::Skip,
        fire,
        at("2026-11-28T12:00:40Z")
    ));
    assert!(!delivered_fire_runs(
        MissedFirePolicy::Skip,
        fire,
        at("2026-11-28T12:05:00Z")
    ));
    assert!(delivered_fire_runs(
        MissedFirePolicy::CatchUpOnce,
        fire,
        at("2026-11-28T12:05:00Z")
    ));
    assert_eq!(
        fire_idempotency_key("sch_1", fire),
        "schedule:sch_1:2026-11-28T12:00:00Z"
    );
}

#[test]
fn a_trigger_out_of_step_is_due_for_the_keeper_and_backs_off_like_a_failed_fire() {
    let (mut schedule, _) = schedule("rate(1 hour)", "UTC", "2026-01-01T00:00:00Z");
    schedule.trigger = ScheduleTrigger::EventBridge;
    assert_eq!(schedule.keeper_due_at(), None, "EventBridge fires it");
    let now = at("2026-01-01T00:10:00Z");
    schedule.trigger_pending(now);
    let pending = schedule.trigger_out_of_step.clone().unwrap();
    assert_eq!((pending.since, pending.attempts), (now, 0));
    assert_eq!(
        schedule.keeper_due_at(),
        Some(now.plus(fire_retry_delay(1)))
    );
    schedule.trigger_failed(now, "EventBridge Scheduler: throttled");
    schedule.trigger_failed(now, "EventBridge Scheduler: throttled");
    let failed = schedule.trigger_out_of_step.clone().unwrap();
    assert_eq!((failed.since, failed.attempts), (now, 2), "since the first");
    assert_eq!(failed.retry_at, now.plus(Duration::from_secs(60)));
    assert_eq!(fire_retry_delay(30), Duration::from_secs(15 * 60), "capped");
    // A schedule the store fires is due at the earlier of the two.
    schedule.trigger = ScheduleTrigger::Store;
    assert!(failed.retry_at < schedule.next_fire_at.unwrap());
    assert_eq!(schedule.keeper_due_at(), Some(failed.retry_at));
    schedule.trigger_out_of_step = None;
    assert_eq!(schedule.keeper_due_at(), schedule.next_fire_at);
}
