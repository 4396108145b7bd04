//! Schedules: an envelope started by the clock (`baton_core::records::schedules`
//! decides when). The service keeps them in the store's [`ScheduleBook`],
//! has them fired by its [`ScheduleTriggers`] (the store's keeper in
//! `baton serve`, EventBridge Scheduler in the cloud), and starts each
//! fire's run through [`RunService::submit`] with the fire's idempotency
//! key: whoever fires a fire time, and however often, it makes one run.

use std::sync::Arc;

use baton_core::basics::instant::Instant;
use baton_core::records::schedules::{
    self, Schedule, ScheduleRequest, ScheduleState, ScheduleTimes, fire_idempotency_key,
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
    /// Schedules whose fire could not be submitted (logged; tried again at
    /// the next tick, under the same idempotency key).
    pub failed: usize,
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
        };
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
        if let Err(error) = self.triggers.install(&schedule).await {
            self.book
                .delete_schedule(tenant_id, &schedule.schedule_id)
                .await?;
            return Err(error.into());
        }
        Ok(schedule)
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

    /// Removes the trigger, then the schedule. Runs it started stay.
    pub async fn delete(&self, tenant_id: &str, schedule_id: &str) -> Result<(), RuntimeError> {
        let schedule = self.get(tenant_id, schedule_id).await?;
        self.triggers.remove(&schedule).await?;
        self.book.delete_schedule(tenant_id, schedule_id).await?;
        Ok(())
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
            }
        })
        .await
    }

    async fn change(
        &self,
        tenant_id: &str,
        schedule_id: &str,
        edit: impl Fn(&mut Schedule, &ScheduleTimes, Instant),
    ) -> Result<Schedule, RuntimeError> {
        for _ in 0..UPDATE_ROUNDS {
            let kept = self.get(tenant_id, schedule_id).await?;
            let times = kept_times(&kept)?;
            let mut changed = kept.clone();
            edit(&mut changed, &times, self.clock.now());
            if changed == kept {
                return Ok(kept);
            }
            changed.revision = kept.revision + 1;
            if self.book.update_schedule(&changed).await? == ScheduleWrite::Written {
                self.triggers.install(&changed).await?;
                return Ok(changed);
            }
        }
        Err(RuntimeError::Store(crate::error::StoreError::Unavailable(
            format!("schedule `{schedule_id}` kept changing; retry"),
        )))
    }

    /// One tick of the store's keeper (`baton serve`): every due schedule
    /// fires at most once (its missed fires dropped or caught up once) and
    /// moves past `now`. A fire whose submission fails leaves the schedule
    /// where it was, so the next tick submits it again under the same key.
    pub async fn fire_due(&self) -> Result<ScheduleTick, RuntimeError> {
        let now = self.clock.now();
        let mut tick = ScheduleTick::default();
        for schedule in self.book.due_schedules(now, DUE_PER_TICK).await? {
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
                        tracing::error!(schedule_id = %schedule.schedule_id, %error, "a schedule's fire was not submitted; the next tick tries again");
                        tick.failed += 1;
                        continue;
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
