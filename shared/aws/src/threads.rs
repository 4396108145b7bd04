//! `ThreadStore` on the run store's DynamoDB table: one item per exchange,
//! keyed by the run that answered it (recording it again overwrites it with
//! the same content), read with one consistent `Query` and ordered by time.
//!
//! | item | pk | sk | attributes |
//! | --- | --- | --- | --- |
//! | exchange | `T#{tenant}#THREAD#{threadId}` | `X#{runId}` | `exchange` (JSON), `atMillis`, `expiresAt` (TTL, like runs) |
//! | lane | `T#{tenant}#THREAD#{threadId}` | `LANE` | `lane` (JSON), `version` (each put conditional on it), `expiresAt` |
//! | summary | `T#{tenant}#THREAD#{threadId}` | `SUMMARY` | `threadId`, `startedAtMillis`, `firstMessage`, `lastAtMillis`, `lastMessage`, `gsi1pk` = `T#{tenant}#THREADS`, `gsi1sk` (the threads list, `thread_summaries`), `expiresAt` |

use async_trait::async_trait;
use baton_core::chat::ChatExchange;
use baton_core::thread_lane::ThreadLane;
use baton_core::thread_listing::{ThreadListPage, ThreadListQuery};
use baton_runtime::error::StoreError;
use baton_runtime::ports::ThreadStore;

use crate::store::{DynamoRunStore, n, s, sdk_failure};

fn thread_pk(tenant_id: &str, thread_id: &str) -> String {
    format!("T#{tenant_id}#THREAD#{thread_id}")
}

#[async_trait]
impl ThreadStore for DynamoRunStore {
    async fn thread_exchanges(
        &self,
        tenant_id: &str,
        thread_id: &str,
    ) -> Result<Option<Vec<ChatExchange>>, StoreError> {
        let items = self
            .query_open_item_pages(
                thread_pk(tenant_id, thread_id),
                Some("X#".into()),
                "exchange",
            )
            .await?;
        let mut exchanges = items
            .iter()
            .map(|(_, exchange)| {
                serde_json::from_str::<ChatExchange>(exchange)
                    .map_err(|error| StoreError::Corrupt(format!("thread exchange: {error}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if exchanges.is_empty() {
            return Ok(None);
        }
        exchanges.sort_by(|left, right| {
            (left.at_millis, &left.run_id).cmp(&(right.at_millis, &right.run_id))
        });
        Ok(Some(exchanges))
    }

    async fn record_exchange(
        &self,
        tenant_id: &str,
        thread_id: &str,
        exchange: &ChatExchange,
    ) -> Result<(), StoreError> {
        let payload = serde_json::to_string(exchange)
            .map_err(|error| StoreError::Corrupt(error.to_string()))?;
        self.client
            .put_item()
            .table_name(&self.table)
            .item("pk", s(thread_pk(tenant_id, thread_id)))
            .item("sk", s(format!("X#{}", exchange.run_id)))
            .item("exchange", s(payload))
            .item("atMillis", n(exchange.at_millis))
            .item("expiresAt", self.expires_at())
            .send()
            .await
            .map_err(sdk_failure)?;
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

    async fn thread_lane(
        &self,
        tenant_id: &str,
        thread_id: &str,
    ) -> Result<(ThreadLane, u64), StoreError> {
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
        tenant_id: &str,
        thread_id: &str,
        lane: &ThreadLane,
        expected_version: u64,
    ) -> Result<bool, StoreError> {
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
            .item("expiresAt", self.expires_at());
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
