//! A thread read by page from its newest end on DynamoDB. Exchanges are
//! keyed by their run (`X#{runId}`: recording one again overwrites it), so
//! time order needs an index in the thread's partition: each recorded
//! exchange first puts an entry
//!
//! ```text
//! pk = T#{tenant}#THREAD#{threadId}   sk = XT#{atMillis:013}#{runId}   runId, atMillis, expiresAt
//! ```
//!
//! and a page is one `Query` of those entries, newest first, then the
//! exchanges they name (each entry whose exchange has since moved in time,
//! a retried step's, is skipped). A thread written before the index has
//! exchanges without entries: the first read that reaches the index's
//! start reads the thread whole once, puts the missing entries, and marks
//! it indexed (`XINDEXED`), so later reads never do.

use baton_core::basics::ids::ThreadKey;
use baton_core::records::chat::ChatExchange;
use baton_runtime::error::StoreError;
use baton_runtime::ports::ThreadPage;
use futures_util::{StreamExt, TryStreamExt, stream};

use super::keys::{
    EXCHANGE_POINTER_PREFIX, EXCHANGES_INDEXED_SK, exchange_pointer_sk, exchange_sk, thread_pk,
};
use super::threads::exchanges_of_items;
use crate::dynamodb::store::{DynamoRunStore, read_number, read_text, s, sdk_failure};

/// Exchanges read at once for a page.
const EXCHANGES_AT_ONCE: usize = 8;

impl DynamoRunStore {
    /// Puts the time index entry of `exchange` (before the exchange itself:
    /// an entry whose exchange is missing is skipped by readers).
    pub(crate) async fn put_exchange_pointer(
        &self,
        tenant_id: &str,
        pk: &str,
        exchange: &ChatExchange,
    ) -> Result<(), StoreError> {
        self.client
            .put_item()
            .table_name(&self.table)
            .item("pk", s(pk))
            .item(
                "sk",
                s(exchange_pointer_sk(exchange.at_millis, &exchange.run_id)),
            )
            .item("runId", s(&exchange.run_id))
            .item("atMillis", crate::dynamodb::store::n(exchange.at_millis))
            .item("expiresAt", self.thread_expires_at(tenant_id))
            .send()
            .await
            .map_err(sdk_failure)?;
        Ok(())
    }

    /// The exchange of run `run_id` in the thread, if recorded.
    async fn exchange_of_run(
        &self,
        pk: &str,
        run_id: &str,
    ) -> Result<Option<ChatExchange>, StoreError> {
        let whole = exchange_sk(run_id);
        let items: Vec<_> = self
            .query_items_with_prefix(pk, &whole)
            .await?
            .into_iter()
            .filter(|item| {
                read_text(item, "sk").is_ok_and(|sort_key| {
                    sort_key == whole || sort_key.starts_with(&format!("{whole}#P"))
                })
            })
            .collect();
        Ok(exchanges_of_items(&items)?.into_iter().next())
    }

    /// [`baton_runtime::ports::ThreadStore::thread_exchanges_before`] on the
    /// time index.
    pub(crate) async fn thread_page(
        &self,
        key: ThreadKey<'_>,
        before: Option<&(u64, String)>,
        limit: usize,
    ) -> Result<Option<ThreadPage>, StoreError> {
        let (tenant_id, thread_id) = (key.tenant_id(), key.thread_id());
        let pk = thread_pk(tenant_id, thread_id);
        if !self.thread_fully_indexed(&pk).await? {
            self.index_thread(tenant_id, &pk).await?;
        }
        // Entries strictly before `before`, newest first: `XT#:` sorts
        // after every digit, so it bounds the newest page.
        let upper = before.map_or_else(
            || format!("{EXCHANGE_POINTER_PREFIX}:"),
            |(at, run)| exchange_pointer_sk(*at, run),
        );
        let mut exchanges: Vec<ChatExchange> = Vec::new();
        let mut start = None;
        let mut older = false;
        let mut first_page = true;
        loop {
            let wanted = limit + 1 - exchanges.len();
            let output = self
                .client
                .query()
                .table_name(&self.table)
                .consistent_read(true)
                .key_condition_expression("pk = :pk AND sk BETWEEN :low AND :high")
                .expression_attribute_values(":pk", s(&pk))
                .expression_attribute_values(":low", s(EXCHANGE_POINTER_PREFIX))
                .expression_attribute_values(":high", s(&upper))
                .scan_index_forward(false)
                .limit(i32::try_from(wanted).unwrap_or(i32::MAX))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(sdk_failure)?;
            let entries: Vec<(String, u64)> = output
                .items()
                .iter()
                .filter(|entry| read_text(entry, "sk").is_ok_and(|sort_key| sort_key != upper))
                .map(|entry| {
                    Ok((
                        read_text(entry, "runId")?.to_string(),
                        read_number(entry, "atMillis")?,
                    ))
                })
                .collect::<Result<_, StoreError>>()?;
            let whole_thread = before.is_none()
                && first_page
                && entries.len() <= limit
                && output
                    .last_evaluated_key
                    .as_ref()
                    .is_none_or(|key| key.is_empty());
            if whole_thread {
                // The index holds the whole thread in one short page: one
                // query of the exchanges reads it.
                return self.short_thread(&pk, limit).await;
            }
            let run_ids: Vec<String> = entries.iter().map(|(run_id, _)| run_id.clone()).collect();
            let found: Vec<Option<ChatExchange>> =
                stream::iter(run_ids.into_iter().map(|run_id| {
                    let pk = pk.clone();
                    async move { self.exchange_of_run(&pk, &run_id).await }
                }))
                .buffered(EXCHANGES_AT_ONCE)
                .try_collect()
                .await?;
            for ((_, at_millis), exchange) in entries.iter().zip(found) {
                // An entry whose exchange moved in time (a retried step) or
                // never got written is skipped.
                if let Some(exchange) = exchange.filter(|exchange| exchange.at_millis == *at_millis)
                {
                    exchanges.push(exchange);
                }
            }
            if exchanges.len() > limit {
                exchanges.truncate(limit);
                older = true;
                break;
            }
            first_page = false;
            match output.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => break,
            }
        }
        if exchanges.is_empty() && before.is_none() && !self.thread_exists(&pk).await? {
            return Ok(None);
        }
        exchanges.reverse();
        Ok(Some(ThreadPage { exchanges, older }))
    }

    /// A thread of at most `limit` exchanges, read whole by one query.
    async fn short_thread(&self, pk: &str, limit: usize) -> Result<Option<ThreadPage>, StoreError> {
        let items = self.query_items_with_prefix(pk, "X#").await?;
        let mut exchanges = exchanges_of_items(&items)?;
        if exchanges.is_empty() {
            return Ok(None);
        }
        exchanges.sort_by(|left, right| {
            (left.at_millis, &left.run_id).cmp(&(right.at_millis, &right.run_id))
        });
        let older = exchanges.len() > limit;
        let exchanges = exchanges.split_off(exchanges.len().saturating_sub(limit));
        Ok(Some(ThreadPage { exchanges, older }))
    }

    async fn thread_fully_indexed(&self, pk: &str) -> Result<bool, StoreError> {
        let read = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(EXCHANGES_INDEXED_SK))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_failure)?;
        Ok(read.item.is_some())
    }

    /// Whether the thread has any exchange.
    async fn thread_exists(&self, pk: &str) -> Result<bool, StoreError> {
        let output = self
            .client
            .query()
            .table_name(&self.table)
            .consistent_read(true)
            .key_condition_expression("pk = :pk AND begins_with(sk, :exchanges)")
            .expression_attribute_values(":pk", s(pk))
            .expression_attribute_values(":exchanges", s("X#"))
            .limit(1)
            .select(aws_sdk_dynamodb::types::Select::Count)
            .send()
            .await
            .map_err(sdk_failure)?;
        Ok(output.count() > 0)
    }

    /// Reads the thread whole once, puts the index entries its exchanges
    /// lack, and marks it indexed (a thread without exchanges is left
    /// unmarked: nothing is written for a thread that does not exist).
    async fn index_thread(&self, tenant_id: &str, pk: &str) -> Result<(), StoreError> {
        let items = self.query_items_with_prefix(pk, "X#").await?;
        if items.is_empty() {
            // No thread (yet): nothing to mark.
            return Ok(());
        }
        for exchange in exchanges_of_items(&items)? {
            self.put_exchange_pointer(tenant_id, pk, &exchange).await?;
        }
        self.client
            .put_item()
            .table_name(&self.table)
            .item("pk", s(pk))
            .item("sk", s(EXCHANGES_INDEXED_SK))
            .item("expiresAt", self.thread_expires_at(tenant_id))
            .send()
            .await
            .map_err(sdk_failure)?;
        Ok(())
    }
}
