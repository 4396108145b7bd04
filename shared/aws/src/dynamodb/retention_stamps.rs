//! Retention on DynamoDB: every item of an ended run carries `expiresAt`
//! (the table's TTL attribute), so DynamoDB deletes the run and everything
//! of it, at no write cost, once the tenant's retention has passed.
//!
//! The commit that ends a run stamps what it writes: the run item, its
//! listing items, its sequence item, its frames and state parts. Items
//! written by earlier commits (frames, entries, leases, leftover outbox
//! entries, the idempotency key) cannot join that transaction (100 actions
//! at most), so the commit also puts a mark,
//!
//! ```text
//! pk = RETAIN#{shard}   sk = {run pk}   tenantId, retainUntil (Unix s)
//! ```
//!
//! and the sweeper's pass ([`DynamoRunStore::stamp_ended_runs`]) stamps
//! those items in pages, then deletes the mark. A run taken up again after
//! it ended (a revision) is marked with `retainUntil` 0: the pass lifts
//! the expiry from its items. While a run works or waits
//! nothing of it expires: its clock starts when it ends. DynamoDB deletes
//! expired items within days, so reads treat an item past its
//! `expiresAt` as gone (`DynamoRunStore::has_expired`).

use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use baton_core::basics::instant::Instant;
use baton_runtime::error::StoreError;
use baton_runtime::ports::{ExpiredRunsBatch, RetentionUpkeep};

use super::keys::{idempotency_pk, retention_pk};
use crate::dynamodb::store::{
    DynamoRunStore, Item, n, read_number, read_text, s, sdk_failure, ttl_seconds, unavailable,
};

/// Partitions the marks are spread over (as the pending outbox is).
const RETENTION_SHARDS: u32 = 8;

/// The retention shard a run's mark goes to.
fn retention_mark_pk(run_pk: &str) -> String {
    retention_pk(crate::dynamodb::store::shard_of(run_pk, RETENTION_SHARDS))
}

impl DynamoRunStore {
    /// The mark the ending commit puts for the pass (`None`: the run was
    /// taken up again, its expiry is to be lifted).
    pub(crate) fn retention_mark(
        &self,
        tenant_id: &str,
        run_pk: &str,
        retain_until: Option<Instant>,
    ) -> Result<TransactWriteItem, StoreError> {
        let put = Put::builder()
            .table_name(&self.table)
            .item("pk", s(retention_mark_pk(run_pk)))
            .item("sk", s(run_pk))
            .item("tenantId", s(tenant_id))
            .item(
                "retainUntil",
                retain_until.map_or_else(|| n(0), ttl_seconds),
            )
            .build()
            .map_err(unavailable)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// Stamps the items of up to `limit` ended runs (their marks, shard
    /// after shard), each with its run's expiry, and deletes their marks.
    /// Idempotent: a pass cut short is taken up by the next.
    pub async fn stamp_ended_runs(&self, limit: usize) -> Result<ExpiredRunsBatch, StoreError> {
        let mut stamped = ExpiredRunsBatch::default();
        for shard in 0..RETENTION_SHARDS {
            let left = limit.saturating_sub(stamped.runs as usize);
            if left == 0 {
                stamped.more = true;
                break;
            }
            let output = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :pk")
                .expression_attribute_values(":pk", s(retention_pk(shard)))
                .limit(i32::try_from(left).unwrap_or(i32::MAX))
                .send()
                .await
                .map_err(sdk_failure)?;
            if output
                .last_evaluated_key
                .as_ref()
                .is_some_and(|key| !key.is_empty())
            {
                stamped.more = true;
            }
            for mark in output.items() {
                stamped.items += self.stamp_one_run(mark).await?;
                stamped.runs += 1;
            }
        }
        Ok(stamped)
    }

    /// Stamps every item of the marked run that lacks its expiry (and its
    /// idempotency key's item), then deletes the mark unless a later
    /// commit moved it.
    async fn stamp_one_run(&self, mark: &Item) -> Result<u64, StoreError> {
        let run_pk = read_text(mark, "sk")?.to_string();
        let tenant_id = read_text(mark, "tenantId")?.to_string();
        let retain_until = read_number(mark, "retainUntil")?;
        let items = self
            .all_pages(
                self.client
                    .query()
                    .table_name(&self.table)
                    .key_condition_expression("pk = :pk")
                    .expression_attribute_values(":pk", s(&run_pk))
                    .projection_expression("pk, sk, expiresAt, idempotencyKey")
                    .consistent_read(true),
            )
            .await?;
        let lifting = retain_until == 0;
        let mut keys: Vec<(String, String)> = Vec::new();
        for item in &items {
            let expiry = item.get("expiresAt").and_then(|value| value.as_n().ok());
            let stamped_already = if lifting {
                expiry.is_none()
            } else {
                expiry.is_some_and(|text| text == &retain_until.to_string())
            };
            if !stamped_already {
                keys.push((run_pk.clone(), read_text(item, "sk")?.to_string()));
            }
            if let Some(key) = item
                .get("idempotencyKey")
                .and_then(|value| value.as_s().ok())
            {
                keys.push((idempotency_pk(&tenant_id, key), "IDEM".to_string()));
            }
        }
        let mut count = 0;
        for (pk, sk) in keys {
            let update = self
                .client
                .update_item()
                .table_name(&self.table)
                .key("pk", s(pk))
                .key("sk", s(sk))
                .condition_expression("attribute_exists(pk)");
            let updated = if lifting {
                update.update_expression("REMOVE expiresAt").send().await
            } else {
                update
                    .update_expression("SET expiresAt = :until")
                    .expression_attribute_values(":until", n(retain_until))
                    .send()
                    .await
            };
            match updated {
                Ok(_) => count += 1,
                Err(error)
                    if error
                        .as_service_error()
                        .is_some_and(|service| service.is_conditional_check_failed_exception()) => {
                }
                Err(error) => return Err(sdk_failure(error)),
            }
        }
        let deleted = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key("pk", s(retention_mark_pk(&run_pk)))
            .key("sk", s(&run_pk))
            .condition_expression("retainUntil = :until")
            .expression_attribute_values(":until", n(retain_until))
            .send()
            .await;
        match deleted {
            Ok(_) => Ok(count),
            Err(error)
                if error
                    .as_service_error()
                    .is_some_and(|service| service.is_conditional_check_failed_exception()) =>
            {
                Ok(count)
            }
            Err(error) => Err(sdk_failure(error)),
        }
    }
}

/// DynamoDB deletes expired items itself (TTL): the batch stamps what the
/// ending commits could not reach, whatever `now` (an item stamped early
/// still expires at its run's time).
#[async_trait::async_trait]
impl RetentionUpkeep for DynamoRunStore {
    async fn expire_ended_runs(
        &self,
        _now: Instant,
        batch: usize,
    ) -> Result<ExpiredRunsBatch, StoreError> {
        self.stamp_ended_runs(batch).await
    }
}
