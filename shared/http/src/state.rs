//! What every route shares: the services it calls (never a store), the HTTP
//! layer's tunables, and the query of the SSE routes.

use std::sync::Arc;
use std::time::Duration;

use baton_runtime::services::{CapabilityService, HumanService, RunService};

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
}

/// The default request body limit: 1 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            heartbeat: Duration::from_secs(15),
            poll_interval: Duration::from_millis(100),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        }
    }
}

/// Shared state of every route: the services it calls, never a store.
#[derive(Clone)]
pub struct ApiState {
    pub runs: Arc<RunService>,
    pub capabilities: Arc<CapabilityService>,
    pub humans: Arc<HumanService>,
    pub authenticator: Arc<TokenAuthenticator>,
    pub settings: HttpSettings,
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
