//! The one error enum of `baton-runtime`.

use baton_core::CoreError;
use baton_core::basics::codes::FailureCode;
use thiserror::Error;

/// Failures of a port adapter.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum StoreError {
    /// The run's version moved since it was read (a parallel commit won).
    #[error("version conflict: expected {expected}")]
    VersionConflict { expected: u64 },
    #[error("run not found")]
    RunNotFound,
    #[error("store unavailable: {0}")]
    Unavailable(String),
    #[error("stored record is corrupt: {0}")]
    Corrupt(String),
    /// The record does not fit the store's item size limit.
    #[error("record too large for the store: {0}")]
    TooLarge(String),
    /// A service the store stands on refused the request for good (access
    /// denied, a resource missing, a request it calls invalid): asking
    /// again will not help until the deployment is fixed.
    #[error("refused: {0}")]
    Refused(String),
}

impl StoreError {
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            StoreError::VersionConflict { .. } | StoreError::Unavailable(_)
        )
    }
}

#[derive(Debug, Error, Clone, PartialEq)]
pub enum QueueError {
    #[error("queue unavailable: {0}")]
    Unavailable(String),
    /// A message over the queue's size limit (SQS: 1 MiB): sending it
    /// again cannot help.
    #[error("step message too large for the queue: {0}")]
    TooLarge(String),
    /// The queue's service refused the request for good (access denied, a
    /// queue missing): asking again will not help.
    #[error("queue refused: {0}")]
    Refused(String),
}

impl QueueError {
    pub fn is_retryable(&self) -> bool {
        matches!(self, QueueError::Unavailable(_))
    }
}

/// Why a transcript publisher did not take a publication. Retryable: the
/// step that concluded the panel is retried and publishes again.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum PublishError {
    /// The ledger could not be reached or did not confirm in time: the
    /// step is retried.
    #[error("transcript ledger unavailable: {0}")]
    Unavailable(String),
    /// The ledger refused the transcript (a wrong key, an account without
    /// funds, a message too large): retrying changes nothing until the
    /// deployment's settings do.
    #[error("transcript ledger refused the transcript: {0}")]
    Refused(String),
}

impl PublishError {
    pub fn is_retryable(&self) -> bool {
        matches!(self, PublishError::Unavailable(_))
    }
}

/// Why a completion notification was not delivered (the engine retries it
/// later through the queue, then gives up keeping the last error).
#[derive(Debug, Error, Clone, PartialEq)]
pub enum DeliveryError {
    /// This process has no way to deliver it (no webhook client, no bus).
    #[error("{0}")]
    NotConfigured(String),
    /// The notification could not be encoded.
    #[error("the notification cannot be encoded: {0}")]
    Encoding(String),
    /// The event bus did not take it.
    #[error("{0}")]
    EventBus(String),
    /// The callback URL was refused by the outbound guard, unreachable, or
    /// answered with a refusal.
    #[error("{0}")]
    Webhook(String),
}

/// Why a remote agent's card (A2A) was refused: the registration naming it
/// is refused with this, at `$.remoteAgent.cardUrl`.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum CardRefused {
    /// This process reaches no remote agents.
    #[error("this process cannot reach remote agents, so the card at {0} was not checked")]
    NotReachableFromHere(String),
    /// The outbound guard refused the URL, or the card could not be fetched.
    #[error("{0}")]
    Unreachable(String),
    /// The card's server answered with this HTTP status.
    #[error("the card answered HTTP {0}")]
    Status(u16),
    /// The card was fetched but is not an A2A 1.0 card with a JSON-RPC
    /// interface (the reason names what is missing).
    #[error("{0}")]
    NotA2a(String),
}

impl CardRefused {
    /// Whether reading the card again may succeed (the agent was down, or
    /// its server failed), as opposed to a card that is wrong.
    pub fn is_retryable(&self) -> bool {
        match self {
            CardRefused::Unreachable(_) => true,
            CardRefused::Status(status) => *status == 429 || *status >= 500,
            CardRefused::NotReachableFromHere(_) | CardRefused::NotA2a(_) => false,
        }
    }
}

/// What a model provider reports when it gives up.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum LlmError {
    #[error("provider configuration: {0}")]
    Configuration(String),
    #[error("provider rate-limited the request after {attempts} attempts")]
    RateLimited { attempts: u32 },
    #[error("provider failed with HTTP {status} after {attempts} attempts: {body}")]
    ServerError {
        status: u16,
        attempts: u32,
        body: String,
    },
    #[error("provider rejected the request with HTTP {status}: {body}")]
    RequestRejected { status: u16, body: String },
    #[error("provider timed out after {attempts} attempts")]
    Timeout { attempts: u32 },
    #[error("provider transport error after {attempts} attempts: {message}")]
    Transport { attempts: u32, message: String },
    #[error("provider answered in an unexpected shape: {0}")]
    UnexpectedResponse(String),
    /// The error of a catalog model's provider, naming both.
    #[error("{provider} (model `{model}`): {source}")]
    Named {
        provider: String,
        model: String,
        source: Box<LlmError>,
    },
}

impl LlmError {
    /// Stable code for `node_error.payload.code`.
    pub fn code(&self) -> FailureCode {
        match self {
            LlmError::Configuration(_) => FailureCode::LlmConfiguration,
            LlmError::RateLimited { .. } => FailureCode::LlmRateLimited,
            LlmError::ServerError { .. } => FailureCode::LlmServerError,
            LlmError::RequestRejected { .. } => FailureCode::LlmRequestRejected,
            LlmError::Timeout { .. } => FailureCode::LlmTimeout,
            LlmError::Transport { .. } => FailureCode::LlmTransport,
            LlmError::UnexpectedResponse(_) => FailureCode::LlmUnexpectedResponse,
            LlmError::Named { source, .. } => source.code(),
        }
    }

    /// Whether the same request may succeed later (the provider already
    /// retried with backoff before returning it).
    pub fn is_retryable(&self) -> bool {
        match self {
            LlmError::Named { source, .. } => source.is_retryable(),
            other => matches!(
                other,
                LlmError::RateLimited { .. }
                    | LlmError::ServerError { .. }
                    | LlmError::Timeout { .. }
                    | LlmError::Transport { .. }
            ),
        }
    }
}

#[derive(Debug, Error)]
pub enum RuntimeError {
    /// The caller's input is wrong; `path` names where. Maps to HTTP 400/422.
    #[error("invalid input at {path}: {message}")]
    InvalidInput { path: String, message: String },
    /// The tenant has as many runs at work as its limit allows. HTTP 429.
    /// The run (`scope` "run") or the tenant ("tenant") has its cap of
    /// open event streams. HTTP 429 `too_many_streams`.
    #[error(
        "{open} event streams are open for this {scope}, its limit ({limit}); close one or retry later"
    )]
    TooManyStreams {
        run_id: String,
        scope: &'static str,
        open: usize,
        limit: usize,
    },
    #[error(
        "tenant `{tenant_id}` has {live} runs at work, its limit (BATON_TENANT_MAX_LIVE_RUNS); retry when one ends"
    )]
    TenantLimit {
        tenant_id: String,
        live: usize,
        limit: usize,
    },
    /// The tenant submitted as many runs in the last minute as its limit
    /// allows. HTTP 429 with `Retry-After`.
    #[error(
        "tenant `{tenant_id}` submitted {submitted} runs in the last 60 s, its limit (BATON_TENANT_MAX_SUBMISSIONS_PER_MINUTE); retry in {retry_after_seconds} s"
    )]
    TenantRateLimit {
        tenant_id: String,
        submitted: usize,
        limit: usize,
        retry_after_seconds: u64,
    },
    /// The caller's input is larger than the deployment takes. HTTP 413.
    #[error("{path}: the {what} is {size} bytes, over the limit of {limit}")]
    TooLarge {
        path: String,
        size: usize,
        limit: usize,
        what: String,
    },
    /// A capability registration is malformed or does not fit the facet
    /// catalog; `path` names where. Maps to HTTP 400/422.
    #[error("invalid registration at {path}: {message}")]
    InvalidRegistration { path: String, message: String },
    /// A registration clashes with a capability it may not replace. HTTP 409.
    #[error("capability `{capability_id}`: {message}")]
    RegistrationConflict {
        capability_id: String,
        message: String,
    },
    #[error("registry: {0}")]
    Registry(CoreError),
    #[error(transparent)]
    Core(#[from] CoreError),
    #[error("run store: {0}")]
    Store(#[from] StoreError),
    #[error("step queue: {0}")]
    Queue(#[from] QueueError),
    #[error("model provider: {0}")]
    Llm(#[from] LlmError),
    #[error("i/o on {path}: {message}")]
    Io { path: String, message: String },
    /// The invocation's time ran out before the step could finish; its claim
    /// was released and the message should be redelivered soon.
    #[error(
        "the step ran out of invocation time ({remaining_millis} ms left, {needed_millis} ms kept for the commit)"
    )]
    DeadlineExceeded {
        remaining_millis: u64,
        needed_millis: u64,
    },
    /// The step panicked (a bug): not retried, its run ends `step_failed`
    /// naming the panic, rather than waiting on a message no worker can
    /// finish.
    #[error("the step panicked: {message}")]
    StepPanicked { message: String },
    /// The queue's redrive policy moved the step's message to the
    /// dead-letter queue: each of its deliveries ended without an outcome
    /// (the worker holding it stopped: out of memory, killed, timed out).
    /// Read from the dead-letter queue, its run ends `step_failed`.
    #[error(
        "its message was dead-lettered after {receives} deliveries, each of which stopped before the step finished"
    )]
    DeadLettered { receives: u32 },
    /// The transcript publisher failed; the step is retried (nothing was
    /// committed).
    #[error("transcript publisher: {0}")]
    TranscriptPublisher(#[from] PublishError),
    /// A chat message names a thread the tenant does not have. HTTP 404.
    #[error("no thread `{0}`")]
    ThreadNotFound(String),
    /// A chat message on a thread still answering another, refused by its
    /// `multitaskStrategy` (`reject`), or with the thread's queue full
    /// (`enqueue`). HTTP 409 naming the run.
    #[error("thread `{thread_id}` is still answering in run `{active_run_id}`: {why}")]
    ThreadBusy {
        thread_id: String,
        active_run_id: String,
        why: String,
    },
    /// A field names a run the tenant does not have (`path` says which).
    /// HTTP 404.
    #[error("{path}: no run `{run_id}`")]
    RunNotFound { path: String, run_id: String },
    /// A schedule request is wrong; `path` names where. HTTP 422.
    #[error("invalid schedule at {path}: {message}")]
    InvalidSchedule { path: String, message: String },
    /// The tenant has no schedule of that id. HTTP 404.
    #[error("no schedule `{0}`")]
    ScheduleNotFound(String),
    /// The tenant has no registration of that capability id (a registry
    /// file's capability is not a registration). HTTP 404.
    #[error("no registered capability `{0}` (register it with POST /capabilities/register)")]
    CapabilityNotRegistered(String),
    /// The tenant keeps as many schedules as its limit allows. HTTP 409.
    #[error(
        "tenant `{tenant_id}` keeps {count} schedules, its limit (BATON_MAX_SCHEDULES_PER_TENANT); delete one first"
    )]
    ScheduleLimit {
        tenant_id: String,
        count: usize,
        limit: usize,
    },
    /// An idempotency key used before with a different request. HTTP 422.
    #[error(
        "idempotency key `{key}` was used with a different request; use a new key for a new request"
    )]
    IdempotencyKeyReused { key: String, path: String },
    /// The request its idempotency key names is still being made. HTTP 409,
    /// retryable: the retry gets its answer.
    #[error("a request with idempotency key `{key}` is still in flight; retry to get its answer")]
    RequestInFlight { key: String },
}

impl RuntimeError {
    pub fn is_retryable(&self) -> bool {
        match self {
            RuntimeError::Store(error) => error.is_retryable(),
            RuntimeError::Queue(error) => error.is_retryable(),
            RuntimeError::Llm(error) => error.is_retryable(),
            RuntimeError::TranscriptPublisher(error) => error.is_retryable(),
            RuntimeError::DeadlineExceeded { .. } | RuntimeError::RequestInFlight { .. } => true,
            RuntimeError::InvalidInput { .. }
            | RuntimeError::TooLarge { .. }
            | RuntimeError::TenantLimit { .. }
            | RuntimeError::TooManyStreams { .. }
            | RuntimeError::TenantRateLimit { .. }
            | RuntimeError::InvalidRegistration { .. }
            | RuntimeError::RegistrationConflict { .. }
            | RuntimeError::Registry(_)
            | RuntimeError::Core(_)
            | RuntimeError::Io { .. }
            | RuntimeError::StepPanicked { .. }
            | RuntimeError::DeadLettered { .. }
            | RuntimeError::ThreadNotFound(_)
            | RuntimeError::ThreadBusy { .. }
            | RuntimeError::RunNotFound { .. }
            | RuntimeError::InvalidSchedule { .. }
            | RuntimeError::ScheduleNotFound(_)
            | RuntimeError::CapabilityNotRegistered(_)
            | RuntimeError::ScheduleLimit { .. }
            | RuntimeError::IdempotencyKeyReused { .. } => false,
        }
    }
}
