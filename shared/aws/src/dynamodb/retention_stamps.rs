//! Retention on DynamoDB: every item of an ended run carries `expiresAt`
//! (the table's TTL attribute), so DynamoDB deletes the run and everything
//! of it, at no write cost, once the tenant's retention has passed.
//!
//! The commit that ends a run stamps what it writes: the run item, its
//! listing items, its sequence item, its frames and state parts. A lease
//! item carries its own expiry from its claim (`lease_items`). Items
//! written by earlier commits (frames, entries, leftover outbox entries,
//! the idempotency key) cannot join that transaction (100 actions at most),
//! so the commit also puts a mark,
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
//!
//! The pass keeps up with 1,000 ended runs a minute (measured over moto in
//! `tests/retention_rate.rs`): it stamps [`RUNS_AT_ONCE`] runs at once; a
//! run's frames, the bulk of its items and written once at their sequence,
//! are put back whole with their expiry, 25 to a `BatchWriteItem`; every
//! other item (entries, leases, outbox entries, the idempotency key), which
//! a later write may change, gets a conditional `UpdateItem`, a few at once.
//! A frame put back while a revision lifts the run's expiry is lifted by
//! the next pass: the mark's delete is conditional on its `retainUntil`.

use std::time::Duration;

use aws_sdk_dynamodb::types::{Put, PutRequest, TransactWriteItem, WriteRequest};
use baton_core::basics::instant::Instant;
use baton_runtime::error::StoreError;
use baton_runtime::ports::{ExpiredRunsBatch, RetentionUpkeep};
use futures_util::{StreamExt, TryStreamExt, stream};

use super::keys::{EVENT_SK_PREFIX, NODE_LEASE_PREFIX, idempotency_pk, retention_pk, run_pk};
use crate::dynamodb::store::{
    DynamoRunStore, Item, n, read_number, read_text, s, sdk_failure, ttl_seconds, unavailable,
};

/// Partitions the marks are spread over (as the pending outbox is).
const RETENTION_SHARDS: u32 = 8;

/// Ended runs a pass stamps at once.
pub const RUNS_AT_ONCE: usize = 16;

/// Conditional updates in flight at once for one run.
const UPDATES_AT_ONCE: usize = 8;

/// `BatchWriteItem`'s own cap on requests per call.
const BATCH_WRITE_ITEMS: usize = 25;

/// Calls a batch's unprocessed frames are put again before the pass gives
/// up on the run (the next pass takes it up).
const BATCH_WRITE_ATTEMPTS: u32 = 8;

/// What one page of a run's items needs.
#[derive(Default)]
struct PageStamps {
    /// Frames to put back whole, each with its expiry added.
    frames: Vec<Item>,
    /// `(pk, sk)` of every other item to update.
    updates: Vec<(String, String)>,
    /// The partition of the run's idempotency key's item, when it has one.
    key: Option<String>,
}

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
    /// after shard), each with its run's expiry, and deletes their marks,
    /// [`RUNS_AT_ONCE`] runs at once.
    /// Idempotent: a pass cut short is taken up by the next.
    pub async fn stamp_ended_runs(&self, limit: usize) -> Result<ExpiredRunsBatch, StoreError> {
        let mut marks = Vec::new();
        let mut more = false;
        for shard in 0..RETENTION_SHARDS {
            let left = limit.saturating_sub(marks.len());
            if left == 0 {
                more = true;
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
                more = true;
            }
            marks.extend(output.items.unwrap_or_default());
        }
        let runs = marks.len() as u64;
        let items = stream::iter(marks.into_iter().map(|mark| self.stamp_one_run(mark)))
            .buffer_unordered(RUNS_AT_ONCE)
            .try_fold(0u64, |total, items| async move { Ok(total + items) })
            .await?;
        Ok(ExpiredRunsBatch { runs, items, more })
    }

    /// Stamps every item of the marked run that lacks its expiry (and its
    /// idempotency key's item), page by page, then deletes the mark unless
    /// a later commit moved it.
    async fn stamp_one_run(&self, mark: Item) -> Result<u64, StoreError> {
        let mark_pk = read_text(&mark, "pk")?.to_string();
        let run_pk = read_text(&mark, "sk")?.to_string();
        let tenant_id = read_text(&mark, "tenantId")?.to_string();
        let retain_until = read_number(&mark, "retainUntil")?;
        let mut count = 0;
        let mut start = None;
        // Only what the pass changes comes back: items whose expiry is
        // missing or later than the run's (when lifting: any expiry), and
        // the one carrying the idempotency key.
        let (filter, until) = if retain_until == 0 {
            (
                "attribute_exists(expiresAt) OR attribute_exists(idempotencyKey)",
                None,
            )
        } else {
            (
                "attribute_not_exists(expiresAt) OR expiresAt > :until OR attribute_exists(idempotencyKey)",
                Some(n(retain_until)),
            )
        };
        loop {
            let query = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :pk")
                .filter_expression(filter)
                .expression_attribute_values(":pk", s(&run_pk));
            let query = match &until {
                Some(until) => query.expression_attribute_values(":until", until.clone()),
                None => query,
            };
            let page = query
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(sdk_failure)?;
            let stamps = page_stamps(page.items(), &run_pk, &tenant_id, retain_until)?;
            count += self.put_frames_back(stamps.frames).await?;
            count += self.update_stamps(stamps.updates, retain_until).await?;
            if let Some(key_pk) = stamps.key {
                let run_id = run_pk
                    .strip_prefix(&run_pk_prefix(&tenant_id))
                    .unwrap_or_default();
                count += self.stamp_key(key_pk, run_id, retain_until).await?;
            }
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => break,
            }
        }
        let deleted = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key("pk", s(mark_pk))
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

    /// Puts frames back whole with their expiry, 25 to a call, putting a
    /// call's unprocessed ones again with a growing pause.
    async fn put_frames_back(&self, frames: Vec<Item>) -> Result<u64, StoreError> {
        let count = frames.len() as u64;
        let mut requests = frames
            .into_iter()
            .map(|item| {
                PutRequest::builder()
                    .set_item(Some(item))
                    .build()
                    .map(|put| WriteRequest::builder().put_request(put).build())
                    .map_err(unavailable)
            })
            .collect::<Result<Vec<_>, _>>()?;
        while !requests.is_empty() {
            let mut batch: Vec<WriteRequest> = requests
                .drain(..requests.len().min(BATCH_WRITE_ITEMS))
                .collect();
            let mut attempt = 0;
            while !batch.is_empty() {
                attempt += 1;
                if attempt > BATCH_WRITE_ATTEMPTS {
                    return Err(StoreError::Unavailable(format!(
                        "DynamoDB left {} frame(s) unprocessed after {BATCH_WRITE_ATTEMPTS} calls",
                        batch.len()
                    )));
                }
                if attempt > 1 {
                    tokio::time::sleep(Duration::from_millis(25 << attempt.min(6))).await;
                }
                let output = self
                    .client
                    .batch_write_item()
                    .request_items(&self.table, batch)
                    .send()
                    .await
                    .map_err(sdk_failure)?;
                batch = output
                    .unprocessed_items
                    .and_then(|mut left| left.remove(&self.table))
                    .unwrap_or_default();
            }
        }
        Ok(count)
    }

    /// Sets (or, for a lifted run, removes) the expiry of the run's
    /// idempotency key's item, on condition that the key still names the
    /// run (an expired key may have been taken by a newer run since).
    async fn stamp_key(
        &self,
        key_pk: String,
        run_id: &str,
        retain_until: u64,
    ) -> Result<u64, StoreError> {
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(key_pk))
            .key("sk", s("IDEM"))
            .condition_expression("runId = :run")
            .expression_attribute_values(":run", s(run_id));
        set_or_lift_expiry(update, retain_until).await
    }

    /// Sets (or, for a lifted run, removes) the expiry of each item,
    /// conditional on the item still being there, a few at once.
    async fn update_stamps(
        &self,
        keys: Vec<(String, String)>,
        retain_until: u64,
    ) -> Result<u64, StoreError> {
        let updated = stream::iter(keys.into_iter().map(|(pk, sk)| async move {
            let update = self
                .client
                .update_item()
                .table_name(&self.table)
                .key("pk", s(pk))
                .key("sk", s(sk))
                .condition_expression("attribute_exists(pk)");
            set_or_lift_expiry(update, retain_until).await
        }))
        .buffer_unordered(UPDATES_AT_ONCE)
        .try_fold(0u64, |total, one| async move { Ok(total + one) })
        .await?;
        Ok(updated)
    }
}

/// Sends `update` (keyed and conditioned by the caller) setting the item's
/// expiry to `retain_until`, or removing it when that is 0 (a lifted run):
/// 1 when written, 0 when its condition no longer held.
async fn set_or_lift_expiry(
    update: aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder,
    retain_until: u64,
) -> Result<u64, StoreError> {
    let updated = if retain_until == 0 {
        update.update_expression("REMOVE expiresAt").send().await
    } else {
        update
            .update_expression("SET expiresAt = :until")
            .expression_attribute_values(":until", n(retain_until))
            .send()
            .await
    };
    match updated {
        Ok(_) => Ok(1),
        Err(error)
            if error
                .as_service_error()
                .is_some_and(|service| service.is_conditional_check_failed_exception()) =>
        {
            Ok(0)
        }
        Err(error) => Err(sdk_failure(error)),
    }
}

/// What every run partition of `tenant_id` starts with.
fn run_pk_prefix(tenant_id: &str) -> String {
    run_pk(tenant_id, "")
}

/// What a page of a run's items needs: items already carrying the run's
/// expiry (or, when lifting, none) are left alone; frames are put back;
/// the rest, and each idempotency key's item, are updated.
fn page_stamps(
    items: &[Item],
    run_pk: &str,
    tenant_id: &str,
    retain_until: u64,
) -> Result<PageStamps, StoreError> {
    let lifting = retain_until == 0;
    let mut stamps = PageStamps::default();
    for item in items {
        let expiry = item
            .get("expiresAt")
            .and_then(|value| value.as_n().ok())
            .and_then(|text| text.parse::<u64>().ok());
        let sort_key = read_text(item, "sk")?;
        // A lease item carries its own, shorter expiry (`lease_items`),
        // kept when a run is taken up again.
        let left_alone = if lifting {
            expiry.is_none() || sort_key.starts_with(NODE_LEASE_PREFIX)
        } else {
            expiry.is_some_and(|expiry| expiry <= retain_until)
        };
        if !left_alone {
            if !lifting && sort_key.starts_with(EVENT_SK_PREFIX) {
                let mut stamped = item.clone();
                stamped.insert("expiresAt".to_string(), n(retain_until));
                stamps.frames.push(stamped);
            } else {
                stamps
                    .updates
                    .push((run_pk.to_string(), sort_key.to_string()));
            }
        }
        if let Some(key) = item
            .get("idempotencyKey")
            .and_then(|value| value.as_s().ok())
        {
            stamps.key = Some(idempotency_pk(tenant_id, key));
        }
    }
    Ok(stamps)
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
