//! Where a tenant's memory is kept (`baton_memory`'s items): put by
//! namespace and key, read, listed under a namespace prefix, a namespace
//! read whole for search (up to its cap), and deleted one by one, under a
//! prefix, or all of one person's. Expiry is the service's to apply on
//! reads; retention removes expired items where a store has no TTL of its
//! own ([`MemoryStore::remove_expired_memory`]).

use async_trait::async_trait;
use baton_memory::item::MemoryItem;

use crate::error::StoreError;

/// What a put did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryPut {
    /// Kept (a new item, or a new version of one).
    Kept,
    /// Refused: the namespace holds `cap` items and this key is new.
    NamespaceFull { cap: usize },
}

/// A tenant's memory items.
#[async_trait]
pub trait MemoryStore: Send + Sync {
    /// Keeps `item` under its namespace and key (replacing what was
    /// there), unless its key is new and its namespace holds
    /// `namespace_cap` items already.
    async fn put_memory(
        &self,
        tenant_id: &str,
        item: &MemoryItem,
        namespace_cap: usize,
    ) -> Result<MemoryPut, StoreError>;
    /// The item, if kept.
    async fn get_memory(
        &self,
        tenant_id: &str,
        namespace: &[String],
        key: &str,
    ) -> Result<Option<MemoryItem>, StoreError>;
    /// Deletes the item; whether it was there.
    async fn delete_memory(
        &self,
        tenant_id: &str,
        namespace: &[String],
        key: &str,
    ) -> Result<bool, StoreError>;
    /// The items of `prefix` and the namespaces under it, by namespace then
    /// key, at most `limit`.
    async fn list_memory(
        &self,
        tenant_id: &str,
        prefix: &[String],
        limit: usize,
    ) -> Result<Vec<MemoryItem>, StoreError>;
    /// The items of `namespace` itself (not those under it), at most
    /// `cap`: what search ranks.
    async fn namespace_memory(
        &self,
        tenant_id: &str,
        namespace: &[String],
        cap: usize,
    ) -> Result<Vec<MemoryItem>, StoreError>;
    /// Deletes every item of `prefix` and the namespaces under it (an empty
    /// prefix: the tenant's whole memory); how many.
    async fn delete_memory_under(
        &self,
        tenant_id: &str,
        prefix: &[String],
    ) -> Result<usize, StoreError>;
    /// Deletes every item `person` wrote (their provenance names them); how
    /// many.
    async fn delete_memory_of_person(
        &self,
        tenant_id: &str,
        person: &str,
    ) -> Result<usize, StoreError>;
    /// Removes up to `limit` items of any tenant whose expiry (RFC 3339) is
    /// before `now_rfc3339`; how many. A store whose items expire by
    /// themselves (DynamoDB's TTL) answers 0.
    async fn remove_expired_memory(
        &self,
        now_rfc3339: &str,
        limit: usize,
    ) -> Result<usize, StoreError>;
}
