//! What every route shares: the services it calls (never a store), the HTTP
//! layer's tunables, and the query of the SSE routes.

use std::sync::Arc;
use std::time::Duration;

use baton_runtime::services::{CapabilityService, PeopleService, RunService};

use crate::auth::TokenAuthenticator;
use crate::error::ApiError;
use crate::sse::Dialect;

/// Tunables of the HTTP layer.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// SSE comment heartbeat interval.
    pub heartbeat: Duration,
    /// How often a followed stream polls the store for new frames.
    pub poll_interval: Duration,
    /// The largest request body read (`BATON_MAX_BODY_BYTES`); a larger one
    /// is a JSON 413 `body_too_large` naming the limit.
    pub max_body_bytes: usize,
    /// Event streams one run may have open at once in this process
    /// (`BATON_MAX_STREAMS_PER_RUN`); one more is a 429 `too_many_streams`.
    pub max_streams_per_run: usize,
    /// The URL clients reach the API at (`BATON_PUBLIC_URL`), for the A2A
    /// agent card; None: the request's forwarded or direct host.
    pub public_url: Option<String>,
}

/// The default cap on one run's open event streams.
pub const DEFAULT_MAX_STREAMS_PER_RUN: usize = 64;

/// The event streams open per run in this process: a slot is taken when a
/// stream opens and given back when it ends (its [`StreamSlot`] dropped).
#[derive(Debug, Clone, Default)]
pub struct StreamSlots {
    open: Arc<std::sync::Mutex<std::collections::HashMap<(String, String), usize>>>,
}

/// One open event stream's slot; given back when dropped.
#[derive(Debug)]
pub struct StreamSlot {
    slots: StreamSlots,
    key: (String, String),
}

impl StreamSlots {
    /// Takes a slot for a stream of `run_id`, or says how many are open
    /// when `limit` are.
    pub fn take(&self, tenant_id: &str, run_id: &str, limit: usize) -> Result<StreamSlot, usize> {
        let key = (tenant_id.to_string(), run_id.to_string());
        let mut open = self
            .open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let count = open.entry(key.clone()).or_default();
        if *count >= limit {
            return Err(*count);
        }
        *count += 1;
        Ok(StreamSlot {
            slots: self.clone(),
            key,
        })
    }

    /// Streams of `run_id` open now.
    pub fn open_for(&self, tenant_id: &str, run_id: &str) -> usize {
        let open = self
            .open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        open.get(&(tenant_id.to_string(), run_id.to_string()))
            .copied()
            .unwrap_or(0)
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self
            .slots
            .open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(count) = open.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.key);
            }
        }
    }
}

/// The default request body limit: 1 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            heartbeat: Duration::from_secs(15),
            poll_interval: Duration::from_millis(100),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_streams_per_run: DEFAULT_MAX_STREAMS_PER_RUN,
            public_url: None,
        }
    }
}

/// Shared state of every route: the services it calls, never a store.
#[derive(Clone)]
pub struct ApiState {
    pub runs: Arc<RunService>,
    pub capabilities: Arc<CapabilityService>,
    pub people: Arc<PeopleService>,
    pub authenticator: Arc<TokenAuthenticator>,
    pub settings: HttpSettings,
    /// The event streams open per run (`HttpSettings::max_streams_per_run`).
    pub streams: StreamSlots,
}

/// `?dialect=frames|hooks` of the SSE routes.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct StreamQuery {
    dialect: Option<String>,
}

impl StreamQuery {
    pub(crate) fn dialect(&self) -> Result<Dialect, ApiError> {
        Dialect::parse(self.dialect.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::StreamSlots;

    #[test]
    fn a_slot_is_given_back_when_its_stream_ends() {
        let slots = StreamSlots::default();
        let first = slots.take("t", "run", 2).unwrap();
        let second = slots.take("t", "run", 2).unwrap();
        assert_eq!(slots.take("t", "run", 2).unwrap_err(), 2);
        assert!(
            slots.take("t", "other-run", 2).is_ok(),
            "runs are counted apart"
        );
        assert!(
            slots.take("other-tenant", "run", 2).is_ok(),
            "tenants are counted apart"
        );
        drop(first);
        assert_eq!(slots.open_for("t", "run"), 1);
        let third = slots.take("t", "run", 2).unwrap();
        drop((second, third));
        assert_eq!(slots.open_for("t", "run"), 0);
    }
}
