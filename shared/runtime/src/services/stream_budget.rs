//! Open event streams, budgeted in the store: a stream takes a lease
//! ([`crate::ports::StreamLeases`]) before its first frame, renews it while
//! it is open and gives it back when it ends, so the per-run and per-tenant
//! caps hold across every process and Lambda instance sharing the store (a
//! count kept in one process never triggers where each request has its own
//! sandbox).
//!
//! Invariants: a stream refused takes nothing; a stream whose process dies
//! holds its lease at most [`STREAM_LEASE`] longer; an open stream's lease
//! never lapses while its process lives (renewed every third of it).

use std::sync::Arc;
use std::time::Duration;

use baton_core::basics::ids::RunKey;

use crate::error::RuntimeError;
use crate::ports::{Clock, IdGenerator, StreamCaps, StreamLeases, StreamOpening};

/// How long a stream's lease lasts without renewal.
pub const STREAM_LEASE: Duration = Duration::from_secs(60);

/// Takes, renews and gives back streams' leases.
pub struct StreamBudget {
    leases: Arc<dyn StreamLeases>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
}

/// An open stream's lease: renewed while held, given back when dropped.
pub struct StreamTicket {
    renewal: tokio::task::JoinHandle<()>,
    leases: Arc<dyn StreamLeases>,
    tenant_id: String,
    run_id: String,
    stream_id: String,
}

impl StreamBudget {
    pub fn new(
        leases: Arc<dyn StreamLeases>,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdGenerator>,
    ) -> Self {
        StreamBudget { leases, clock, ids }
    }

    /// A lease for a new stream of the run, or `TooManyStreams` naming the
    /// cap that is full (the run's first).
    pub async fn open(
        &self,
        tenant_id: &str,
        run_id: &str,
        caps: StreamCaps,
    ) -> Result<StreamTicket, RuntimeError> {
        let stream_id = self.ids.new_id("stream");
        let now = self.clock.now();
        let opening = self
            .leases
            .open_stream(
                RunKey::new(tenant_id, run_id),
                &stream_id,
                caps,
                now,
                now.plus(STREAM_LEASE),
            )
            .await?;
        let (scope, open, limit) = match opening {
            StreamOpening::Opened => {
                return Ok(self.ticket(tenant_id, run_id, stream_id));
            }
            StreamOpening::RunAtCap { open } => ("run", open, caps.per_run),
            StreamOpening::TenantAtCap { open } => ("tenant", open, caps.per_tenant),
        };
        Err(RuntimeError::TooManyStreams {
            run_id: run_id.to_string(),
            scope,
            open,
            limit,
        })
    }

    fn ticket(&self, tenant_id: &str, run_id: &str, stream_id: String) -> StreamTicket {
        let (leases, clock) = (self.leases.clone(), self.clock.clone());
        let (tenant, run, stream) = (tenant_id.to_string(), run_id.to_string(), stream_id.clone());
        let renewal = tokio::spawn(async move {
            loop {
                tokio::time::sleep(STREAM_LEASE / 3).await;
                let until = clock.now().plus(STREAM_LEASE);
                if let Err(error) = leases
                    .renew_stream(RunKey::new(&tenant, &run), &stream, until)
                    .await
                {
                    tracing::warn!(%error, run_id = %run, "a stream's lease could not be renewed; trying again");
                }
            }
        });
        StreamTicket {
            renewal,
            leases: self.leases.clone(),
            tenant_id: tenant_id.to_string(),
            run_id: run_id.to_string(),
            stream_id,
        }
    }
}

impl Drop for StreamTicket {
    fn drop(&mut self) {
        self.renewal.abort();
        let leases = self.leases.clone();
        let (tenant, run, stream) = (
            std::mem::take(&mut self.tenant_id),
            std::mem::take(&mut self.run_id),
            std::mem::take(&mut self.stream_id),
        );
        // Given back off the dropping thread; without a runtime (a process
        // ending) the lease expires by itself.
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                if let Err(error) = leases
                    .close_stream(RunKey::new(&tenant, &run), &stream)
                    .await
                {
                    tracing::warn!(%error, run_id = %run, "a stream's lease was not given back; it expires by itself");
                }
            });
        }
    }
}
