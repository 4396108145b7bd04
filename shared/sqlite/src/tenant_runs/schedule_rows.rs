//! Schedules on the SQLite file: one row per schedule in `schedules`, the
//! schedule itself as JSON beside the columns its queries need: the tenant's
//! count (the limit, counted and written in one transaction), the revision
//! its changes are conditional on, and `due_millis` (the next fire of an
//! active schedule `baton serve` keeps; NULL otherwise), indexed so a tick
//! reads only what is due.

use async_trait::async_trait;
use baton_core::basics::instant::Instant;
use baton_core::records::schedules::Schedule;
use baton_runtime::error::StoreError;
use baton_runtime::ports::{ScheduleBook, ScheduleWrite};
use rusqlite::{OptionalExtension, params};

use crate::rows::{begin, millis};
use crate::{SqliteStore, unavailable};

fn due_millis(schedule: &Schedule) -> Option<i64> {
    schedule.keeper_due_at().map(millis)
}

fn encode(schedule: &Schedule) -> Result<String, StoreError> {
    serde_json::to_string(schedule).map_err(|error| StoreError::Unavailable(error.to_string()))
}

fn decode(text: &str) -> Result<Schedule, StoreError> {
    serde_json::from_str(text)
        .map_err(|error| StoreError::Corrupt(format!("a kept schedule does not parse: {error}")))
}

fn decode_all(rows: Vec<String>) -> Result<Vec<Schedule>, StoreError> {
    rows.iter().map(|text| decode(text)).collect()
}

#[async_trait]
impl ScheduleBook for SqliteStore {
    async fn create_schedule(
        &self,
        schedule: &Schedule,
        limit: usize,
    ) -> Result<ScheduleWrite, StoreError> {
        let body = encode(schedule)?;
        let (tenant_id, schedule_id) = (schedule.tenant_id.clone(), schedule.schedule_id.clone());
        let (due, created, revision) = (
            due_millis(schedule),
            millis(schedule.created_at),
            i64::try_from(schedule.revision).unwrap_or(i64::MAX),
        );
        self.with_connection(move |connection| {
            let transaction = begin(connection)?;
            let count: i64 = transaction
                .prepare_cached("SELECT COUNT(*) FROM schedules WHERE tenant_id = ?1")
                .map_err(unavailable)?
                .query_row(params![tenant_id], |row| row.get(0))
                .map_err(unavailable)?;
            let count = usize::try_from(count).unwrap_or(0);
            if count >= limit {
                return Ok(ScheduleWrite::LimitReached { count });
            }
            let inserted = transaction
                .prepare_cached(
                    "INSERT OR IGNORE INTO schedules
                     (tenant_id, schedule_id, revision, due_millis, created_at_millis, schedule)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .map_err(unavailable)?
                .execute(params![
                    tenant_id,
                    schedule_id,
                    revision,
                    due,
                    created,
                    body
                ])
                .map_err(unavailable)?;
            transaction.commit().map_err(unavailable)?;
            Ok(if inserted == 1 {
                ScheduleWrite::Written
            } else {
                ScheduleWrite::Conflict
            })
        })
        .await
    }

    async fn load_schedule(
        &self,
        tenant_id: &str,
        schedule_id: &str,
    ) -> Result<Option<Schedule>, StoreError> {
        let (tenant_id, schedule_id) = (tenant_id.to_string(), schedule_id.to_string());
        let row: Option<String> = self
            .with_connection(move |connection| {
                connection
                    .prepare_cached(
                        "SELECT schedule FROM schedules WHERE tenant_id = ?1 AND schedule_id = ?2",
                    )
                    .map_err(unavailable)?
                    .query_row(params![tenant_id, schedule_id], |row| row.get(0))
                    .optional()
                    .map_err(unavailable)
            })
            .await?;
        row.as_deref().map(decode).transpose()
    }

    async fn list_schedules(&self, tenant_id: &str) -> Result<Vec<Schedule>, StoreError> {
        let tenant_id = tenant_id.to_string();
        let rows = self
            .with_connection(move |connection| {
                let mut statement = connection
                    .prepare_cached(
                        "SELECT schedule FROM schedules WHERE tenant_id = ?1
                         ORDER BY created_at_millis, schedule_id",
                    )
                    .map_err(unavailable)?;
                let rows = statement
                    .query_map(params![tenant_id], |row| row.get::<_, String>(0))
                    .map_err(unavailable)?;
                rows.collect::<Result<Vec<_>, _>>().map_err(unavailable)
            })
            .await?;
        decode_all(rows)
    }

    async fn update_schedule(&self, schedule: &Schedule) -> Result<ScheduleWrite, StoreError> {
        let body = encode(schedule)?;
        let (tenant_id, schedule_id) = (schedule.tenant_id.clone(), schedule.schedule_id.clone());
        let due = due_millis(schedule);
        let revision = i64::try_from(schedule.revision).unwrap_or(i64::MAX);
        self.with_connection(move |connection| {
            let updated = connection
                .prepare_cached(
                    "UPDATE schedules SET revision = ?3, due_millis = ?4, schedule = ?5
                     WHERE tenant_id = ?1 AND schedule_id = ?2 AND revision = ?3 - 1",
                )
                .map_err(unavailable)?
                .execute(params![tenant_id, schedule_id, revision, due, body])
                .map_err(unavailable)?;
            Ok(if updated == 1 {
                ScheduleWrite::Written
            } else {
                ScheduleWrite::Conflict
            })
        })
        .await
    }

    async fn delete_schedule(
        &self,
        tenant_id: &str,
        schedule_id: &str,
    ) -> Result<bool, StoreError> {
        let (tenant_id, schedule_id) = (tenant_id.to_string(), schedule_id.to_string());
        self.with_connection(move |connection| {
            let deleted = connection
                .prepare_cached("DELETE FROM schedules WHERE tenant_id = ?1 AND schedule_id = ?2")
                .map_err(unavailable)?
                .execute(params![tenant_id, schedule_id])
                .map_err(unavailable)?;
            Ok(deleted == 1)
        })
        .await
    }

    async fn due_schedules(&self, now: Instant, limit: usize) -> Result<Vec<Schedule>, StoreError> {
        let now = millis(now);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .with_connection(move |connection| {
                let mut statement = connection
                    .prepare_cached(
                        "SELECT schedule FROM schedules
                         WHERE due_millis IS NOT NULL AND due_millis <= ?1
                         ORDER BY due_millis LIMIT ?2",
                    )
                    .map_err(unavailable)?;
                let rows = statement
                    .query_map(params![now, limit], |row| row.get::<_, String>(0))
                    .map_err(unavailable)?;
                rows.collect::<Result<Vec<_>, _>>().map_err(unavailable)
            })
            .await?;
        decode_all(rows)
    }
}
