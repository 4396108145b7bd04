//! `ThreadStore` on the run store's DynamoDB table: one item per exchange,
//! keyed by the run that answered it (recording it again overwrites it with
//! the same content), read with one consistent `Query` and ordered by time.
//!
//! | item | pk | sk | attributes |
//! | --- | --- | --- | --- |
//! | exchange | `T#{tenant}#THREAD#{threadId}` | `X#{runId}` | `exchange` (JSON), `atMillis`, `expiresAt` (TTL, like runs); an exchange over one item: `exchangeDeflated` (its first part), `exchangeParts`, and `X#{runId}#P{k}` items (`part`), see `large_items` |
//! | time index entry | `T#{tenant}#THREAD#{threadId}` | `XT#{atMillis:013}#{runId}` | `runId`, `atMillis`, `expiresAt`: a thread read by page from its newest end (`thread_pages`) |
//! | indexed mark | `T#{tenant}#THREAD#{threadId}` | `XINDEXED` | `expiresAt`: every exchange has its entry |
//! | lane | `T#{tenant}#THREAD#{threadId}` | `LANE` | `lane` (JSON), `version` (each put conditional on it), `expiresAt` |
//! | summary | `T#{tenant}#THREAD#{threadId}` | `SUMMARY` | `threadId`, `startedAtMillis`, `firstMessage`, `lastAtMillis`, `lastMessage`, `gsi1pk` = `T#{tenant}#THREADS`, `gsi1sk` (the threads list, `thread_summaries`), `expiresAt` |

use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use baton_core::basics::ids::ThreadKey;
use baton_core::records::chat::ChatExchange;
use baton_core::records::thread_lane::ThreadLane;
use baton_core::records::thread_listing::{ThreadListPage, ThreadListQuery};
use baton_runtime::error::StoreError;
use baton_runtime::ports::ThreadStore;

use super::keys::{exchange_sk, part_sk, thread_pk};
use crate::dynamodb::large_items;
use crate::dynamodb::store::{DynamoRunStore, n, read_text, s, sdk_failure};

#[async_trait]
impl ThreadStore for DynamoRunStore {
    async fn thread_exchanges(
        &self,
        key: ThreadKey<'_>,
    ) -> Result<Option<Vec<ChatExchange>>, StoreError> {
        let (tenant_id, thread_id) = (key.tenant_id(), key.thread_id());
        let items = self
            .query_items_with_prefix(&thread_pk(tenant_id, thread_id), "X#")
            .await?;
        let mut exchanges = exchanges_of_items(&items)?;
        if exchanges.is_empty() {
            return Ok(None);
        }
        exchanges.sort_by(|left, right| {
            (left.at_millis, &left.run_id).cmp(&(right.at_millis, &right.run_id))
        });
        Ok(Some(exchanges))
    }

    async fn thread_exchanges_before(
        &self,
        key: ThreadKey<'_>,
        before: Option<&(u64, String)>,
        limit: usize,
    ) -> Result<Option<baton_runtime::ports::ThreadPage>, StoreError> {
        self.thread_page(key, before, limit).await
    }

    async fn record_exchange(
        &self,
        key: ThreadKey<'_>,
        exchange: &ChatExchange,
    ) -> Result<(), StoreError> {
        let (tenant_id, thread_id) = (key.tenant_id(), key.thread_id());
        let payload = serde_json::to_string(exchange)
            .map_err(|error| StoreError::Corrupt(error.to_string()))?;
        let pk = thread_pk(tenant_id, thread_id);
        // Its time index entry first (`thread_pages`).
        self.put_exchange_pointer(tenant_id, &pk, exchange).await?;
        let sort_key = exchange_sk(&exchange.run_id);
        if payload.len() <= large_items::PART_BYTES {
            self.client
                .put_item()
                .table_name(&self.table)
                .item("pk", s(&pk))
                .item("sk", s(&sort_key))
                .item("exchange", s(payload))
                .item("atMillis", n(exchange.at_millis))
                .item("expiresAt", self.thread_expires_at(tenant_id))
                .send()
                .await
                .map_err(sdk_failure)?;
        } else {
            // A long answer: deflated, in parts, written together.
            let what = format!("thread {thread_id} exchange of run {}", exchange.run_id);
            let deflated = large_items::deflate(payload.as_bytes(), &what)?;
            let parts = large_items::into_parts(deflated, &what, payload.len())?;
            let main = crate::dynamodb::store::Item::from([
                ("pk".to_string(), s(&pk)),
                ("sk".to_string(), s(&sort_key)),
                (
                    "exchangeDeflated".to_string(),
                    AttributeValue::B(parts[0].clone()),
                ),
                ("exchangeParts".to_string(), n(parts.len() as u64)),
                ("atMillis".to_string(), n(exchange.at_millis)),
                ("expiresAt".to_string(), self.thread_expires_at(tenant_id)),
            ]);
            let mut items = vec![crate::dynamodb::store::put(&self.table, main, None)?];
            items.extend(large_items::part_items(
                &self.table,
                &pk,
                &parts,
                |index| part_sk(&sort_key, index),
                None,
                Some(&self.thread_expires_at(tenant_id)),
            )?);
            large_items::within_transaction_bytes(&items, &exchange.run_id)?;
            self.client
                .transact_write_items()
                .set_transact_items(Some(items))
                .send()
                .await
                .map_err(sdk_failure)?;
        }
        self.record_thread_summary(
            tenant_id,
            thread_id,
            &thread_pk(tenant_id, thread_id),
            exchange,
        )
        .await
    }

    async fn list_threads(
        &self,
        tenant_id: &str,
        query: &ThreadListQuery,
    ) -> Result<ThreadListPage, StoreError> {
        self.query_thread_page(tenant_id, query).await
    }

    async fn thread_lane(&self, key: ThreadKey<'_>) -> Result<(ThreadLane, u64), StoreError> {
        let (tenant_id, thread_id) = (key.tenant_id(), key.thread_id());
        let read = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(thread_pk(tenant_id, thread_id)))
            .key("sk", s("LANE"))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_failure)?;
        let Some(item) = read.item else {
            return Ok((ThreadLane::default(), 0));
        };
        let lane = item
            .get("lane")
            .and_then(|value| value.as_s().ok())
            .ok_or_else(|| StoreError::Corrupt("thread lane item without `lane`".into()))?;
        let version = item
            .get("version")
            .and_then(|value| value.as_n().ok())
            .and_then(|number| number.parse::<u64>().ok())
            .ok_or_else(|| StoreError::Corrupt("thread lane item without `version`".into()))?;
        let lane = serde_json::from_str(lane)
            .map_err(|error| StoreError::Corrupt(format!("thread lane: {error}")))?;
        Ok((lane, version))
    }

    async fn put_thread_lane(
        &self,
        key: ThreadKey<'_>,
        lane: &ThreadLane,
        expected_version: u64,
    ) -> Result<bool, StoreError> {
        let (tenant_id, thread_id) = (key.tenant_id(), key.thread_id());
        let payload =
            serde_json::to_string(lane).map_err(|error| StoreError::Corrupt(error.to_string()))?;
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("pk", s(thread_pk(tenant_id, thread_id)))
            .item("sk", s("LANE"))
            .item("lane", s(payload))
            .item("version", n(expected_version + 1))
            .item("expiresAt", self.thread_expires_at(tenant_id));
        let put = if expected_version == 0 {
            put.condition_expression("attribute_not_exists(pk)")
        } else {
            put.condition_expression("version = :expected")
                .expression_attribute_values(":expected", n(expected_version))
        };
        match put.send().await {
            Ok(_) => Ok(true),
            Err(error)
                if error
                    .as_service_error()
                    .is_some_and(|service| service.is_conditional_check_failed_exception()) =>
            {
                Ok(false)
            }
            Err(error) => Err(sdk_failure(error)),
        }
    }
}

/// The exchanges of `items` (exchange items and their parts, in sort-key
/// order), each large one joined from its parts.
pub(crate) fn exchanges_of_items(
    items: &[crate::dynamodb::store::Item],
) -> Result<Vec<ChatExchange>, StoreError> {
    let mut exchanges = Vec::new();
    let mut index = 0;
    while index < items.len() {
        let item = &items[index];
        index += 1;
        let sort_key = read_text(item, "sk")?;
        if sort_key["X#".len()..].contains("#P") {
            continue; // a part of a large exchange, read with its main item
        }
        let text = match read_text(item, "exchange") {
            Ok(text) => text.as_bytes().to_vec(),
            Err(_) => {
                // A large exchange: deflated, in parts after its item.
                let (text, used) = large_items::joined_payload(
                    item,
                    items,
                    index,
                    ("exchangeDeflated", "exchangeParts"),
                    sort_key,
                )?
                .ok_or_else(|| {
                    StoreError::Corrupt(format!("thread exchange {sort_key}: a part is missing"))
                })?;
                index += used;
                text
            }
        };
        exchanges.push(
            serde_json::from_slice::<ChatExchange>(&text)
                .map_err(|error| StoreError::Corrupt(format!("thread exchange: {error}")))?,
        );
    }
    Ok(exchanges)
}

impl DynamoRunStore {
    /// Every item of `pk` whose sort key starts with `prefix`, in order
    /// (every page).
    pub(crate) async fn query_items_with_prefix(
        &self,
        pk: &str,
        prefix: &str,
    ) -> Result<Vec<crate::dynamodb::store::Item>, StoreError> {
        self.all_pages(
            self.client
                .query()
                .table_name(&self.table)
                .consistent_read(true)
                .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
                .expression_attribute_values(":pk", s(pk))
                .expression_attribute_values(":prefix", s(prefix)),
        )
        .await
    }
}
