//! Schedules: an envelope started by the clock (`baton_core::records::schedules`
//! decides when). The service keeps them in the store's [`ScheduleBook`],
//! has them fired by its [`ScheduleTriggers`] (the store's keeper in
//! `baton serve`, EventBridge Scheduler in the cloud), and starts each
//! fire's run through [`RunService::submit`] with the fire's idempotency
//! key: whoever fires a fire time, and however often, it makes one run.

use std::sync::Arc;

use baton_core::basics::instant::Instant;
use baton_core::records::schedules::{
    self, Schedule, ScheduleRequest, ScheduleState, ScheduleTimes, ScheduleTrigger,
    fire_idempotency_key,
};
use serde_json::Value;

use super::runs::{RunService, SubmittedRun};
use crate::error::RuntimeError;
use crate::ports::{Clock, IdGenerator, ScheduleBook, ScheduleTriggers, ScheduleWrite};

/// The default number of schedules a tenant may keep
/// (`BATON_MAX_SCHEDULES_PER_TENANT`).
pub const DEFAULT_MAX_SCHEDULES_PER_TENANT: usize = 100;

/// Schedules due at once that one tick handles; the rest wait for the next.
const DUE_PER_TICK: usize = 100;

/// Due schedules a tick reads, earliest first, to share its
/// [`DUE_PER_TICK`] fairly among their tenants.
const DUE_READ_PER_TICK: usize = 4 * DUE_PER_TICK;

/// Rounds a tick retries a schedule another process moved meanwhile.
const UPDATE_ROUNDS: usize = 4;

/// What one tick of the keeper did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleTick {
    /// Runs started (or found already started for their fire time).
    pub runs: Vec<FiredRun>,
    /// Fire times dropped as missed.
    pub missed: u64,
    /// Schedules whose fire could not be submitted (recorded on the
    /// schedule, tried again after a back-off under the same idempotency
    /// key).
    pub failed: usize,
    /// Schedules that paused themselves: their fire failed
    /// `MAX_FAILED_FIRES` times in a row.
    pub paused: usize,
    /// Schedules whose trigger (EventBridge Scheduler) took a change it
    /// had refused before: the store and the trigger agree again.
    pub triggers_settled: usize,
    /// Schedules whose trigger refused again; tried after a back-off.
    pub triggers_out_of_step: usize,
}

/// At most `limit` of the due schedules (earliest first), taken in turns
/// across their tenants: a tenant with a hundred due schedules takes one
/// place per round like a tenant with one, so no tenant fills a tick.
fn fair_share(due: Vec<Schedule>, limit: usize) -> Vec<Schedule> {
    let mut queues: Vec<(String, std::collections::VecDeque<Schedule>)> = Vec::new();
    for schedule in due {
        match queues
            .iter_mut()
            .find(|(tenant_id, _)| *tenant_id == schedule.tenant_id)
        {
            Some((_, queue)) => queue.push_back(schedule),
            None => queues.push((schedule.tenant_id.clone(), [schedule].into())),
        }
    }
    let mut shared = Vec::with_capacity(limit);
    while shared.len() < limit && queues.iter().any(|(_, queue)| !queue.is_empty()) {
        for (_, queue) in &mut queues {
            if shared.len() == limit {
                break;
            }
            if let Some(schedule) = queue.pop_front() {
                shared.push(schedule);
            }
        }
    }
    shared
}

/// A run a fire started.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FiredRun {
    pub tenant_id: String,
    pub schedule_id: String,
    #[serde(with = "baton_core::basics::instant::rfc3339")]
    pub fire_at: Instant,
    pub run_id: String,
    /// The fire time had already started this run.
    pub deduplicated: bool,
}

/// The schedule use cases.
pub struct ScheduleService {
    book: Arc<dyn ScheduleBook>,
    triggers: Arc<dyn ScheduleTriggers>,
    runs: Arc<RunService>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    max_per_tenant: usize,
}

impl ScheduleService {
    pub fn new(
        book: Arc<dyn ScheduleBook>,
        triggers: Arc<dyn ScheduleTriggers>,
        runs: Arc<RunService>,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdGenerator>,
        max_per_tenant: usize,
    ) -> Self {
        ScheduleService {
            book,
            triggers,
            runs,
            clock,
            ids,
            max_per_tenant,
        }
    }

    /// Creates a schedule from a `POST /schedules` body: the expression,
    /// the time zone and the envelope are checked first (errors name the
    /// JSON path), then it is kept and its trigger installed; a trigger that
    /// cannot be installed leaves nothing kept.
    pub async fn create(&self, tenant_id: &str, body: &Value) -> Result<Schedule, RuntimeError> {
        if !body.is_object() {
            return Err(RuntimeError::InvalidSchedule {
                path: "$".into(),
                message: "the body must be a JSON object".into(),
            });
        }
        let request: ScheduleRequest = serde_path_to_error::deserialize(body).map_err(|error| {
            let (path, message) = baton_core::contracts::envelope::located_serde_error(error);
            RuntimeError::InvalidSchedule { path, message }
        })?;
        let times =
            ScheduleTimes::parse(&request.expression, &request.timezone).map_err(|error| {
                RuntimeError::InvalidSchedule {
                    path: format!("$.{}", error.field),
                    message: error.message,
                }
            })?;
        if request
            .envelope
            .as_object()
            .is_some_and(|envelope| envelope.contains_key("idempotencyKey"))
        {
            return Err(RuntimeError::InvalidSchedule {
                path: "$.envelope.idempotencyKey".into(),
                message: "a scheduled envelope carries no idempotency key: each fire gets its own (`schedule:{id}:{fire time}`)".into(),
            });
        }
        self.runs
            .parse_envelope(&request.envelope)
            .map_err(|error| match error {
                RuntimeError::InvalidInput { path, message } => {
                    let mut path = path.replacen('$', "$.envelope", 1);
                    // A missing field is named in the message only.
                    if let Some(name) = message
                        .strip_prefix("missing field `")
                        .and_then(|rest| rest.split('`').next())
                        && !path.ends_with(&format!(".{name}"))
                    {
                        path = format!("{path}.{name}");
                    }
                    RuntimeError::InvalidSchedule { path, message }
                }
                RuntimeError::TooLarge {
                    path,
                    size,
                    limit,
                    what,
                } => RuntimeError::TooLarge {
                    path: path.replacen('$', "$.envelope", 1),
                    size,
                    limit,
                    what,
                },
                other => other,
            })?;
        let now = self.clock.now();
        let schedule = Schedule {
            schedule_id: self.ids.new_id("sch"),
            tenant_id: tenant_id.to_string(),
            next_fire_at: times.next_after(now, now),
            expression: request.expression,
            timezone: request.timezone,
            envelope: request.envelope,
            missed_fires: request.missed_fires,
            description: request.description,
            state: ScheduleState::Active,
            trigger: self.triggers.trigger(),
            created_at: now,
            anchor_at: now,
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
        let mut schedule = schedule;
        if schedule.trigger != ScheduleTrigger::Store {
            schedule.trigger_pending(now);
        }
        match self
            .book
            .create_schedule(&schedule, self.max_per_tenant)
            .await?
        {
            ScheduleWrite::Written => {}
            ScheduleWrite::LimitReached { count } => {
                return Err(RuntimeError::ScheduleLimit {
                    tenant_id: tenant_id.to_string(),
                    count,
                    limit: self.max_per_tenant,
                });
            }
            ScheduleWrite::Conflict => {
                return Err(RuntimeError::Store(crate::error::StoreError::Unavailable(
                    format!("schedule id `{}` was taken; retry", schedule.schedule_id),
                )));
            }
        }
        if schedule.trigger == ScheduleTrigger::Store {
            return Ok(schedule);
        }
        if let Err(error) = self.triggers.install(&schedule).await {
            self.book
                .delete_schedule(tenant_id, &schedule.schedule_id)
                .await?;
            return Err(error.into());
        }
        let mut settled = schedule.clone();
        settled.trigger_out_of_step = None;
        settled.revision += 1;
        // Moved meanwhile (a pause): that change settles its own trigger.
        let _ = self.book.update_schedule(&settled).await?;
        Ok(settled)
    }

    /// The tenant's schedules, oldest first.
    pub async fn list(&self, tenant_id: &str) -> Result<Vec<Schedule>, RuntimeError> {
        Ok(self.book.list_schedules(tenant_id).await?)
    }

    pub async fn get(&self, tenant_id: &str, schedule_id: &str) -> Result<Schedule, RuntimeError> {
        self.book
            .load_schedule(tenant_id, schedule_id)
            .await?
            .ok_or_else(|| RuntimeError::ScheduleNotFound(schedule_id.to_string()))
    }

    /// Deletes the schedule. Runs it started stay. One the store fires
    /// goes at once. One with a trigger of its own (EventBridge Scheduler)
    /// is first marked `deleting` (so a process that dies next leaves the
    /// keeper a retry), then its trigger is removed, then it goes; a
    /// trigger that refuses leaves it `deleting` and out of step, and the
    /// keeper removes the trigger after a back-off until it takes, then
    /// deletes it.
    pub async fn delete(&self, tenant_id: &str, schedule_id: &str) -> Result<(), RuntimeError> {
        for _ in 0..UPDATE_ROUNDS {
            let kept = self.get(tenant_id, schedule_id).await?;
            if kept.trigger == ScheduleTrigger::Store {
                self.book.delete_schedule(tenant_id, schedule_id).await?;
                return Ok(());
            }
            let mut deleting = kept.clone();
            deleting.deleting = true;
            deleting.state = ScheduleState::Paused;
            deleting.next_fire_at = None;
            deleting.revision = kept.revision + 1;
            deleting.trigger_pending(self.clock.now());
            if self.book.update_schedule(&deleting).await? == ScheduleWrite::Written {
                self.settle_trigger(deleting).await?;
                return Ok(());
            }
        }
        Err(RuntimeError::Store(crate::error::StoreError::Unavailable(
            format!("schedule `{schedule_id}` kept changing; retry"),
        )))
    }

    /// Stops it firing until it is resumed.
    pub async fn pause(
        &self,
        tenant_id: &str,
        schedule_id: &str,
    ) -> Result<Schedule, RuntimeError> {
        self.change(tenant_id, schedule_id, |schedule, _times, _now| {
            schedule.state = ScheduleState::Paused;
            schedule.next_fire_at = None;
        })
        .await
    }

    /// Fires again from now on: fire times passed while paused are not
    /// missed fires, and a rate counts its periods from now.
    pub async fn resume(
        &self,
        tenant_id: &str,
        schedule_id: &str,
    ) -> Result<Schedule, RuntimeError> {
        self.change(tenant_id, schedule_id, |schedule, times, now| {
            if schedule.state == ScheduleState::Paused {
                schedule.state = ScheduleState::Active;
                schedule.anchor_at = now;
                schedule.next_fire_at = times.next_after(now, now);
                schedule.fire_started();
            }
        })
        .await
    }

    /// Hands the kept schedule to its trigger and records the outcome: in
    /// step (the mark cleared), or out of step with the trigger's error and
    /// the next try's time. A schedule another process moved meanwhile is
    /// left to that process, which settles its own change.
    /// A `deleting` schedule's trigger is removed instead, and once it is,
    /// the schedule is deleted from the store.
    async fn settle_trigger(&self, schedule: Schedule) -> Result<Schedule, RuntimeError> {
        let mut settled = schedule.clone();
        settled.revision += 1;
        let installed = if schedule.trigger == self.triggers.trigger() {
            if schedule.deleting {
                self.triggers.remove(&schedule).await
            } else {
                self.triggers.install(&schedule).await
            }
        } else {
            // A process configured without the schedule's trigger (no
            // scheduler group) must not take the change for done.
            Err(crate::error::StoreError::Unavailable(format!(
                "this process cannot set a {} trigger; its keeper must",
                schedule.trigger.as_ref()
            )))
        };
        match installed {
            Ok(()) if schedule.deleting => {
                self.book
                    .delete_schedule(&schedule.tenant_id, &schedule.schedule_id)
                    .await?;
                settled.trigger_out_of_step = None;
                return Ok(settled);
            }
            Ok(()) => settled.trigger_out_of_step = None,
            Err(error) => {
                settled.trigger_failed(self.clock.now(), &error.to_string());
                tracing::warn!(tenant_id = %schedule.tenant_id, schedule_id = %schedule.schedule_id, %error, attempts = settled.trigger_out_of_step.as_ref().map_or(0, |out| out.attempts), "a schedule's trigger did not take its change; the keeper tries again");
            }
        }
        match self.book.update_schedule(&settled).await? {
            ScheduleWrite::Written => Ok(settled),
            _ => self.get(&schedule.tenant_id, &schedule.schedule_id).await,
        }
    }

    async fn change(
        &self,
        tenant_id: &str,
        schedule_id: &str,
        edit: impl Fn(&mut Schedule, &ScheduleTimes, Instant),
    ) -> Result<Schedule, RuntimeError> {
        for _ in 0..UPDATE_ROUNDS {
            let kept = self.get(tenant_id, schedule_id).await?;
            if kept.deleting {
                return Err(RuntimeError::ScheduleNotFound(schedule_id.to_string()));
            }
            let times = kept_times(&kept)?;
            let mut changed = kept.clone();
            edit(&mut changed, &times, self.clock.now());
            if changed == kept {
                return Ok(kept);
            }
            changed.revision = kept.revision + 1;
            let needs_trigger = changed.trigger != ScheduleTrigger::Store;
            if needs_trigger {
                changed.trigger_pending(self.clock.now());
            }
            if self.book.update_schedule(&changed).await? == ScheduleWrite::Written {
                return if needs_trigger {
                    self.settle_trigger(changed).await
                } else {
                    Ok(changed)
                };
            }
        }
        Err(RuntimeError::Store(crate::error::StoreError::Unavailable(
            format!("schedule `{schedule_id}` kept changing; retry"),
        )))
    }

    /// One tick of the store's keeper (`baton serve`): every due schedule
    /// fires at most once (its missed fires dropped or caught up once) and
    /// moves past `now`. A fire whose submission fails is recorded on the
    /// schedule (`lastError`) and tried again after a back-off (30 s,
    /// doubled each time, at most 15 min) under the same key; the
    /// schedule moves out of the way meanwhile, so one tenant's failing
    /// schedules never fill a tick. At `MAX_FAILED_FIRES` in a row it
    /// pauses itself, with a `warn` log and the cause on it. A tick reads
    /// the earliest due schedules and shares its places among their
    /// tenants in turns ([`fair_share`]).
    ///
    /// The same tick settles triggers out of step: a schedule whose change
    /// EventBridge Scheduler refused (or never received: the process died
    /// between the store's write and the trigger's call) is handed to it
    /// again, after its back-off, until the two agree. In the cloud the
    /// `sweeper` function runs this tick; it fires nothing there, since
    /// EventBridge Scheduler fires every schedule it keeps.
    pub async fn fire_due(&self) -> Result<ScheduleTick, RuntimeError> {
        let now = self.clock.now();
        let mut tick = ScheduleTick::default();
        let due = self.book.due_schedules(now, DUE_READ_PER_TICK).await?;
        for schedule in fair_share(due, DUE_PER_TICK) {
            if schedule
                .trigger_out_of_step
                .as_ref()
                .is_some_and(|out| out.retry_at <= now)
            {
                let settled = self.settle_trigger(schedule.clone()).await?;
                match settled.trigger_out_of_step {
                    None => tick.triggers_settled += 1,
                    Some(_) => tick.triggers_out_of_step += 1,
                }
            }
            if schedule.trigger != ScheduleTrigger::Store {
                continue;
            }
            let Ok(times) = kept_times(&schedule) else {
                tracing::error!(schedule_id = %schedule.schedule_id, "a kept schedule's expression no longer parses");
                tick.failed += 1;
                continue;
            };
            let Some(plan) = schedules::plan_fires(&schedule, &times, now) else {
                continue;
            };
            let mut moved = schedule.clone();
            moved.revision += 1;
            moved.next_fire_at = plan.next_fire_at;
            moved.missed += plan.missed;
            tick.missed += plan.missed;
            if let Some(fire_at) = plan.fire_at {
                match self.start_fire(&schedule, fire_at).await {
                    Ok(run) => {
                        moved.fire_started();
                        moved.fires += u64::from(!run.deduplicated);
                        moved.last_fire_at = Some(fire_at);
                        moved.last_run_id = Some(run.run_id.clone());
                        tick.runs.push(FiredRun {
                            tenant_id: schedule.tenant_id.clone(),
                            schedule_id: schedule.schedule_id.clone(),
                            fire_at,
                            run_id: run.run_id,
                            deduplicated: run.deduplicated,
                        });
                    }
                    Err(error) => {
                        tick.failed += 1;
                        moved.fire_failed(fire_at, now, &error.to_string());
                        if moved.state == ScheduleState::Paused {
                            tick.paused += 1;
                            tracing::warn!(tenant_id = %schedule.tenant_id, schedule_id = %schedule.schedule_id, %error, failed_fires = moved.failed_fires, "a schedule paused itself: its fires kept failing");
                        } else {
                            tracing::error!(schedule_id = %schedule.schedule_id, %error, retry_at = ?moved.next_fire_at.map(Instant::rfc3339), "a schedule's fire was not submitted; tried again after a back-off");
                        }
                    }
                }
            }
            // Another keeper moved it first: its fire had the same key.
            let _ = self.book.update_schedule(&moved).await?;
        }
        Ok(tick)
    }

    /// A fire delivered from outside (EventBridge Scheduler through the
    /// ingest queue, each delivery at least once): starts its run unless the
    /// schedule is gone or paused, or the fire is late under
    /// [`MissedFirePolicy::Skip`](baton_core::records::schedules::MissedFirePolicy).
    /// A redelivered fire finds its run by its key.
    pub async fn fire_delivered(
        &self,
        tenant_id: &str,
        schedule_id: &str,
        fire_at: Instant,
    ) -> Result<Option<SubmittedRun>, RuntimeError> {
        let Some(schedule) = self.book.load_schedule(tenant_id, schedule_id).await? else {
            tracing::warn!(%tenant_id, %schedule_id, "a fire for a schedule that is gone");
            return Ok(None);
        };
        let now = self.clock.now();
        if schedule.state != ScheduleState::Active
            || !schedules::delivered_fire_runs(schedule.missed_fires, fire_at, now)
        {
            tracing::info!(%tenant_id, %schedule_id, fire_at = %fire_at.rfc3339(), state = schedule.state.as_ref(), "a delivered fire starts no run");
            return Ok(None);
        }
        let run = self.start_fire(&schedule, fire_at).await?;
        if !run.deduplicated {
            self.record_fire(tenant_id, schedule_id, fire_at, &run.run_id)
                .await?;
        }
        Ok(Some(run))
    }

    async fn record_fire(
        &self,
        tenant_id: &str,
        schedule_id: &str,
        fire_at: Instant,
        run_id: &str,
    ) -> Result<(), RuntimeError> {
        for _ in 0..UPDATE_ROUNDS {
            let Some(kept) = self.book.load_schedule(tenant_id, schedule_id).await? else {
                return Ok(());
            };
            let mut moved = kept.clone();
            moved.revision += 1;
            moved.fires += 1;
            if kept.last_fire_at.is_none_or(|last| last < fire_at) {
                moved.last_fire_at = Some(fire_at);
                moved.last_run_id = Some(run_id.to_string());
            }
            if let Ok(times) = kept_times(&kept)
                && kept.state == ScheduleState::Active
            {
                moved.next_fire_at =
                    times.next_after(fire_at.max(self.clock.now()), kept.anchor_at);
            }
            if self.book.update_schedule(&moved).await? == ScheduleWrite::Written {
                return Ok(());
            }
        }
        Ok(())
    }

    async fn start_fire(
        &self,
        schedule: &Schedule,
        fire_at: Instant,
    ) -> Result<SubmittedRun, RuntimeError> {
        let mut envelope = schedule.envelope.clone();
        if let Some(fields) = envelope.as_object_mut() {
            fields.insert(
                "idempotencyKey".into(),
                Value::String(fire_idempotency_key(&schedule.schedule_id, fire_at)),
            );
        }
        self.runs.submit(&schedule.tenant_id, &envelope).await
    }
}

fn kept_times(schedule: &Schedule) -> Result<ScheduleTimes, RuntimeError> {
    ScheduleTimes::parse(&schedule.expression, &schedule.timezone).map_err(|error| {
        RuntimeError::InvalidSchedule {
            path: format!("$.{}", error.field),
            message: error.message,
        }
    })
}
