//! Schedules on DynamoDB: one item per schedule under its tenant, and a
//! small due mark for each schedule the keeper has work on (a fire `baton
//! serve` makes, or a trigger out of step with EventBridge Scheduler), in
//! one partition, so a tick reads the marks (not the schedules with their
//! envelopes):
//!
//! ```text
//! pk = T#{tenant}#SCHEDULES   sk = {scheduleId}           schedule (JSON), revision, createdAt
//! pk = SCHEDULES#DUE          sk = {tenant}#{scheduleId}  dueAt (Unix ms)
//! pk = T#{tenant}#SCHEDULES   sk = #COUNT                count: the tenant's schedules
//! ```
//!
//! A change writes the schedule and its mark in one `TransactWriteItems`,
//! the schedule's put conditional on the revision it was made from. A
//! create also moves the tenant's counter, conditional on its limit, and a
//! delete moves it back, in the same transaction: the limit holds however
//! many creates arrive at once.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{Delete, Put, TransactWriteItem};
use baton_core::basics::instant::Instant;
use baton_core::records::schedules::Schedule;
use baton_runtime::error::StoreError;
use baton_runtime::ports::{ScheduleBook, ScheduleWrite};

use super::keys::{schedule_due_sk, schedules_pk};
use crate::dynamodb::store::{
    DynamoRunStore, Item, cancellation_codes, n, read_number, read_text, s, sdk_failure,
    unavailable,
};

const DUE_PK: &str = "SCHEDULES#DUE";

/// The tenant's schedule counter, beside its schedules.
const COUNTER_SK: &str = "#COUNT";

fn due_at(schedule: &Schedule) -> Option<Instant> {
    schedule.keeper_due_at()
}

fn decode(item: &Item) -> Result<Schedule, StoreError> {
    serde_json::from_str(read_text(item, "schedule")?)
        .map_err(|error| StoreError::Corrupt(format!("a kept schedule does not parse: {error}")))
}

impl DynamoRunStore {
    /// The schedule's put (conditional on `condition`) and its due mark's
    /// put or delete, as one transaction.
    async fn write_schedule(
        &self,
        schedule: &Schedule,
        condition: &str,
        previous_revision: Option<u64>,
        count_limit: Option<usize>,
    ) -> Result<ScheduleWrite, StoreError> {
        let body = serde_json::to_string(schedule).map_err(unavailable)?;
        let mut put = Put::builder()
            .table_name(&self.table)
            .item("pk", s(schedules_pk(&schedule.tenant_id)))
            .item("sk", s(&schedule.schedule_id))
            .item("schedule", s(body))
            .item("revision", n(schedule.revision))
            .item("createdAt", n(schedule.created_at.unix_millis()))
            .condition_expression(condition);
        if let Some(previous) = previous_revision {
            put = put.expression_attribute_values(":previous", n(previous));
        }
        let due_key = schedule_due_sk(&schedule.tenant_id, &schedule.schedule_id);
        // A schedule the keeper has work on (a fire it makes, or a trigger
        // out of step) has a due mark; any other has none.
        let mark = match due_at(schedule) {
            Some(due) => Some(
                TransactWriteItem::builder()
                    .put(
                        Put::builder()
                            .table_name(&self.table)
                            .item("pk", s(DUE_PK))
                            .item("sk", s(due_key))
                            .item("dueAt", n(due.unix_millis()))
                            .build()
                            .map_err(unavailable)?,
                    )
                    .build(),
            ),
            None => Some(
                TransactWriteItem::builder()
                    .delete(
                        Delete::builder()
                            .table_name(&self.table)
                            .key("pk", s(DUE_PK))
                            .key("sk", s(due_key))
                            .build()
                            .map_err(unavailable)?,
                    )
                    .build(),
            ),
        };
        let mut items = vec![
            TransactWriteItem::builder()
                .put(put.build().map_err(unavailable)?)
                .build(),
        ];
        if let Some(limit) = count_limit {
            items.push(self.counter_move(
                &schedules_pk(&schedule.tenant_id),
                COUNTER_SK,
                "count",
                1,
                Some(limit as u64),
            )?);
        }
        items.extend(mark);
        let written = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await;
        let refused = |codes: &[String], index: usize| {
            codes.get(index).map(String::as_str) == Some("ConditionalCheckFailed")
        };
        match written {
            Ok(_) => Ok(ScheduleWrite::Written),
            Err(error) => match cancellation_codes(&error) {
                Some(codes) if refused(&codes, 0) => Ok(ScheduleWrite::Conflict),
                Some(codes) if count_limit.is_some() && refused(&codes, 1) => {
                    Ok(ScheduleWrite::LimitReached {
                        count: self.schedule_count(&schedule.tenant_id).await?,
                    })
                }
                _ => Err(sdk_failure(error)),
            },
        }
    }

    /// The tenant's schedules, as its counter holds them.
    async fn schedule_count(&self, tenant_id: &str) -> Result<usize, StoreError> {
        let count = self
            .counter_value(&schedules_pk(tenant_id), COUNTER_SK, "count")
            .await?;
        Ok(usize::try_from(count).unwrap_or(usize::MAX))
    }
}

#[async_trait]
impl ScheduleBook for DynamoRunStore {
    async fn create_schedule(
        &self,
        schedule: &Schedule,
        limit: usize,
    ) -> Result<ScheduleWrite, StoreError> {
        self.write_schedule(schedule, "attribute_not_exists(pk)", None, Some(limit))
            .await
    }

    async fn load_schedule(
        &self,
        tenant_id: &str,
        schedule_id: &str,
    ) -> Result<Option<Schedule>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(schedules_pk(tenant_id)))
            .key("sk", s(schedule_id))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_failure)?;
        output.item.as_ref().map(decode).transpose()
    }

    async fn list_schedules(&self, tenant_id: &str) -> Result<Vec<Schedule>, StoreError> {
        let items = self
            .all_pages(
                self.client
                    .query()
                    .table_name(&self.table)
                    .key_condition_expression("pk = :pk")
                    .expression_attribute_values(":pk", s(schedules_pk(tenant_id)))
                    .consistent_read(true),
            )
            .await?;
        let mut schedules = items
            .iter()
            .filter(|item| read_text(item, "sk").is_ok_and(|sort_key| sort_key != COUNTER_SK))
            .map(decode)
            .collect::<Result<Vec<_>, _>>()?;
        schedules
            .sort_by(|a, b| (a.created_at, &a.schedule_id).cmp(&(b.created_at, &b.schedule_id)));
        Ok(schedules)
    }

    async fn update_schedule(&self, schedule: &Schedule) -> Result<ScheduleWrite, StoreError> {
        let Some(previous) = schedule.revision.checked_sub(1) else {
            return Ok(ScheduleWrite::Conflict);
        };
        self.write_schedule(schedule, "revision = :previous", Some(previous), None)
            .await
    }

    async fn delete_schedule(
        &self,
        tenant_id: &str,
        schedule_id: &str,
    ) -> Result<bool, StoreError> {
        let output = self
            .client
            .transact_write_items()
            .transact_items(
                TransactWriteItem::builder()
                    .delete(
                        Delete::builder()
                            .table_name(&self.table)
                            .key("pk", s(schedules_pk(tenant_id)))
                            .key("sk", s(schedule_id))
                            .condition_expression("attribute_exists(pk)")
                            .build()
                            .map_err(unavailable)?,
                    )
                    .build(),
            )
            .transact_items(
                TransactWriteItem::builder()
                    .delete(
                        Delete::builder()
                            .table_name(&self.table)
                            .key("pk", s(DUE_PK))
                            .key("sk", s(schedule_due_sk(tenant_id, schedule_id)))
                            .build()
                            .map_err(unavailable)?,
                    )
                    .build(),
            )
            .transact_items(self.counter_move(
                &schedules_pk(tenant_id),
                COUNTER_SK,
                "count",
                -1,
                None,
            )?)
            .send()
            .await;
        match output {
            Ok(_) => Ok(true),
            Err(error)
                if cancellation_codes(&error).is_some_and(|codes| {
                    codes.first().map(String::as_str) == Some("ConditionalCheckFailed")
                }) =>
            {
                Ok(false)
            }
            Err(error) => Err(sdk_failure(error)),
        }
    }

    async fn due_schedules(&self, now: Instant, limit: usize) -> Result<Vec<Schedule>, StoreError> {
        let marks = self
            .all_pages(
                self.client
                    .query()
                    .table_name(&self.table)
                    .key_condition_expression("pk = :pk")
                    .filter_expression("dueAt <= :now")
                    .expression_attribute_values(":pk", s(DUE_PK))
                    .expression_attribute_values(":now", n(now.unix_millis()))
                    .consistent_read(true),
            )
            .await?;
        let mut due: Vec<(u64, String)> = marks
            .iter()
            .map(|mark| {
                Ok((
                    read_number(mark, "dueAt")?,
                    read_text(mark, "sk")?.to_string(),
                ))
            })
            .collect::<Result<_, StoreError>>()?;
        due.sort();
        let mut schedules = Vec::new();
        for (_, key) in due.into_iter().take(limit) {
            let Some((tenant_id, schedule_id)) = key.rsplit_once('#') else {
                continue;
            };
            // A mark whose schedule moved on since is skipped: the tick
            // plans from the schedule itself.
            if let Some(schedule) = self.load_schedule(tenant_id, schedule_id).await?
                && due_at(&schedule).is_some_and(|next| next <= now)
            {
                schedules.push(schedule);
            }
        }
        Ok(schedules)
    }
}
