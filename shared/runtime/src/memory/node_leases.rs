//! Node leases in memory: a claim takes a free, expired or its own lease
//! and appends the claim's frames under the store's one lock.

use async_trait::async_trait;
use baton_core::basics::ids::RunKey;
use baton_core::basics::instant::Instant;
use baton_core::wire::event::EventDraft;

use super::{InMemoryRunStore, Lease, poisoned};
use crate::error::StoreError;
use crate::ports::{ClaimOutcome, NodeClaim, NodeLeases};

#[async_trait]
impl NodeLeases for InMemoryRunStore {
    async fn claim_node(
        &self,
        key: RunKey<'_>,
        claim: NodeClaim<'_>,
        events_on_claim: Vec<EventDraft>,
    ) -> Result<ClaimOutcome, StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        let mut tables = self.tables.lock().map_err(|_| poisoned())?;
        let record = tables.run_mut(tenant_id, run_id)?;
        if record.state.status().is_terminal() {
            // No node_start after the terminal frame: the step finds the run
            // settled when it looks again.
            return Ok(ClaimOutcome::HeldByOther {
                lease_expires_at: claim.now,
            });
        }
        let key = (claim.claim_key.to_string(), claim.attempt);
        if let Some(lease) = record.leases.get(&key)
            && lease.worker_id != claim.worker_id
            && lease.expires_at_millis > claim.now.unix_millis()
        {
            return Ok(ClaimOutcome::HeldByOther {
                lease_expires_at: Instant::from_unix_millis(lease.expires_at_millis),
            });
        }
        record.append(&events_on_claim);
        record.leases.insert(
            key,
            Lease {
                worker_id: claim.worker_id.to_string(),
                expires_at_millis: claim.lease_expires_at.unix_millis(),
            },
        );
        drop(tables);
        self.event_appended.notify_waiters();
        Ok(ClaimOutcome::Claimed)
    }

    async fn run_holds_live_lease(
        &self,
        key: RunKey<'_>,
        now: Instant,
    ) -> Result<bool, StoreError> {
        let tables = self.tables.lock().map_err(|_| poisoned())?;
        let Some(record) = tables
            .runs
            .get(key.tenant_id())
            .and_then(|runs| runs.get(key.run_id()))
        else {
            return Ok(false);
        };
        Ok(record
            .leases
            .values()
            .any(|lease| lease.expires_at_millis > now.unix_millis()))
    }

    async fn renew_claim(&self, key: RunKey<'_>, claim: NodeClaim<'_>) -> Result<bool, StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        let mut tables = self.tables.lock().map_err(|_| poisoned())?;
        let record = tables.run_mut(tenant_id, run_id)?;
        let key = (claim.claim_key.to_string(), claim.attempt);
        match record.leases.get_mut(&key) {
            Some(lease) if lease.worker_id == claim.worker_id => {
                lease.expires_at_millis = claim.lease_expires_at.unix_millis();
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn release_claim(
        &self,
        key: RunKey<'_>,
        node_id: &str,
        attempt: u32,
        claimant: &str,
    ) -> Result<(), StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        let mut tables = self.tables.lock().map_err(|_| poisoned())?;
        let record = tables.run_mut(tenant_id, run_id)?;
        let key = (node_id.to_string(), attempt);
        if record
            .leases
            .get(&key)
            .is_some_and(|lease| lease.worker_id == claimant)
        {
            record.leases.remove(&key);
        }
        Ok(())
    }
}
