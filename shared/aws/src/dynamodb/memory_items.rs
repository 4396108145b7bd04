//! A tenant's memory on the run store's table: the tenant's items in one
//! partition, sorted by namespace then key (the namespace's parts joined by
//! U+001F, then U+001E before the key), so a namespace, or every namespace
//! under a prefix, is one query. Each namespace has a counter item moved in
//! the same transaction as an item's creation or deletion, conditional on
//! the cap: a namespace cannot pass it whatever writes race. An item with
//! an expiry carries it as `expiresAt` (Unix s), so DynamoDB's TTL deletes
//! it; a counter that still counts items the TTL took is recounted when it
//! refuses a put.
//!
//! | item | pk | sk | attributes |
//! | --- | --- | --- | --- |
//! | memory item | `T#{tenant}#MEM` | `N#{namespace}\u{1e}{key}` | `item` (JSON), `person`, `expiresAt` (TTL) |
//! | namespace counter | `T#{tenant}#MEM` | `C#{namespace}` | `items` |

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{Delete, TransactWriteItem};
use baton_core::basics::instant::Instant;
use baton_memory::item::{MemoryItem, namespace_key, under_prefix};
use baton_runtime::error::StoreError;
use baton_runtime::ports::{MemoryPut, MemoryStore};

use crate::dynamodb::attributes::{
    Item, cancellation_codes, n, put, read_text, s, sdk_failure, unavailable,
};
use crate::dynamodb::keys::{
    memory_counter_sk as counter_sk, memory_item_sk as item_sk, memory_pk,
};
use crate::dynamodb::store::DynamoRunStore;

/// What one item's attributes may take at most (DynamoDB's 400 KB less
/// room for the keys and the other attributes).
const MOST_ITEM_BYTES: usize = 380_000;

fn decode(item: &Item) -> Result<MemoryItem, StoreError> {
    serde_json::from_str(read_text(item, "item")?)
        .map_err(|error| StoreError::Corrupt(format!("a memory item does not parse: {error}")))
}

fn conditional_failed(code: &str) -> bool {
    code == "ConditionalCheckFailed"
}

impl DynamoRunStore {
    /// Every item whose sort key begins with `prefix`, in order, at most
    /// `limit`, kept when `keep` says so.
    async fn memory_query(
        &self,
        tenant_id: &str,
        sk_prefix: &str,
        limit: usize,
        keep: impl Fn(&MemoryItem) -> bool + Send,
    ) -> Result<Vec<MemoryItem>, StoreError> {
        let mut found = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .consistent_read(true)
                .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
                .expression_attribute_values(":pk", s(memory_pk(tenant_id)))
                .expression_attribute_values(":prefix", s(sk_prefix))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(sdk_failure)?;
            for item in page.items() {
                let item = decode(item)?;
                if keep(&item) {
                    found.push(item);
                    if found.len() >= limit {
                        return Ok(found);
                    }
                }
            }
            start = page.last_evaluated_key().cloned();
            if start.is_none() {
                return Ok(found);
            }
        }
    }

    /// Deletes `items` one transaction each (the item and its namespace's
    /// count); how many were there.
    async fn delete_memory_items(
        &self,
        tenant_id: &str,
        items: &[MemoryItem],
    ) -> Result<usize, StoreError> {
        let mut deleted = 0;
        for item in items {
            if self
                .delete_memory(tenant_id, &item.namespace, &item.key)
                .await?
            {
                deleted += 1;
            }
        }
        Ok(deleted)
    }

    /// Sets the namespace's counter to the items it holds (the TTL takes
    /// items without moving it).
    async fn recount_namespace(&self, tenant_id: &str, namespace: &str) -> Result<u64, StoreError> {
        let held = self
            .memory_query(
                tenant_id,
                &format!("N#{namespace}\u{1e}"),
                usize::MAX,
                |_| true,
            )
            .await?
            .len() as u64;
        self.client
            .put_item()
            .table_name(&self.table)
            .item("pk", s(memory_pk(tenant_id)))
            .item("sk", s(counter_sk(namespace)))
            .item("items", n(held))
            .send()
            .await
            .map_err(sdk_failure)?;
        Ok(held)
    }
}

#[async_trait]
impl MemoryStore for DynamoRunStore {
    async fn put_memory(
        &self,
        tenant_id: &str,
        item: &MemoryItem,
        namespace_cap: usize,
    ) -> Result<MemoryPut, StoreError> {
        let text = serde_json::to_string(item)
            .map_err(|error| StoreError::Corrupt(format!("memory item: {error}")))?;
        if text.len() > MOST_ITEM_BYTES {
            return Err(StoreError::Corrupt(format!(
                "a memory item of {} bytes does not fit one DynamoDB item ({MOST_ITEM_BYTES} at most)",
                text.len()
            )));
        }
        let namespace = item.namespace_key();
        let mut attributes = Item::from([
            ("pk".to_string(), s(memory_pk(tenant_id))),
            ("sk".to_string(), s(item_sk(&namespace, &item.key))),
            ("item".to_string(), s(text)),
        ]);
        if let Some(person) = &item.provenance.person {
            attributes.insert("person".into(), s(person));
        }
        if let Some(expiry) = item.expires_at.as_deref().and_then(Instant::parse_rfc3339) {
            attributes.insert("expiresAt".into(), n(expiry.unix_millis() / 1000));
        }
        let cap = namespace_cap as u64;
        let mut recounted = false;
        loop {
            let created = self
                .client
                .transact_write_items()
                .transact_items(put(
                    &self.table,
                    attributes.clone(),
                    Some("attribute_not_exists(sk)"),
                )?)
                .transact_items(self.counter_move(
                    &memory_pk(tenant_id),
                    &counter_sk(&namespace),
                    "items",
                    1,
                    Some(cap),
                )?)
                .send()
                .await;
            let codes = match created {
                Ok(_) => return Ok(MemoryPut::Kept),
                Err(error) => match cancellation_codes(&error) {
                    Some(codes) => codes,
                    None => return Err(sdk_failure(error)),
                },
            };
            if codes.first().is_some_and(|code| conditional_failed(code)) {
                // The key is kept already: a new version, the count unmoved.
                let replaced = self
                    .client
                    .put_item()
                    .table_name(&self.table)
                    .set_item(Some(attributes.clone()))
                    .condition_expression("attribute_exists(sk)")
                    .send()
                    .await;
                match replaced {
                    Ok(_) => return Ok(MemoryPut::Kept),
                    Err(error)
                        if error.as_service_error().is_some_and(|service| {
                            service.is_conditional_check_failed_exception()
                        }) =>
                    {
                        // Deleted in between: create it again.
                        continue;
                    }
                    Err(error) => return Err(sdk_failure(error)),
                }
            }
            if codes.get(1).is_some_and(|code| conditional_failed(code)) {
                if recounted || self.recount_namespace(tenant_id, &namespace).await? >= cap {
                    return Ok(MemoryPut::NamespaceFull { cap: namespace_cap });
                }
                recounted = true;
                continue;
            }
            return Err(StoreError::Unavailable(format!(
                "the memory item's transaction was cancelled: {codes:?}"
            )));
        }
    }

    async fn get_memory(
        &self,
        tenant_id: &str,
        namespace: &[String],
        key: &str,
    ) -> Result<Option<MemoryItem>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(memory_pk(tenant_id)))
            .key("sk", s(item_sk(&namespace_key(namespace), key)))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_failure)?;
        output.item().map(decode).transpose()
    }

    async fn delete_memory(
        &self,
        tenant_id: &str,
        namespace: &[String],
        key: &str,
    ) -> Result<bool, StoreError> {
        let namespace = namespace_key(namespace);
        let delete = Delete::builder()
            .table_name(&self.table)
            .key("pk", s(memory_pk(tenant_id)))
            .key("sk", s(item_sk(&namespace, key)))
            .condition_expression("attribute_exists(sk)")
            .build()
            .map_err(unavailable)?;
        let deleted = self
            .client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().delete(delete).build())
            .transact_items(self.counter_move(
                &memory_pk(tenant_id),
                &counter_sk(&namespace),
                "items",
                -1,
                None,
            )?)
            .send()
            .await;
        match deleted {
            Ok(_) => Ok(true),
            Err(error) => match cancellation_codes(&error) {
                Some(codes) if codes.first().is_some_and(|code| conditional_failed(code)) => {
                    Ok(false)
                }
                _ => Err(sdk_failure(error)),
            },
        }
    }

    async fn list_memory(
        &self,
        tenant_id: &str,
        prefix: &[String],
        limit: usize,
    ) -> Result<Vec<MemoryItem>, StoreError> {
        let prefix = prefix.to_vec();
        self.memory_query(
            tenant_id,
            &format!("N#{}", namespace_key(&prefix)),
            limit,
            move |item| under_prefix(&item.namespace, &prefix),
        )
        .await
    }

    async fn namespace_memory(
        &self,
        tenant_id: &str,
        namespace: &[String],
        cap: usize,
    ) -> Result<Vec<MemoryItem>, StoreError> {
        self.memory_query(
            tenant_id,
            &format!("N#{}\u{1e}", namespace_key(namespace)),
            cap,
            |_| true,
        )
        .await
    }

    async fn delete_memory_under(
        &self,
        tenant_id: &str,
        prefix: &[String],
    ) -> Result<usize, StoreError> {
        let items = self.list_memory(tenant_id, prefix, usize::MAX).await?;
        self.delete_memory_items(tenant_id, &items).await
    }

    async fn delete_memory_of_person(
        &self,
        tenant_id: &str,
        person: &str,
    ) -> Result<usize, StoreError> {
        let person = person.to_string();
        let items = self
            .memory_query(tenant_id, "N#", usize::MAX, move |item| {
                item.provenance.person.as_deref() == Some(person.as_str())
            })
            .await?;
        self.delete_memory_items(tenant_id, &items).await
    }

    async fn remove_expired_memory(
        &self,
        _now_rfc3339: &str,
        _limit: usize,
    ) -> Result<usize, StoreError> {
        // DynamoDB's TTL deletes expired items (`expiresAt`); reads skip
        // them until it does.
        Ok(0)
    }
}
