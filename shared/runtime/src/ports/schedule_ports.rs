//! The ports of schedules: where they are kept (`ScheduleBook`, the store)
//! and what fires them when no process of Baton's keeps the time
//! (`ScheduleTriggers`: EventBridge Scheduler in the cloud).

use async_trait::async_trait;
use baton_core::basics::instant::Instant;
use baton_core::records::schedules::{Schedule, ScheduleTrigger};

use crate::error::StoreError;

/// What a schedule write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScheduleWrite {
    Written,
    /// The tenant keeps `count` schedules, its limit: nothing written.
    LimitReached {
        count: usize,
    },
    /// The schedule changed (or went) since it was read: nothing written.
    Conflict,
}

/// Schedules kept in the store, by tenant. A change is conditional on the
/// revision it was made from, so two processes ticking one schedule cannot
/// both move it.
#[async_trait]
pub trait ScheduleBook: Send + Sync {
    /// Keeps a new schedule (revision 0) unless its tenant keeps `limit`
    /// already (the count and the write are one step on every store).
    async fn create_schedule(
        &self,
        schedule: &Schedule,
        limit: usize,
    ) -> Result<ScheduleWrite, StoreError>;

    async fn load_schedule(
        &self,
        tenant_id: &str,
        schedule_id: &str,
    ) -> Result<Option<Schedule>, StoreError>;

    /// The tenant's schedules, oldest first.
    async fn list_schedules(&self, tenant_id: &str) -> Result<Vec<Schedule>, StoreError>;

    /// Replaces the schedule if the kept one has revision
    /// `schedule.revision - 1`.
    async fn update_schedule(&self, schedule: &Schedule) -> Result<ScheduleWrite, StoreError>;

    /// Whether there was one to delete.
    async fn delete_schedule(&self, tenant_id: &str, schedule_id: &str)
    -> Result<bool, StoreError>;

    /// Active schedules of every tenant that the store's keeper fires
    /// (`ScheduleTrigger::Store`) and whose next fire is at or before
    /// `now`: at most `limit`, the most overdue first.
    async fn due_schedules(&self, now: Instant, limit: usize) -> Result<Vec<Schedule>, StoreError>;
}

/// What fires the schedules created here when they are due.
#[async_trait]
pub trait ScheduleTriggers: Send + Sync {
    /// Which trigger new schedules get.
    fn trigger(&self) -> ScheduleTrigger;

    /// Sets the schedule up to fire (created, or changed: paused, resumed).
    async fn install(&self, schedule: &Schedule) -> Result<(), StoreError>;

    /// Stops it firing for good.
    async fn remove(&self, schedule: &Schedule) -> Result<(), StoreError>;
}

/// The store is the trigger: the process that keeps the store's schedules
/// (`baton serve`, `workers::run_schedules_until`) reads what is due from
/// the [`ScheduleBook`], so nothing is installed elsewhere.
#[derive(Debug, Default, Clone, Copy)]
pub struct StoreKeepsSchedules;

#[async_trait]
impl ScheduleTriggers for StoreKeepsSchedules {
    fn trigger(&self) -> ScheduleTrigger {
        ScheduleTrigger::Store
    }

    async fn install(&self, _schedule: &Schedule) -> Result<(), StoreError> {
        Ok(())
    }

    async fn remove(&self, _schedule: &Schedule) -> Result<(), StoreError> {
        Ok(())
    }
}
