//! Stream leases in memory: one process's open streams, counted under one
//! lock (the count and the lease are one step).

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use baton_core::basics::ids::RunKey;
use baton_core::basics::instant::Instant;

use crate::error::StoreError;
use crate::ports::{StreamCaps, StreamLeases, StreamOpening};

/// `(tenant, run, stream)` → lease end (Unix ms).
#[derive(Default)]
pub struct InMemoryStreamLeases {
    leases: Mutex<BTreeMap<(String, String, String), u64>>,
}

impl InMemoryStreamLeases {
    pub fn new() -> Self {
        Self::default()
    }
}

fn poisoned() -> StoreError {
    StoreError::Unavailable("stream leases lock poisoned".into())
}

#[async_trait]
impl StreamLeases for InMemoryStreamLeases {
    async fn open_stream(
        &self,
        key: RunKey<'_>,
        stream_id: &str,
        caps: StreamCaps,
        now: Instant,
        until: Instant,
    ) -> Result<StreamOpening, StoreError> {
        let mut leases = self.leases.lock().map_err(|_| poisoned())?;
        let now_millis = now.unix_millis();
        leases.retain(|_, expires| *expires > now_millis);
        let of_tenant = leases
            .keys()
            .filter(|(tenant, _, _)| tenant == key.tenant_id())
            .count();
        let of_run = leases
            .keys()
            .filter(|(tenant, run, _)| tenant == key.tenant_id() && run == key.run_id())
            .count();
        if of_run >= caps.per_run {
            return Ok(StreamOpening::RunAtCap { open: of_run });
        }
        if of_tenant >= caps.per_tenant {
            return Ok(StreamOpening::TenantAtCap { open: of_tenant });
        }
        leases.insert(
            (
                key.tenant_id().to_string(),
                key.run_id().to_string(),
                stream_id.to_string(),
            ),
            until.unix_millis(),
        );
        Ok(StreamOpening::Opened)
    }

    async fn renew_stream(
        &self,
        key: RunKey<'_>,
        stream_id: &str,
        until: Instant,
    ) -> Result<(), StoreError> {
        let mut leases = self.leases.lock().map_err(|_| poisoned())?;
        if let Some(expires) = leases.get_mut(&(
            key.tenant_id().to_string(),
            key.run_id().to_string(),
            stream_id.to_string(),
        )) {
            *expires = until.unix_millis();
        }
        Ok(())
    }

    async fn close_stream(&self, key: RunKey<'_>, stream_id: &str) -> Result<(), StoreError> {
        let mut leases = self.leases.lock().map_err(|_| poisoned())?;
        leases.remove(&(
            key.tenant_id().to_string(),
            key.run_id().to_string(),
            stream_id.to_string(),
        ));
        Ok(())
    }
}
