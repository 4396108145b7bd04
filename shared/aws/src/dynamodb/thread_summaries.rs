//! The threads list on DynamoDB: each thread keeps one summary item beside
//! its exchanges, and the sparse index `gsi1` orders a tenant's summaries
//! by last activity (`gsi1pk` = `T#{tenant}#THREADS`, `gsi1sk` = the
//! listing's ordering key `{lastAtMillis:013}.{threadId}`), so a page is one
//! `Query` of the index, newest first, before the cursor.
//!
//! The summary is kept by two conditional updates per recorded exchange,
//! each idempotent and independent of the order exchanges are recorded in:
//! the earliest exchange sets `startedAtMillis` and `firstMessage` (only
//! when none is earlier), the latest sets `lastAtMillis`, `lastMessage` and
//! the index keys (only when none is later). A condition that fails means a
//! better one is already there: nothing to do. The index is eventually
//! consistent, as DynamoDB's global indexes are: a thread answered a moment
//! ago may list a moment later.

use aws_sdk_dynamodb::types::AttributeValue;
use baton_core::records::chat::ChatExchange;
use baton_core::records::thread_listing::{
    ThreadListPage, ThreadListQuery, ThreadListing, listed_message, thread_ordering_key,
};
use baton_runtime::error::StoreError;

use super::keys::threads_index_pk;
use crate::dynamodb::attributes::{read_number, read_text};
use crate::dynamodb::store::{DynamoRunStore, PENDING_OUTBOX_INDEX, n, s, sdk_failure};

/// The summary item's sort key, beside the thread's exchanges and lane.
pub(crate) const SUMMARY_SK: &str = "SUMMARY";

fn condition_failed<E: aws_sdk_dynamodb::error::ProvideErrorMetadata>(
    error: &aws_sdk_dynamodb::error::SdkError<E>,
) -> bool {
    error
        .as_service_error()
        .and_then(aws_sdk_dynamodb::error::ProvideErrorMetadata::code)
        == Some("ConditionalCheckFailedException")
}

impl DynamoRunStore {
    /// Folds `exchange` into its thread's summary item (`thread_pk`).
    pub(crate) async fn record_thread_summary(
        &self,
        tenant_id: &str,
        thread_id: &str,
        thread_pk: &str,
        exchange: &ChatExchange,
    ) -> Result<(), StoreError> {
        let message = listed_message(&exchange.user);
        let earliest = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(thread_pk))
            .key("sk", s(SUMMARY_SK))
            .update_expression(
                "SET startedAtMillis = :at, firstMessage = :message, threadId = :thread, expiresAt = :expires",
            )
            .condition_expression("attribute_not_exists(startedAtMillis) OR startedAtMillis > :at")
            .expression_attribute_values(":at", n(exchange.at_millis))
            .expression_attribute_values(":message", s(message.clone()))
            .expression_attribute_values(":thread", s(thread_id))
            .expression_attribute_values(":expires", self.thread_expires_at(tenant_id))
            .send()
            .await;
        match earliest {
            Err(error) if !condition_failed(&error) => {
                return Err(sdk_failure(error));
            }
            _ => {}
        }
        let latest = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(thread_pk))
            .key("sk", s(SUMMARY_SK))
            .update_expression(
                "SET lastAtMillis = :at, lastMessage = :message, threadId = :thread, \
                 gsi1pk = :index, gsi1sk = :order, expiresAt = :expires",
            )
            .condition_expression("attribute_not_exists(lastAtMillis) OR lastAtMillis <= :at")
            .expression_attribute_values(":at", n(exchange.at_millis))
            .expression_attribute_values(":message", s(message))
            .expression_attribute_values(":thread", s(thread_id))
            .expression_attribute_values(":index", s(threads_index_pk(tenant_id)))
            .expression_attribute_values(
                ":order",
                s(thread_ordering_key(exchange.at_millis, thread_id)),
            )
            .expression_attribute_values(":expires", self.thread_expires_at(tenant_id))
            .send()
            .await;
        match latest {
            Err(error) if !condition_failed(&error) => Err(sdk_failure(error)),
            _ => Ok(()),
        }
    }

    /// One page of the tenant's threads from the index.
    pub(crate) async fn query_thread_page(
        &self,
        tenant_id: &str,
        query: &ThreadListQuery,
    ) -> Result<ThreadListPage, StoreError> {
        let request = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(PENDING_OUTBOX_INDEX)
            .expression_attribute_values(":index", s(threads_index_pk(tenant_id)))
            .scan_index_forward(false)
            .limit(i32::try_from(query.limit + 1).unwrap_or(i32::MAX));
        let request = match &query.cursor {
            Some(cursor) => request
                .key_condition_expression("gsi1pk = :index AND gsi1sk < :cursor")
                .expression_attribute_values(":cursor", s(cursor)),
            None => request.key_condition_expression("gsi1pk = :index"),
        };
        let output = request.send().await.map_err(sdk_failure)?;
        let listings = output
            .items()
            .iter()
            .map(listing_of)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ThreadListPage::newest_first(listings, query.limit))
    }
}

fn listing_of(
    item: &std::collections::HashMap<String, AttributeValue>,
) -> Result<ThreadListing, StoreError> {
    let last_at_millis = read_number(item, "lastAtMillis")?;
    Ok(ThreadListing {
        thread_id: read_text(item, "threadId")?.to_string(),
        // An earliest update not yet landed (a crash between the two):
        // the latest stands in.
        started_at_millis: read_number(item, "startedAtMillis").unwrap_or(last_at_millis),
        last_at_millis,
        first_message: read_text(item, "firstMessage")
            .or_else(|_| read_text(item, "lastMessage"))?
            .to_string(),
        last_message: read_text(item, "lastMessage")?.to_string(),
    })
}
