//! Registrations in memory: the embedded default's capability directory.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use baton_core::contracts::capability::RegisteredCapability;

use crate::error::StoreError;
use crate::ports::CapabilityDirectory;

/// Each tenant's registrations by capability id.
type ByTenant = BTreeMap<String, BTreeMap<String, RegisteredCapability>>;

/// In-memory [`CapabilityDirectory`]: the embedded default's registrations.
#[derive(Default)]
pub struct InMemoryCapabilityDirectory {
    by_tenant: Mutex<ByTenant>,
}

impl InMemoryCapabilityDirectory {
    pub fn new() -> Self {
        Self::default()
    }

    fn locked(&self) -> Result<std::sync::MutexGuard<'_, ByTenant>, StoreError> {
        self.by_tenant
            .lock()
            .map_err(|_| StoreError::Unavailable("capability directory lock poisoned".into()))
    }
}

#[async_trait]
impl CapabilityDirectory for InMemoryCapabilityDirectory {
    async fn upsert_registration(
        &self,
        tenant_id: &str,
        mut record: RegisteredCapability,
    ) -> Result<RegisteredCapability, StoreError> {
        let mut by_tenant = self
            .by_tenant
            .lock()
            .map_err(|_| StoreError::Unavailable("capability directory lock poisoned".into()))?;
        let registrations = by_tenant.entry(tenant_id.to_string()).or_default();
        if let Some(existing) = registrations.get(&record.registration.capability_id) {
            record.registered_at_millis = existing.registered_at_millis;
        }
        registrations.insert(record.registration.capability_id.clone(), record.clone());
        Ok(record)
    }

    async fn list_registrations(
        &self,
        tenant_id: &str,
    ) -> Result<Vec<RegisteredCapability>, StoreError> {
        let by_tenant = self
            .by_tenant
            .lock()
            .map_err(|_| StoreError::Unavailable("capability directory lock poisoned".into()))?;
        Ok(by_tenant
            .get(tenant_id)
            .map(|registrations| registrations.values().cloned().collect())
            .unwrap_or_default())
    }

    async fn renew_heartbeat(
        &self,
        tenant_id: &str,
        capability_id: &str,
        seen_at_millis: u64,
    ) -> Result<Option<RegisteredCapability>, StoreError> {
        let mut by_tenant = self.locked()?;
        let record = by_tenant
            .get_mut(tenant_id)
            .and_then(|registrations| registrations.get_mut(capability_id));
        Ok(record.map(|record| {
            record.last_seen_at_millis = seen_at_millis;
            record.clone()
        }))
    }

    async fn deregister(&self, tenant_id: &str, capability_id: &str) -> Result<bool, StoreError> {
        let mut by_tenant = self.locked()?;
        Ok(by_tenant
            .get_mut(tenant_id)
            .is_some_and(|registrations| registrations.remove(capability_id).is_some()))
    }
}
