//! What every route shares: the services it calls (never a store), the HTTP
//! layer's tunables, and the query of the SSE routes.

use std::sync::Arc;
use std::time::Duration;

use baton_runtime::services::{CapabilityService, PeopleService, RunService};

use crate::auth::TokenAuthenticator;
use crate::auth::cross_site::TrustedOrigins;
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
    /// Event streams one run may have open at once, counted in the store
    /// across every process (`BATON_MAX_STREAMS_PER_RUN`); one more is a 429
    /// `too_many_streams`.
    pub max_streams_per_run: usize,
    /// Event streams one tenant may have open at once, counted likewise
    /// (`BATON_MAX_STREAMS_PER_TENANT`).
    pub max_streams_per_tenant: usize,
    /// The URL clients reach the API at (`BATON_PUBLIC_URL`), for the A2A
    /// agent card; None: the request's own URL or Host (never a forwarded one).
    pub public_url: Option<String>,
    /// The page origins (besides this server's own) allowed to send
    /// state-changing requests (`BATON_ALLOWED_ORIGINS`), and the hosts an
    /// anonymous server answers to (`crate::auth::cross_site`).
    pub trusted_origins: TrustedOrigins,
    /// The API origins the served viewer may talk to besides its own page's
    /// (`BATON_VIEWER_API_ORIGINS`): its `?api=` is honoured only for them,
    /// and its `connect-src` names only them.
    pub viewer_api_origins: Vec<String>,
    /// The developer sandbox's routes (`BATON_SANDBOX=on`): the registry's
    /// metadata and the envelope builder; off, they answer 404.
    pub sandbox: bool,
}

/// The default cap on one run's open event streams.
pub const DEFAULT_MAX_STREAMS_PER_RUN: usize = 64;

/// The default cap on one tenant's open event streams.
pub const DEFAULT_MAX_STREAMS_PER_TENANT: usize = 200;

/// The default request body limit: 1 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            heartbeat: Duration::from_secs(15),
            poll_interval: Duration::from_millis(100),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_streams_per_run: DEFAULT_MAX_STREAMS_PER_RUN,
            max_streams_per_tenant: DEFAULT_MAX_STREAMS_PER_TENANT,
            public_url: None,
            trusted_origins: TrustedOrigins::default(),
            viewer_api_origins: Vec::new(),
            sandbox: false,
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
    /// Open event streams, budgeted in the store
    /// (`HttpSettings::max_streams_per_run`, `max_streams_per_tenant`).
    pub streams: Arc<baton_runtime::services::StreamBudget>,
    /// Schedules: kept, fired, paused.
    pub schedules: Arc<baton_runtime::services::ScheduleService>,
    /// The audit trail: every state-changing request, append-only.
    pub audit: Arc<baton_runtime::services::AuditTrail>,
    /// Requests made once by their idempotency key (chat, fork, answers,
    /// schedule creation).
    pub request_keys: Arc<baton_runtime::services::RequestKeyService>,
    /// The tenants' memory across runs.
    pub memory: Arc<baton_runtime::services::memory::MemoryService>,
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

/// Which run a stream follows, for its lease in the tenant's stream budget.
pub(crate) enum StreamOf<'a> {
    /// A run that exists: counted against the run's cap and the tenant's.
    Run(&'a str),
    /// A run the request is about to start (`run.stream`, chat, A2A
    /// `SendStreamingMessage`, MCP's `start_run`): the lease is taken
    /// before the run is, so a refused stream starts nothing. Counted
    /// against the tenant's cap only (under one shared key per tenant).
    RunNotStartedYet,
}

/// The key streams of runs not started yet are counted under.
const STREAMS_OF_RUNS_STARTING: &str = "~starting";

impl ApiState {
    /// The one opening of every streaming route and protocol method: a
    /// lease in the tenant's stream budget, or `TooManyStreams` (429, with
    /// `Retry-After`, naming the cap). Hold the ticket as long as the
    /// stream lives ([`held_while`]).
    pub(crate) async fn open_stream(
        &self,
        tenant_id: &str,
        of: StreamOf<'_>,
    ) -> Result<baton_runtime::services::StreamTicket, baton_runtime::error::RuntimeError> {
        let per_tenant = self.settings.max_streams_per_tenant;
        let (run_id, per_run) = match of {
            StreamOf::Run(run_id) => (run_id, self.settings.max_streams_per_run),
            StreamOf::RunNotStartedYet => (STREAMS_OF_RUNS_STARTING, per_tenant),
        };
        self.streams
            .open(
                tenant_id,
                run_id,
                baton_runtime::ports::StreamCaps {
                    per_run,
                    per_tenant,
                },
            )
            .await
    }
}

/// `items`, holding `ticket` until the stream ends or is dropped (the
/// client went away): the lease is given back then.
pub(crate) fn held_while<S: futures_util::Stream + Send + 'static>(
    items: S,
    ticket: baton_runtime::services::StreamTicket,
) -> impl futures_util::Stream<Item = S::Item> + Send + 'static {
    use futures_util::StreamExt;
    items.map(move |item| {
        let _held = &ticket;
        item
    })
}
