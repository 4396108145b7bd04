//! Schedules in memory: one process's, under one lock (the limit's count
//! and the write are one step).

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use baton_core::basics::instant::Instant;
use baton_core::records::schedules::Schedule;

use crate::error::StoreError;
use crate::ports::{ScheduleBook, ScheduleWrite};

/// `(tenant, schedule id)` → schedule.
#[derive(Default)]
pub struct InMemoryScheduleBook {
    schedules: Mutex<BTreeMap<(String, String), Schedule>>,
}

impl InMemoryScheduleBook {
    pub fn new() -> Self {
        Self::default()
    }
}

fn poisoned() -> StoreError {
    StoreError::Unavailable("schedules lock poisoned".into())
}

fn key(tenant_id: &str, schedule_id: &str) -> (String, String) {
    (tenant_id.to_string(), schedule_id.to_string())
}

#[async_trait]
impl ScheduleBook for InMemoryScheduleBook {
    async fn create_schedule(
        &self,
        schedule: &Schedule,
        limit: usize,
    ) -> Result<ScheduleWrite, StoreError> {
        let mut schedules = self.schedules.lock().map_err(|_| poisoned())?;
        let count = schedules
            .keys()
            .filter(|(tenant, _)| *tenant == schedule.tenant_id)
            .count();
        if count >= limit {
            return Ok(ScheduleWrite::LimitReached { count });
        }
        let key = key(&schedule.tenant_id, &schedule.schedule_id);
        if schedules.contains_key(&key) {
            return Ok(ScheduleWrite::Conflict);
        }
        schedules.insert(key, schedule.clone());
        Ok(ScheduleWrite::Written)
    }

    async fn load_schedule(
        &self,
        tenant_id: &str,
        schedule_id: &str,
    ) -> Result<Option<Schedule>, StoreError> {
        let schedules = self.schedules.lock().map_err(|_| poisoned())?;
        Ok(schedules.get(&key(tenant_id, schedule_id)).cloned())
    }

    async fn list_schedules(&self, tenant_id: &str) -> Result<Vec<Schedule>, StoreError> {
        let schedules = self.schedules.lock().map_err(|_| poisoned())?;
        let mut listed: Vec<Schedule> = schedules
            .values()
            .filter(|schedule| schedule.tenant_id == tenant_id)
            .cloned()
            .collect();
        listed.sort_by(|a, b| (a.created_at, &a.schedule_id).cmp(&(b.created_at, &b.schedule_id)));
        Ok(listed)
    }

    async fn update_schedule(&self, schedule: &Schedule) -> Result<ScheduleWrite, StoreError> {
        let mut schedules = self.schedules.lock().map_err(|_| poisoned())?;
        match schedules.get_mut(&key(&schedule.tenant_id, &schedule.schedule_id)) {
            Some(kept) if kept.revision + 1 == schedule.revision => {
                *kept = schedule.clone();
                Ok(ScheduleWrite::Written)
            }
            _ => Ok(ScheduleWrite::Conflict),
        }
    }

    async fn delete_schedule(
        &self,
        tenant_id: &str,
        schedule_id: &str,
    ) -> Result<bool, StoreError> {
        let mut schedules = self.schedules.lock().map_err(|_| poisoned())?;
        Ok(schedules.remove(&key(tenant_id, schedule_id)).is_some())
    }

    async fn due_schedules(&self, now: Instant, limit: usize) -> Result<Vec<Schedule>, StoreError> {
        let schedules = self.schedules.lock().map_err(|_| poisoned())?;
        let mut due: Vec<Schedule> = schedules
            .values()
            .filter(|schedule| schedule.keeper_due_at().is_some_and(|due| due <= now))
            .cloned()
            .collect();
        due.sort_by_key(Schedule::keeper_due_at);
        due.truncate(limit);
        Ok(due)
    }
}
