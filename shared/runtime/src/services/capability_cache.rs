//! A read-through cache in front of any [`CapabilityDirectory`]: each
//! tenant's registrations are listed from the store at most once per `ttl`
//! per process. A
//! registration made through this process replaces its tenant's entry at
//! once; one made elsewhere (another Lambda instance) is seen within `ttl`.
//! Liveness is unaffected: status is derived from the records' timestamps
//! at read time, not cached.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use baton_core::contracts::capability::RegisteredCapability;

use crate::error::StoreError;
use crate::ports::CapabilityDirectory;

type CachedListing = (Instant, Vec<RegisteredCapability>);

/// [`CapabilityDirectory`] decorator caching `list_registrations` per tenant.
pub struct CachingCapabilityDirectory {
    inner: Arc<dyn CapabilityDirectory>,
    ttl: Duration,
    listings: Mutex<HashMap<String, CachedListing>>,
}

impl CachingCapabilityDirectory {
    pub fn new(inner: Arc<dyn CapabilityDirectory>, ttl: Duration) -> Self {
        CachingCapabilityDirectory {
            inner,
            ttl,
            listings: Mutex::new(HashMap::new()),
        }
    }

    fn forget(&self, tenant_id: &str) {
        if let Ok(mut listings) = self.listings.lock() {
            listings.remove(tenant_id);
        }
    }
}

#[async_trait]
impl CapabilityDirectory for CachingCapabilityDirectory {
    async fn upsert_registration(
        &self,
        tenant_id: &str,
        record: RegisteredCapability,
    ) -> Result<RegisteredCapability, StoreError> {
        let stored = self.inner.upsert_registration(tenant_id, record).await;
        self.forget(tenant_id);
        stored
    }

    async fn renew_heartbeat(
        &self,
        tenant_id: &str,
        capability_id: &str,
        seen_at_millis: u64,
    ) -> Result<Option<RegisteredCapability>, StoreError> {
        let renewed = self
            .inner
            .renew_heartbeat(tenant_id, capability_id, seen_at_millis)
            .await;
        self.forget(tenant_id);
        renewed
    }

    async fn deregister(&self, tenant_id: &str, capability_id: &str) -> Result<bool, StoreError> {
        let removed = self.inner.deregister(tenant_id, capability_id).await;
        self.forget(tenant_id);
        removed
    }

    async fn list_registrations(
        &self,
        tenant_id: &str,
    ) -> Result<Vec<RegisteredCapability>, StoreError> {
        let fresh = self.listings.lock().ok().and_then(|listings| {
            listings
                .get(tenant_id)
                .filter(|(fetched_at, _)| fetched_at.elapsed() < self.ttl)
                .map(|(_, records)| records.clone())
        });
        if let Some(records) = fresh {
            return Ok(records);
        }
        let records = self.inner.list_registrations(tenant_id).await?;
        if let Ok(mut listings) = self.listings.lock() {
            listings.insert(tenant_id.to_string(), (Instant::now(), records.clone()));
        }
        Ok(records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::InMemoryCapabilityDirectory;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts the listings that reach the store behind the cache.
    struct CountingDirectory {
        inner: InMemoryCapabilityDirectory,
        listings: AtomicUsize,
    }

    #[async_trait]
    impl CapabilityDirectory for CountingDirectory {
        async fn upsert_registration(
            &self,
            tenant_id: &str,
            record: RegisteredCapability,
        ) -> Result<RegisteredCapability, StoreError> {
            self.inner.upsert_registration(tenant_id, record).await
        }

        async fn list_registrations(
            &self,
            tenant_id: &str,
        ) -> Result<Vec<RegisteredCapability>, StoreError> {
            self.listings.fetch_add(1, Ordering::SeqCst);
            self.inner.list_registrations(tenant_id).await
        }

        async fn renew_heartbeat(
            &self,
            tenant_id: &str,
            capability_id: &str,
            seen_at_millis: u64,
        ) -> Result<Option<RegisteredCapability>, StoreError> {
            self.inner
                .renew_heartbeat(tenant_id, capability_id, seen_at_millis)
                .await
        }

        async fn deregister(
            &self,
            tenant_id: &str,
            capability_id: &str,
        ) -> Result<bool, StoreError> {
            self.inner.deregister(tenant_id, capability_id).await
        }
    }

    #[tokio::test]
    async fn listings_reach_the_store_once_per_ttl_and_after_a_local_registration() {
        let counting = Arc::new(CountingDirectory {
            inner: InMemoryCapabilityDirectory::new(),
            listings: AtomicUsize::new(0),
        });
        let cached = CachingCapabilityDirectory::new(counting.clone(), Duration::from_millis(200));
        for _ in 0..3 {
            assert_eq!(cached.list_registrations("t").await.map(|r| r.len()), Ok(0));
        }
        assert_eq!(counting.listings.load(Ordering::SeqCst), 1);
        let registration = serde_json::from_value(serde_json::json!({
            "capabilityId": "writer.x", "agentType": "ai", "version": "1",
            "displayName": "x", "summary": "x", "inputContract": [], "outputContract": ["out"]
        }))
        .unwrap_or_else(|error| unreachable!("{error}"));
        let record = RegisteredCapability {
            registration,
            registered_at_millis: 1,
            last_seen_at_millis: 1,
        };
        assert!(cached.upsert_registration("t", record).await.is_ok());
        assert_eq!(cached.list_registrations("t").await.map(|r| r.len()), Ok(1));
        assert_eq!(counting.listings.load(Ordering::SeqCst), 2);
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(cached.list_registrations("t").await.map(|r| r.len()), Ok(1));
        assert_eq!(
            counting.listings.load(Ordering::SeqCst),
            3,
            "the ttl expired"
        );
    }
}
