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
    /// Makes the creation once: sent again with the same key (here or as
    /// the `Idempotency-Key` header), it answers with the schedule the
    /// first made (kept 24 h) and makes no second one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
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
    /// Fires in a row whose run could not be started (0 after one that
    /// started, or a resume); at [`MAX_FAILED_FIRES`] the schedule pauses.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed_fires: u32,
    /// The last fire whose run could not be started: when, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<ScheduleFailure>,
    /// The fire time that failed, tried again at `nextFireAt` (after a
    /// back-off), under the same idempotency key.
    #[serde(
        default,
        with = "crate::basics::instant::rfc3339_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<String>")]
    pub retry_fire_at: Option<Instant>,
    /// The store and the schedule's trigger (EventBridge Scheduler in the
    /// cloud) disagree: the last change was kept but its trigger could not
    /// be set. The keeper tries again until they agree, then clears it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger_out_of_step: Option<TriggerOutOfStep>,
    /// Deleted, its trigger not yet removed (`triggerOutOfStep` says why):
    /// it fires no more, refuses every change, and is gone from the store
    /// once the keeper has removed its trigger.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleting: bool,
}

/// A change the store keeps but the trigger has not taken yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TriggerOutOfStep {
    /// When the trigger first refused the change.
    #[serde(with = "crate::basics::instant::rfc3339")]
    #[schemars(with = "String")]
    pub since: Instant,
    /// Tries so far (the first one included).
    pub attempts: u32,
    /// When the keeper tries again.
    #[serde(with = "crate::basics::instant::rfc3339")]
    #[schemars(with = "String")]
    pub retry_at: Instant,
    /// The trigger's last error.
    pub message: String,
}

fn is_zero(count: &u32) -> bool {
    *count == 0
}

/// Why a fire started no run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScheduleFailure {
    #[serde(with = "crate::basics::instant::rfc3339")]
    #[schemars(with = "String")]
    pub at: Instant,
    /// The fire time whose run could not be started.
    #[serde(with = "crate::basics::instant::rfc3339")]
    #[schemars(with = "String")]
    pub fire_at: Instant,
    pub message: String,
    /// The schedule paused itself after this failure.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
}

/// Failed fires in a row after which a schedule pauses itself.
pub const MAX_FAILED_FIRES: u32 = 5;

/// How long after its `failures`-th failure in a row a fire is tried
/// again: 30 s, doubled each time, at most 15 minutes.
pub fn fire_retry_delay(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(10);
    (Duration::from_secs(30) * 2u32.pow(doublings)).min(Duration::from_secs(15 * 60))
}

impl Schedule {
    /// When the store's keeper next has work on it: its next fire (an
    /// active schedule the store triggers), or the next try at setting a
    /// trigger that is out of step, whichever is first. `None`: nothing to
    /// do until something changes it.
    pub fn keeper_due_at(&self) -> Option<Instant> {
        let fire = (self.state == ScheduleState::Active && self.trigger == ScheduleTrigger::Store)
            .then_some(self.next_fire_at)
            .flatten();
        let trigger = self.trigger_out_of_step.as_ref().map(|out| out.retry_at);
        match (fire, trigger) {
            (Some(fire), Some(trigger)) => Some(fire.min(trigger)),
            (fire, trigger) => fire.or(trigger),
        }
    }

    /// A change is about to be handed to the trigger: marked out of step
    /// first, so a process that dies before the trigger took it leaves the
    /// keeper a retry (at `now` plus the back-off), not a silent
    /// disagreement.
    pub fn trigger_pending(&mut self, now: Instant) {
        let out = self
            .trigger_out_of_step
            .get_or_insert_with(|| TriggerOutOfStep {
                since: now,
                attempts: 0,
                retry_at: now,
                message: "the change has not reached the trigger yet".into(),
            });
        out.retry_at = now.plus(fire_retry_delay(out.attempts.max(1)));
    }

    /// Setting its trigger failed at `now` with `message`: kept out of step
    /// and tried again after a back-off (as a failed fire's).
    pub fn trigger_failed(&mut self, now: Instant, message: &str) {
        let (since, attempts) = self
            .trigger_out_of_step
            .as_ref()
            .map_or((now, 1), |out| (out.since, out.attempts.saturating_add(1)));
        self.trigger_out_of_step = Some(TriggerOutOfStep {
            since,
            attempts,
            retry_at: now.plus(fire_retry_delay(attempts)),
            message: message.chars().take(500).collect(),
        });
    }

    /// A fire of `fire_at` failed at `now` with `message`: tried again
    /// after a back-off, or, at [`MAX_FAILED_FIRES`] in a row, the schedule
    /// pauses itself (the error says so).
    pub fn fire_failed(&mut self, fire_at: Instant, now: Instant, message: &str) {
        self.failed_fires = self.failed_fires.saturating_add(1);
        let paused = self.failed_fires >= MAX_FAILED_FIRES;
        let mut message: String = message.chars().take(500).collect();
        if paused {
            message.push_str(&format!(
                " ({} fires in a row failed: the schedule paused itself; resume it once the cause is fixed)",
                self.failed_fires
            ));
            self.state = ScheduleState::Paused;
            self.next_fire_at = None;
            self.retry_fire_at = None;
        } else {
            self.retry_fire_at = Some(fire_at);
            self.next_fire_at = Some(now.plus(fire_retry_delay(self.failed_fires)));
        }
        self.last_error = Some(ScheduleFailure {
            at: now,
            fire_at,
            message,
            paused,
        });
    }

    /// A fire started its run: the failures in a row are over.
    pub fn fire_started(&mut self) {
        self.failed_fires = 0;
        self.retry_fire_at = None;
    }
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
    // A failed fire tried again: the same fire time (its key), and the
    // fire times that passed meanwhile are missed.
    if let Some(retried) = schedule.retry_fire_at {
        let missed = times
            .next_after(retried, schedule.anchor_at)
            .filter(|first| *first <= now)
            .map_or(0, |first| {
                let last = times
                    .latest_at_or_before(now, first, schedule.anchor_at)
                    .unwrap_or(first);
                count_fires(times, first, last, schedule.anchor_at)
            });
        return Some(FirePlan {
            fire_at: Some(retried),
            missed,
            next_fire_at: times.next_after(now, schedule.anchor_at),
        });
    }
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
mod tests;
