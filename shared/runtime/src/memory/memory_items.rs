//! The in-memory memory store (the embedded default): items live as long
//! as the process, ordered by (tenant, namespace, key).

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use baton_memory::item::{MemoryItem, namespace_key, under_prefix};

use crate::error::StoreError;
use crate::ports::{MemoryPut, MemoryStore};

/// Items by (tenant, namespace key, key).
#[derive(Default)]
pub struct InMemoryMemoryStore {
    items: Mutex<BTreeMap<(String, String, String), MemoryItem>>,
}

fn poisoned() -> StoreError {
    StoreError::Unavailable("the in-memory memory store is poisoned".into())
}

fn address(tenant_id: &str, namespace: &[String], key: &str) -> (String, String, String) {
    (
        tenant_id.to_string(),
        namespace_key(namespace),
        key.to_string(),
    )
}

#[async_trait]
impl MemoryStore for InMemoryMemoryStore {
    async fn put_memory(
        &self,
        tenant_id: &str,
        item: &MemoryItem,
        namespace_cap: usize,
    ) -> Result<MemoryPut, StoreError> {
        let mut items = self.items.lock().map_err(|_| poisoned())?;
        let address = address(tenant_id, &item.namespace, &item.key);
        if !items.contains_key(&address) {
            let held = items
                .iter()
                .filter(|((tenant, namespace, _), _)| {
                    tenant == tenant_id && *namespace == address.1
                })
                .count();
            if held >= namespace_cap {
                return Ok(MemoryPut::NamespaceFull { cap: namespace_cap });
            }
        }
        items.insert(address, item.clone());
        Ok(MemoryPut::Kept)
    }

    async fn get_memory(
        &self,
        tenant_id: &str,
        namespace: &[String],
        key: &str,
    ) -> Result<Option<MemoryItem>, StoreError> {
        let items = self.items.lock().map_err(|_| poisoned())?;
        Ok(items.get(&address(tenant_id, namespace, key)).cloned())
    }

    async fn delete_memory(
        &self,
        tenant_id: &str,
        namespace: &[String],
        key: &str,
    ) -> Result<bool, StoreError> {
        let mut items = self.items.lock().map_err(|_| poisoned())?;
        Ok(items.remove(&address(tenant_id, namespace, key)).is_some())
    }

    async fn list_memory(
        &self,
        tenant_id: &str,
        prefix: &[String],
        limit: usize,
    ) -> Result<Vec<MemoryItem>, StoreError> {
        let items = self.items.lock().map_err(|_| poisoned())?;
        Ok(items
            .iter()
            .filter(|((tenant, _, _), item)| {
                tenant == tenant_id && under_prefix(&item.namespace, prefix)
            })
            .map(|(_, item)| item.clone())
            .take(limit)
            .collect())
    }

    async fn namespace_memory(
        &self,
        tenant_id: &str,
        namespace: &[String],
        cap: usize,
    ) -> Result<Vec<MemoryItem>, StoreError> {
        let items = self.items.lock().map_err(|_| poisoned())?;
        let wanted = namespace_key(namespace);
        Ok(items
            .iter()
            .filter(|((tenant, kept, _), _)| tenant == tenant_id && *kept == wanted)
            .map(|(_, item)| item.clone())
            .take(cap)
            .collect())
    }

    async fn delete_memory_under(
        &self,
        tenant_id: &str,
        prefix: &[String],
    ) -> Result<usize, StoreError> {
        let mut items = self.items.lock().map_err(|_| poisoned())?;
        let before = items.len();
        items.retain(|(tenant, _, _), item| {
            !(tenant == tenant_id && under_prefix(&item.namespace, prefix))
        });
        Ok(before - items.len())
    }

    async fn delete_memory_of_person(
        &self,
        tenant_id: &str,
        person: &str,
    ) -> Result<usize, StoreError> {
        let mut items = self.items.lock().map_err(|_| poisoned())?;
        let before = items.len();
        items.retain(|(tenant, _, _), item| {
            !(tenant == tenant_id && item.provenance.person.as_deref() == Some(person))
        });
        Ok(before - items.len())
    }

    async fn remove_expired_memory(
        &self,
        now_rfc3339: &str,
        limit: usize,
    ) -> Result<usize, StoreError> {
        let mut items = self.items.lock().map_err(|_| poisoned())?;
        let expired: Vec<_> = items
            .iter()
            .filter(|(_, item)| {
                item.expires_at
                    .as_deref()
                    .is_some_and(|expiry| crate::services::memory::expired(expiry, now_rfc3339))
            })
            .map(|(address, _)| address.clone())
            .take(limit)
            .collect();
        for address in &expired {
            items.remove(address);
        }
        Ok(expired.len())
    }
}
