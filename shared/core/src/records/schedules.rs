//! Schedules: an envelope started by the clock. A schedule names an
//! expression in EventBridge Scheduler's syntax (`rate(5 minutes)`,
//! `cron(0 8 ? * MON-FRI *)`), a time zone and a policy for fires that were
//! missed; this module decides, sans-IO, when it fires next and what a tick
//! at `now` does. The same syntax is handed unchanged to EventBridge
//! Scheduler when the API deploys a schedule there, so an expression that
//! passes here is one the cloud takes.
//!
//! Invariants:
//! - A fire's idempotency key is [`fire_idempotency_key`] of the schedule and
//!   the fire time: whoever fires it (`baton serve`'s ticker, EventBridge
//!   through the ingest queue, a redelivery), one fire time makes one run.
//! - A tick fires at most one run per schedule, and `next_fire_at` is always
//!   after the tick's `now`: a schedule never bursts after a pause.

use std::time::Duration;

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::basics::instant::Instant;

/// A fire no later than this after its time is on time; one later was
/// missed, and [`MissedFirePolicy`] decides.
pub const ON_TIME_WINDOW: Duration = Duration::from_secs(60);

/// What the caller sends to create a schedule (`POST /schedules`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScheduleRequest {
    /// `rate(N minute[s]|hour[s]|day[s])` or `cron(minutes hours
    /// day-of-month month day-of-week year)`, EventBridge Scheduler's syntax
    /// (day-of-week 1-7 is SUN-SAT; one of the two day fields is `?`).
    pub expression: String,
    /// An IANA time zone name the cron fields are read in (default `UTC`).
    #[serde(default = "utc")]
    pub timezone: String,
    /// The task envelope each fire submits (without an `idempotencyKey`:
    /// each fire gets its own).
    pub envelope: serde_json::Value,
    /// What a fire missed while nothing could run it becomes.
    #[serde(default)]
    pub missed_fires: MissedFirePolicy,
    /// A line for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

fn utc() -> String {
    "UTC".to_string()
}

/// What fires missed (more than [`ON_TIME_WINDOW`] late: nothing ran the
/// schedule then) become.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema, strum::AsRefStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum MissedFirePolicy {
    /// They are dropped; the schedule goes on from its next time.
    #[default]
    Skip,
    /// One run is started for the latest of them, however many there were.
    CatchUpOnce,
}

/// Whether a schedule fires.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, strum::AsRefStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ScheduleState {
    Active,
    Paused,
}

/// Who fires a schedule.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, strum::AsRefStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ScheduleTrigger {
    /// The process that keeps the store's schedules (`baton serve`).
    Store,
    /// An EventBridge Scheduler schedule, sending each fire to the ingest
    /// queue.
    EventBridge,
}

/// A schedule as kept in the store and shown to its tenant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Schedule {
    pub schedule_id: String,
    pub tenant_id: String,
    pub expression: String,
    pub timezone: String,
    pub envelope: serde_json::Value,
    pub missed_fires: MissedFirePolicy,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub state: ScheduleState,
    pub trigger: ScheduleTrigger,
    #[serde(with = "crate::basics::instant::rfc3339")]
    #[schemars(with = "String")]
    pub created_at: Instant,
    /// Where a rate counts from: creation, or the last resume.
    #[serde(with = "crate::basics::instant::rfc3339")]
    #[schemars(with = "String")]
    pub anchor_at: Instant,
    /// The next time it fires (none while paused, or when the expression
    /// has no later time).
    #[serde(
        default,
        with = "crate::basics::instant::rfc3339_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<String>")]
    pub next_fire_at: Option<Instant>,
    /// The fire time of the last run it started.
    #[serde(
        default,
        with = "crate::basics::instant::rfc3339_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<String>")]
    pub last_fire_at: Option<Instant>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_id: Option<String>,
    /// Runs it started.
    #[serde(default)]
    pub fires: u64,
    /// Fires missed and dropped (or folded into one catch-up run).
    #[serde(default)]
    pub missed: u64,
    /// Moves by one with every change; a change is conditional on it.
    #[serde(default)]
    pub revision: u64,
}

/// An expression that is not one Baton (and EventBridge Scheduler) takes,
/// or a time zone that does not exist: `field` names the request's field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ScheduleExpressionError {
    pub field: &'static str,
    pub message: String,
}

impl ScheduleExpressionError {
    fn expression(message: impl Into<String>) -> Self {
        ScheduleExpressionError {
            field: "expression",
            message: message.into(),
        }
    }
}

/// A parsed expression in its time zone.
#[derive(Debug, Clone)]
pub struct ScheduleTimes {
    kind: TimesKind,
    zone: jiff::tz::TimeZone,
}

#[derive(Debug, Clone)]
enum TimesKind {
    Rate(Duration),
    Cron(Box<Cron>),
}

impl ScheduleTimes {
    /// Parses `expression` read in `timezone`.
    pub fn parse(expression: &str, timezone: &str) -> Result<Self, ScheduleExpressionError> {
        let zone = jiff::tz::TimeZone::get(timezone).map_err(|_| ScheduleExpressionError {
            field: "timezone",
            message: format!(
                "`{timezone}` is not an IANA time zone name (e.g. `Europe/Paris`, `UTC`)"
            ),
        })?;
        let expression = expression.trim();
        let kind = if let Some(inner) = strip_call(expression, "rate") {
            TimesKind::Rate(parse_rate(inner)?)
        } else if let Some(inner) = strip_call(expression, "cron") {
            TimesKind::Cron(Box::new(parse_cron(inner)?))
        } else {
            return Err(ScheduleExpressionError::expression(format!(
                "`{expression}` is neither `rate(…)` nor `cron(…)`, e.g. `rate(5 minutes)` or `cron(0 8 ? * MON-FRI *)`"
            )));
        };
        Ok(ScheduleTimes { kind, zone })
    }

    /// The first fire time strictly after `after`; a rate counts its
    /// periods from `anchor`.
    pub fn next_after(&self, after: Instant, anchor: Instant) -> Option<Instant> {
        match &self.kind {
            TimesKind::Rate(period) => {
                let period = period.as_millis() as u64;
                let start = anchor.unix_millis();
                let after = after.unix_millis();
                if after < start {
                    return Some(Instant::from_unix_millis(start + period));
                }
                let periods = (after - start) / period + 1;
                Some(Instant::from_unix_millis(start + periods * period))
            }
            TimesKind::Cron(cron) => {
                let zoned = self.zoned(after)?;
                let next = cron.find_next_occurrence(&zoned, false).ok()?;
                zoned_instant(&next)
            }
        }
    }

    /// The latest fire time at or before `at` that is not before `since`.
    fn latest_at_or_before(&self, at: Instant, since: Instant, anchor: Instant) -> Option<Instant> {
        let latest = match &self.kind {
            TimesKind::Rate(period) => {
                let period = period.as_millis() as u64;
                let start = anchor.unix_millis();
                let at = at.unix_millis();
                if at <= start {
                    return None;
                }
                let periods = (at - start) / period;
                (periods > 0).then(|| Instant::from_unix_millis(start + periods * period))?
            }
            TimesKind::Cron(cron) => {
                let zoned = self.zoned(at)?;
                let previous = cron.find_previous_occurrence(&zoned, true).ok()?;
                zoned_instant(&previous)?
            }
        };
        (latest >= since).then_some(latest)
    }

    fn zoned(&self, at: Instant) -> Option<jiff::Zoned> {
        let timestamp =
            jiff::Timestamp::from_millisecond(i64::try_from(at.unix_millis()).ok()?).ok()?;
        Some(timestamp.to_zoned(self.zone.clone()))
    }
}

fn zoned_instant(zoned: &jiff::Zoned) -> Option<Instant> {
    u64::try_from(zoned.timestamp().as_millisecond())
        .ok()
        .map(Instant::from_unix_millis)
}

fn strip_call<'a>(expression: &'a str, name: &str) -> Option<&'a str> {
    expression
        .strip_prefix(name)?
        .trim_start()
        .strip_prefix('(')?
        .strip_suffix(')')
        .map(str::trim)
}

fn parse_rate(inner: &str) -> Result<Duration, ScheduleExpressionError> {
    let mut words = inner.split_whitespace();
    let (Some(number), Some(unit), None) = (words.next(), words.next(), words.next()) else {
        return Err(ScheduleExpressionError::expression(format!(
            "`rate({inner})` must be `rate(N unit)`, e.g. `rate(5 minutes)`"
        )));
    };
    let number: u64 = number.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
        ScheduleExpressionError::expression(format!(
            "`{number}` in `rate({inner})` is not a positive whole number"
        ))
    })?;
    let (seconds, singular) = match unit {
        "minute" | "minutes" => (60, unit == "minute"),
        "hour" | "hours" => (3_600, unit == "hour"),
        "day" | "days" => (86_400, unit == "day"),
        other => {
            return Err(ScheduleExpressionError::expression(format!(
                "`{other}` in `rate({inner})` is not a unit: minute(s), hour(s) or day(s)"
            )));
        }
    };
    // EventBridge Scheduler's own rule: `rate(1 minute)`, `rate(5 minutes)`.
    if singular != (number == 1) {
        return Err(ScheduleExpressionError::expression(format!(
            "`rate({inner})`: the unit is singular for 1 and plural otherwise (`rate(1 hour)`, `rate(2 hours)`)"
        )));
    }
    number
        .checked_mul(seconds)
        .filter(|total| *total <= 366 * 86_400)
        .map(Duration::from_secs)
        .ok_or_else(|| {
            ScheduleExpressionError::expression(format!("`rate({inner})` is longer than a year"))
        })
}

fn parse_cron(inner: &str) -> Result<Cron, ScheduleExpressionError> {
    let fields: Vec<&str> = inner.split_whitespace().collect();
    if fields.len() != 6 {
        return Err(ScheduleExpressionError::expression(format!(
            "`cron({inner})` has {} fields; it takes six: minutes hours day-of-month month day-of-week year",
            fields.len()
        )));
    }
    // EventBridge Scheduler's own rule: one of the two day fields is `?`.
    if (fields[2] == "?") == (fields[4] == "?") {
        return Err(ScheduleExpressionError::expression(format!(
            "`cron({inner})`: exactly one of day-of-month and day-of-week must be `?`"
        )));
    }
    CronParser::builder()
        .seconds(Seconds::Required)
        .year(Year::Required)
        .alternative_weekdays(true)
        .build()
        .parse(&format!("0 {}", fields.join(" ")))
        .map_err(|error| ScheduleExpressionError::expression(format!("`cron({inner})`: {error}")))
}

/// What a tick at `now` does with one schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirePlan {
    /// The fire time to start a run for, if any.
    pub fire_at: Option<Instant>,
    /// Fire times that passed without a run of their own.
    pub missed: u64,
    /// When it fires next (after `now`).
    pub next_fire_at: Option<Instant>,
}

/// What a tick at `now` does with `schedule`: nothing before its
/// `next_fire_at`; after it, at most one run, for the latest fire time due
/// (on time, or missed under [`MissedFirePolicy::CatchUpOnce`]), and its
/// next time after `now`.
pub fn plan_fires(schedule: &Schedule, times: &ScheduleTimes, now: Instant) -> Option<FirePlan> {
    if schedule.state != ScheduleState::Active {
        return None;
    }
    let due = schedule.next_fire_at.filter(|due| *due <= now)?;
    let latest = times
        .latest_at_or_before(now, due, schedule.anchor_at)
        .unwrap_or(due);
    let passed = count_fires(times, due, latest, schedule.anchor_at);
    let on_time = now.since(latest) <= ON_TIME_WINDOW;
    let fire_at =
        (on_time || schedule.missed_fires == MissedFirePolicy::CatchUpOnce).then_some(latest);
    Some(FirePlan {
        fire_at,
        missed: passed - u64::from(fire_at.is_some()),
        next_fire_at: times.next_after(now, schedule.anchor_at),
    })
}

/// Fire times from `first` to `last`, both counted (at most 10,000 are
/// walked; more count as 10,000).
fn count_fires(times: &ScheduleTimes, first: Instant, last: Instant, anchor: Instant) -> u64 {
    let mut count = 1;
    let mut at = first;
    while count < 10_000 {
        match times.next_after(at, anchor) {
            Some(next) if next <= last => {
                count += 1;
                at = next;
            }
            _ => break,
        }
    }
    count
}

/// Whether a fire delivered at `now` for `fire_at` (EventBridge through the
/// ingest queue) still starts a run: on time, or late under
/// [`MissedFirePolicy::CatchUpOnce`].
pub fn delivered_fire_runs(policy: MissedFirePolicy, fire_at: Instant, now: Instant) -> bool {
    policy == MissedFirePolicy::CatchUpOnce || now.since(fire_at) <= ON_TIME_WINDOW
}

/// The idempotency key of the run a fire starts: one fire time, one run.
pub fn fire_idempotency_key(schedule_id: &str, fire_at: Instant) -> String {
    format!("schedule:{schedule_id}:{}", fire_at.rfc3339())
}

#[cfg(test)]
mod tests {
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
}
