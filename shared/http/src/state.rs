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
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            heartbeat: Duration::from_secs(15),
            poll_interval: Duration::from_millis(100),
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
