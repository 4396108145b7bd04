//! The one typed configuration. Every environment variable Baton reads is
//! read through a [`VariableReader`]: in production [`process_environment`]
//! (the only place that touches the process environment), in tests any
//! closure. `docs/configuration.md`'s table lists each variable; a test
//! keeps the two in step.

use std::path::PathBuf;
use std::time::Duration;

use baton_core::engine::PlannerChoice;

use crate::StartupError;

mod identity;
mod integrations;
mod secrets;

pub use integrations::{SchedulerConfiguration, TraceExportConfiguration};

pub use identity::OidcConfiguration;
use identity::origin_list;
pub use secrets::{SecretSourceChoice, SecretsConfiguration};

/// Reads one variable by name.
pub type VariableReader<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process environment as a [`VariableReader`].
pub fn process_environment(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Everything the wiring needs that does not belong to one adapter (the
/// model providers read their own variables through the same reader).
#[derive(Debug, Clone, PartialEq)]
pub struct Configuration {
    /// `BATON_REGISTRY_DIR`: overrides the registry built into the binary.
    pub registry_dir: Option<PathBuf>,
    /// The user's data directory: `XDG_DATA_HOME`, else `HOME/.local/share`
    /// (where `--store sqlite` without a path keeps its file).
    pub data_home: Option<PathBuf>,
    /// `BATON_PLANNER`: `deterministic` (default) or `llm`.
    pub planner: PlannerChoice,
    /// `BATON_LLM_MODEL` (else `OPENAI_MODEL`): the default model on the
    /// deployment's endpoint, which joins the catalog when the deployment
    /// starts so every AI node names it (`crate::registry_for`).
    pub default_model: Option<String>,
    /// `BATON_API_TOKENS`: `tenant:sha256-hex[;user=…][;scopes=…][;groups=…],…`.
    pub api_tokens: Option<String>,
    /// `BATON_AUDIT_RETENTION_DAYS` (default 400): how long an audit record
    /// is kept.
    pub audit_retention_days: u32,
    /// `BATON_OIDC_*`: the identity provider whose JWTs the API accepts.
    pub oidc: Option<OidcConfiguration>,
    /// `BATON_SECRETS`, `BATON_SECRET_CACHE_SECONDS`: secrets by reference.
    pub secrets: SecretsConfiguration,
    /// `BATON_METRICS_TOKEN`: the SHA-256 hex digest of the token `baton
    /// serve`'s `/metrics` takes (its own, no tenant's).
    pub metrics_token: Option<String>,
    /// `BATON_API_TOKEN`: the bearer token `baton eval --api` sends (a
    /// client's token, not a digest).
    pub api_token: Option<String>,
    /// `BATON_TABLE`: the DynamoDB table.
    pub table: Option<String>,
    /// `BATON_QUEUE_URL`: the SQS step queue.
    pub queue_url: Option<String>,
    /// `BATON_DEAD_LETTER_QUEUE_URL`: the step queue's dead-letter queue,
    /// read by the sweeper to end the runs of dead-lettered steps.
    pub dead_letter_queue_url: Option<String>,
    /// `BATON_SWEEP_AFTER_SECONDS`: how long an unconsumed outbox entry is
    /// quiet (with no live lease in its run) before the sweeper re-drives
    /// it; twice as long after each re-send. Default two node leases
    /// (`BATON_NODE_LEASE_SECONDS`).
    pub sweep_after: Duration,
    /// `BATON_HUMAN_TASK_TIMEOUT_SECONDS`: a human task's SLA; unanswered
    /// after this, the run fails (or an `onTimeout` policy fires). Default 900.
    pub human_task_timeout: Duration,
    /// `BATON_DELTA_FLUSH_MILLIS`: how often a model's streamed text is
    /// appended to the event log while it answers (default 100); `off`
    /// keeps no deltas (each batch is one DynamoDB transaction in the cloud).
    pub delta_flush: DeltaFlush,
    /// `BATON_SESSION_MAX_SECONDS`: how long an agent session may last
    /// across its steps before its watchdog ends it incomplete.
    pub agent_session_limit: Duration,
    /// `BATON_OUTBOUND_HTTP_HOSTS`: hosts tools may reach over plain http
    /// (`host,host`; local development only; everything else is https).
    pub outbound_http_hosts: String,
    /// `BATON_WEBHOOK_SECRET`: signs every `callbackUrl` delivery
    /// (HMAC-SHA256); without it no webhook is sent.
    /// `BATON_EVENT_BUS`: announce runs that end or park on this
    /// EventBridge bus (name or ARN).
    pub event_bus: Option<String>,
    pub webhook_secret: Option<String>,
    /// Print CloudWatch EMF lines of the counters on stdout: inside Lambda
    /// (`AWS_LAMBDA_FUNCTION_NAME` is set) or when `BATON_EMF=1`.
    pub emit_emf: bool,
    /// `NO_COLOR` (any value): the CLI's pretty view prints no colours.
    pub no_color: bool,
    /// `BATON_LOG`: tracing filter.
    pub log_filter: Option<String>,
    /// Traces are exported over OTLP (HTTP/protobuf) when
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
    /// is set, unless `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`
    /// (the SDK reads the rest of the `OTEL_*` variables itself).
    pub traces: Option<TraceExportConfiguration>,
    /// `AWS_LAMBDA_LOG_STREAM_NAME`: unique per Lambda instance; scopes node claims.
    pub lambda_log_stream: Option<String>,
    /// `BATON_MAX_BODY_BYTES`: the largest request body the API reads
    /// (default 1 MiB; larger is a JSON 413 `body_too_large`).
    pub max_body_bytes: usize,
    /// `BATON_MAX_ENVELOPE_BYTES`: the largest envelope a run is submitted
    /// with, on every store (default 256 KiB; larger is a 413
    /// `envelope_too_large`, exit 2 in the CLI).
    pub max_envelope_bytes: usize,
    /// `BATON_WORKER_MAX_STEPS_IN_FLIGHT`: steps one `baton serve` worker
    /// keeps in flight at most (a memory cap; model calls are bounded by
    /// their provider's `maxConcurrentCalls`). Default 10,000.
    pub worker_max_steps_in_flight: usize,
    /// `BATON_TENANT_MAX_LIVE_RUNS`: runs at work (queued or running) a
    /// tenant may have at once; `BATON_TENANT_MAX_SUBMISSIONS_PER_MINUTE`:
    /// runs a tenant may submit in any 60 s. Each reads `20` (every
    /// tenant), `team-a:100` (one), or both comma-separated. Unset: no limit.
    pub tenant_limits: baton_runtime::services::TenantLimits,
    /// `BATON_RETENTION_DAYS`: days an ended run and everything of it is
    /// kept after it ends (default 30); a tenant's own in
    /// `registry/tenants.json`. A run that works or waits never expires.
    pub retention_days: u32,
    /// `BATON_MEMORY_MAX_ENDED_RUNS`: ended runs the in-memory store keeps
    /// at most (default 10,000), the earliest to expire dropped first.
    pub memory_max_ended_runs: usize,
    /// `BATON_NODE_LEASE_SECONDS`: how long a claimed node is protected from
    /// twin deliveries without a heartbeat (renewed every third of it), so
    /// how long a dead worker's node waits before another takes it over.
    /// Default 30 s.
    pub node_lease: Duration,
    /// `BATON_STEP_BUDGET_SECONDS`: how long one step of `baton serve` or
    /// `baton run` may take, as the step function's timeout bounds one in
    /// the cloud. Default 300 s.
    pub step_budget: Duration,
    /// `BATON_CAPABILITY_CACHE_SECONDS`: how long a warm process keeps a
    /// tenant's capability registrations before listing them from the
    /// store again (a registration or heartbeat through the same process
    /// is seen at once). Default 10 s.
    pub capability_cache: Duration,
    /// `BATON_CRASH_AT`: kill tests only (`after_commit[:N]`,
    /// `before_acknowledge[:N]`), armed by `baton serve`/`baton run`.
    pub crash_at: Option<String>,
    /// `BATON_MAX_STREAMS_PER_RUN`: event streams one run may have open at
    /// once in one process (default 64; one more is a 429 `too_many_streams`).
    pub max_streams_per_run: usize,
    /// `BATON_MAX_STREAMS_PER_TENANT`: event streams one tenant may have
    /// open at once, counted in the store across processes and Lambda
    /// instances (default 200; one more is a 429 `too_many_streams`).
    pub max_streams_per_tenant: usize,
    /// `BATON_MAX_SCHEDULES_PER_TENANT`: schedules one tenant may keep
    /// (default 100; one more is a 409 `schedule_limit`).
    pub max_schedules_per_tenant: usize,
    /// `BATON_MEMORY_NAMESPACE_CAP`: items one memory namespace holds at
    /// most (default 10,000; a new key past it is a 409
    /// `memory_namespace_full`). Search reads a namespace whole.
    pub memory_namespace_cap: usize,
    /// `BATON_SCHEDULER_TARGET_ARN`, `BATON_SCHEDULER_ROLE_ARN` and
    /// `BATON_SCHEDULE_GROUP` (default `default`): schedules are fired by
    /// EventBridge Scheduler into that target (the ingest queue), as that
    /// role. Both ARNs or neither.
    pub scheduler: Option<SchedulerConfiguration>,
    /// `BATON_PUBLIC_URL`: the URL clients reach the API at, for the A2A
    /// agent card (unset: the request's own host; never a forwarded one).
    pub public_url: Option<String>,
    /// `BATON_ALLOWED_ORIGINS`: page origins (`https://host[:port]`, comma
    /// or space separated) besides the server's own that may send
    /// state-changing requests (a viewer hosted elsewhere).
    pub allowed_origins: Vec<String>,
    /// `BATON_VIEWER_API_ORIGINS`: API origins the served viewer may call
    /// (and send its token to) besides its own, through `?api=`.
    pub viewer_api_origins: Vec<String>,
    /// `BATON_SANDBOX=on`: the API serves the developer sandbox (the
    /// registry's metadata and the envelope builder). Off by default.
    pub sandbox: bool,
    /// `BATON_HEADER_READ_TIMEOUT_SECONDS`: `baton serve` closes a
    /// connection whose request headers have not all arrived in this long
    /// (a silent or trickling client; an idle keep-alive connection). Default 30.
    pub header_read_timeout: Duration,
    /// `BATON_MAX_HEADER_BYTES`: the largest request head `baton serve`
    /// reads (at least 8 KiB); larger is a 431. Default 64 KiB.
    pub max_header_bytes: usize,
}

/// Whether and how often streamed model text reaches the event log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeltaFlush {
    Every(Duration),
    Off,
}

fn non_empty(read: VariableReader<'_>, name: &str) -> Option<String> {
    read(name)
        .map(|value| value.trim().to_string())
        .filter(|value| !value.is_empty())
}

/// The HTTP layer's default body limit, restated here so the configuration
/// does not need the HTTP crate (the CLI without `http` reads it too).
mod baton_http_defaults {
    pub const MAX_BODY_BYTES: usize = 1024 * 1024;
    pub const MAX_STREAMS_PER_RUN: usize = 64;
    pub const MAX_STREAMS_PER_TENANT: usize = 200;
}

/// A positive whole number (bytes, steps) from `name`, else `default`.
fn positive_whole_number(
    read: VariableReader<'_>,
    name: &str,
    default: usize,
) -> Result<usize, StartupError> {
    match non_empty(read, name) {
        None => Ok(default),
        Some(text) => match text.parse::<usize>() {
            Ok(bytes) if bytes > 0 => Ok(bytes),
            _ => Err(StartupError(format!(
                "{name} must be a positive whole number (got `{text}`)"
            ))),
        },
    }
}

impl Configuration {
    pub fn from_variables(read: VariableReader<'_>) -> Result<Self, StartupError> {
        let planner = match non_empty(read, "BATON_PLANNER").as_deref() {
            None | Some("deterministic") => PlannerChoice::Deterministic,
            Some("llm") => PlannerChoice::Llm,
            Some(other) => {
                return Err(StartupError(format!(
                    "BATON_PLANNER must be `deterministic` or `llm` (got `{other}`)"
                )));
            }
        };
        let human_task_timeout = match non_empty(read, "BATON_HUMAN_TASK_TIMEOUT_SECONDS") {
            None => baton_core::engine::DEFAULT_HUMAN_TASK_TIMEOUT,
            Some(text) => match text.parse::<u64>() {
                Ok(seconds) if seconds > 0 => Duration::from_secs(seconds),
                _ => {
                    return Err(StartupError(format!(
                        "BATON_HUMAN_TASK_TIMEOUT_SECONDS must be a positive number of seconds (got `{text}`)"
                    )));
                }
            },
        };
        let agent_session_limit = match non_empty(read, "BATON_SESSION_MAX_SECONDS") {
            None => baton_core::records::agents::DEFAULT_SESSION_LIMIT,
            Some(text) => match text.parse::<u64>() {
                Ok(seconds) if seconds > 0 => Duration::from_secs(seconds),
                _ => {
                    return Err(StartupError(format!(
                        "BATON_SESSION_MAX_SECONDS must be a positive number of seconds (got `{text}`)"
                    )));
                }
            },
        };
        let delta_flush = match non_empty(read, "BATON_DELTA_FLUSH_MILLIS").as_deref() {
            None => DeltaFlush::Every(Duration::from_millis(100)),
            Some("off") => DeltaFlush::Off,
            Some(text) => match text.parse::<u64>() {
                Ok(millis) if millis > 0 => DeltaFlush::Every(Duration::from_millis(millis)),
                _ => {
                    return Err(StartupError(format!(
                        "BATON_DELTA_FLUSH_MILLIS must be a positive number of milliseconds or `off` (got `{text}`)"
                    )));
                }
            },
        };
        let max_body_bytes = positive_whole_number(
            read,
            "BATON_MAX_BODY_BYTES",
            baton_http_defaults::MAX_BODY_BYTES,
        )?;
        let max_envelope_bytes = positive_whole_number(
            read,
            "BATON_MAX_ENVELOPE_BYTES",
            baton_runtime::services::DEFAULT_MAX_ENVELOPE_BYTES,
        )?;
        let worker_max_steps_in_flight = positive_whole_number(
            read,
            "BATON_WORKER_MAX_STEPS_IN_FLIGHT",
            baton_runtime::workers::DEFAULT_MAX_STEPS_IN_FLIGHT,
        )?;
        let per_tenant = |name: &str| match non_empty(read, name) {
            None => Ok(baton_runtime::services::PerTenantLimit::default()),
            Some(text) => baton_runtime::services::PerTenantLimit::parse(&text)
                .map_err(|problem| StartupError(format!("{name}: {problem}"))),
        };
        let tenant_limits = baton_runtime::services::TenantLimits {
            live_runs: per_tenant("BATON_TENANT_MAX_LIVE_RUNS")?,
            submissions_per_minute: per_tenant("BATON_TENANT_MAX_SUBMISSIONS_PER_MINUTE")?,
        };
        let capability_cache =
            Duration::from_secs(
                positive_whole_number(read, "BATON_CAPABILITY_CACHE_SECONDS", 10)? as u64,
            );
        let node_lease = Duration::from_secs(positive_whole_number(
            read,
            "BATON_NODE_LEASE_SECONDS",
            30,
        )? as u64);
        let sweep_after = match non_empty(read, "BATON_SWEEP_AFTER_SECONDS") {
            None => 2 * node_lease,
            Some(text) => Duration::from_secs(text.parse::<u64>().map_err(|_| {
                StartupError(format!(
                    "BATON_SWEEP_AFTER_SECONDS must be whole seconds (got `{text}`)"
                ))
            })?),
        };
        let step_budget = Duration::from_secs(positive_whole_number(
            read,
            "BATON_STEP_BUDGET_SECONDS",
            baton_runtime::services::DEFAULT_STEP_BUDGET.as_secs() as usize,
        )? as u64);
        let retention_days = u32::try_from(positive_whole_number(
            read,
            "BATON_RETENTION_DAYS",
            baton_runtime::services::DEFAULT_RETENTION_DAYS as usize,
        )?)
        .map_err(|_| StartupError("BATON_RETENTION_DAYS is too large".into()))?;
        let memory_max_ended_runs = positive_whole_number(
            read,
            "BATON_MEMORY_MAX_ENDED_RUNS",
            baton_runtime::memory::DEFAULT_ENDED_RUN_CAP,
        )?;
        Ok(Configuration {
            tenant_limits,
            retention_days,
            memory_max_ended_runs,
            node_lease,
            step_budget,
            capability_cache,
            crash_at: non_empty(read, "BATON_CRASH_AT"),
            header_read_timeout: Duration::from_secs(positive_whole_number(
                read,
                "BATON_HEADER_READ_TIMEOUT_SECONDS",
                30,
            )? as u64),
            max_header_bytes: positive_whole_number(read, "BATON_MAX_HEADER_BYTES", 64 * 1024)?,
            max_streams_per_run: positive_whole_number(
                read,
                "BATON_MAX_STREAMS_PER_RUN",
                baton_http_defaults::MAX_STREAMS_PER_RUN,
            )?,
            max_streams_per_tenant: positive_whole_number(
                read,
                "BATON_MAX_STREAMS_PER_TENANT",
                baton_http_defaults::MAX_STREAMS_PER_TENANT,
            )?,
            max_schedules_per_tenant: positive_whole_number(
                read,
                "BATON_MAX_SCHEDULES_PER_TENANT",
                baton_runtime::services::DEFAULT_MAX_SCHEDULES_PER_TENANT,
            )?,
            memory_namespace_cap: positive_whole_number(
                read,
                "BATON_MEMORY_NAMESPACE_CAP",
                baton_runtime::services::memory::DEFAULT_NAMESPACE_CAP,
            )?,
            scheduler: SchedulerConfiguration::from_variables(read)?,
            public_url: non_empty(read, "BATON_PUBLIC_URL")
                .map(|url| url.trim_end_matches('/').to_string()),
            allowed_origins: origin_list(read, "BATON_ALLOWED_ORIGINS")?,
            viewer_api_origins: origin_list(read, "BATON_VIEWER_API_ORIGINS")?,
            sandbox: integrations::on_off(read, "BATON_SANDBOX")?,
            worker_max_steps_in_flight,
            max_body_bytes,
            max_envelope_bytes,
            delta_flush,
            registry_dir: non_empty(read, "BATON_REGISTRY_DIR").map(PathBuf::from),
            data_home: non_empty(read, "XDG_DATA_HOME")
                .map(PathBuf::from)
                .or_else(|| {
                    non_empty(read, "HOME").map(|home| PathBuf::from(home).join(".local/share"))
                }),
            planner,
            default_model: non_empty(read, "BATON_LLM_MODEL")
                .or_else(|| non_empty(read, "OPENAI_MODEL")),
            api_tokens: non_empty(read, "BATON_API_TOKENS"),
            oidc: OidcConfiguration::from_variables(read)?,
            secrets: SecretsConfiguration::from_variables(read)?,
            audit_retention_days: u32::try_from(positive_whole_number(
                read,
                "BATON_AUDIT_RETENTION_DAYS",
                400,
            )?)
            .unwrap_or(u32::MAX),
            metrics_token: non_empty(read, "BATON_METRICS_TOKEN")
                .map(|digest| digest.trim().to_ascii_lowercase()),
            api_token: non_empty(read, "BATON_API_TOKEN"),
            table: non_empty(read, "BATON_TABLE"),
            queue_url: non_empty(read, "BATON_QUEUE_URL"),
            dead_letter_queue_url: non_empty(read, "BATON_DEAD_LETTER_QUEUE_URL"),
            sweep_after,
            human_task_timeout,
            agent_session_limit,
            outbound_http_hosts: non_empty(read, "BATON_OUTBOUND_HTTP_HOSTS").unwrap_or_default(),
            webhook_secret: non_empty(read, "BATON_WEBHOOK_SECRET"),
            event_bus: non_empty(read, "BATON_EVENT_BUS"),
            emit_emf: non_empty(read, "AWS_LAMBDA_FUNCTION_NAME").is_some()
                || non_empty(read, "BATON_EMF").as_deref() == Some("1"),
            no_color: non_empty(read, "NO_COLOR").is_some(),
            log_filter: non_empty(read, "BATON_LOG"),
            traces: TraceExportConfiguration::from_variables(read)?,
            lambda_log_stream: non_empty(read, "AWS_LAMBDA_LOG_STREAM_NAME"),
        })
    }

    /// Every tenant's retention (`BATON_RETENTION_DAYS`); the registry's
    /// per-tenant days are laid over it where the registry is read.
    pub fn retention(&self) -> baton_runtime::services::RunRetention {
        baton_runtime::services::RunRetention {
            every_tenant_days: self.retention_days,
            by_tenant_days: std::collections::BTreeMap::new(),
        }
    }

    /// The process's worker id: the Lambda instance's log stream, else `fallback`.
    pub fn worker_id(&self, fallback: &str) -> String {
        self.lambda_log_stream
            .clone()
            .unwrap_or_else(|| fallback.to_string())
    }

    pub(crate) fn required<'a>(
        value: &'a Option<String>,
        name: &str,
        purpose: &str,
    ) -> Result<&'a str, StartupError> {
        value
            .as_deref()
            .ok_or_else(|| StartupError(format!("{name} is not set: {purpose}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| value.to_string())
        }
    }

    #[test]
    fn defaults_values_and_errors() {
        let defaults = Configuration::from_variables(&reader(&[])).unwrap();
        assert_eq!(defaults.planner, PlannerChoice::Deterministic);
        assert_eq!(
            defaults.sweep_after,
            Duration::from_secs(60),
            "two node leases"
        );
        assert_eq!(defaults.human_task_timeout, Duration::from_secs(900));
        assert_eq!(defaults.agent_session_limit, Duration::from_secs(90));
        assert_eq!(defaults.worker_id("step"), "step");
        let set = Configuration::from_variables(&reader(&[
            ("BATON_PLANNER", "llm"),
            ("BATON_SWEEP_AFTER_SECONDS", "5"),
            ("BATON_HUMAN_TASK_TIMEOUT_SECONDS", "60"),
            ("BATON_SESSION_MAX_SECONDS", "30"),
            ("BATON_OUTBOUND_HTTP_HOSTS", "localhost"),
            ("BATON_TABLE", " runs "),
            ("AWS_LAMBDA_LOG_STREAM_NAME", "2026/11/22/[$LATEST]abc"),
        ]))
        .unwrap();
        assert_eq!(set.planner, PlannerChoice::Llm);
        assert_eq!(set.sweep_after, Duration::from_secs(5));
        assert_eq!(set.human_task_timeout, Duration::from_secs(60));
        assert_eq!(set.agent_session_limit, Duration::from_secs(30));
        assert_eq!(set.outbound_http_hosts, "localhost");
        assert_eq!(set.table.as_deref(), Some("runs"));
        assert_eq!(set.worker_id("step"), "2026/11/22/[$LATEST]abc");
        for (name, value, named) in [
            ("BATON_PLANNER", "clever", "BATON_PLANNER"),
            (
                "BATON_SWEEP_AFTER_SECONDS",
                "1m",
                "BATON_SWEEP_AFTER_SECONDS",
            ),
            (
                "BATON_HUMAN_TASK_TIMEOUT_SECONDS",
                "0",
                "BATON_HUMAN_TASK_TIMEOUT_SECONDS",
            ),
            (
                "BATON_SESSION_MAX_SECONDS",
                "soon",
                "BATON_SESSION_MAX_SECONDS",
            ),
        ] {
            let pairs: &'static [(&'static str, &'static str)] =
                Box::leak(vec![(name, value)].into_boxed_slice());
            let error = Configuration::from_variables(&reader(pairs)).unwrap_err();
            assert!(error.0.contains(named), "{error}");
        }
    }

    #[test]
    fn the_capability_cache_keeps_registrations_as_long_as_it_is_told() {
        let read = |pairs| Configuration::from_variables(&reader(pairs));
        assert_eq!(read(&[]).unwrap().capability_cache, Duration::from_secs(10));
        assert_eq!(
            read(&[("BATON_CAPABILITY_CACHE_SECONDS", "3")])
                .unwrap()
                .capability_cache,
            Duration::from_secs(3)
        );
        let refused = read(&[("BATON_CAPABILITY_CACHE_SECONDS", "0")]).unwrap_err();
        assert!(
            refused.0.contains("BATON_CAPABILITY_CACHE_SECONDS"),
            "{}",
            refused.0
        );
    }

    #[test]
    fn delta_flush_is_a_period_or_off() {
        assert_eq!(
            Configuration::from_variables(&reader(&[]))
                .unwrap()
                .delta_flush,
            DeltaFlush::Every(Duration::from_millis(100))
        );
        assert_eq!(
            Configuration::from_variables(&reader(&[("BATON_DELTA_FLUSH_MILLIS", "1000")]))
                .unwrap()
                .delta_flush,
            DeltaFlush::Every(Duration::from_secs(1))
        );
        assert_eq!(
            Configuration::from_variables(&reader(&[("BATON_DELTA_FLUSH_MILLIS", "off")]))
                .unwrap()
                .delta_flush,
            DeltaFlush::Off
        );
        for wrong in ["0", "soon"] {
            let pairs: &'static [(&'static str, &'static str)] = match wrong {
                "0" => &[("BATON_DELTA_FLUSH_MILLIS", "0")],
                _ => &[("BATON_DELTA_FLUSH_MILLIS", "soon")],
            };
            let error = Configuration::from_variables(&reader(pairs)).unwrap_err();
            assert!(error.0.contains("BATON_DELTA_FLUSH_MILLIS"), "{error:?}");
        }
    }

    #[test]
    fn traces_are_exported_when_an_otlp_endpoint_is_set_and_not_disabled() {
        const ENDPOINT: (&str, &str) = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
        let traces = |pairs: &'static [(&'static str, &'static str)]| {
            Configuration::from_variables(&reader(pairs)).map(|configuration| configuration.traces)
        };
        assert_eq!(traces(&[]).unwrap(), None, "off by default");
        assert_eq!(
            traces(&[ENDPOINT]).unwrap(),
            Some(TraceExportConfiguration {
                service_name_set: false
            })
        );
        assert_eq!(
            traces(&[
                (
                    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                    "http://collector/v1/traces"
                ),
                ("OTEL_SERVICE_NAME", "orchestrator"),
            ])
            .unwrap(),
            Some(TraceExportConfiguration {
                service_name_set: true
            })
        );
        assert_eq!(
            traces(&[ENDPOINT, ("OTEL_SDK_DISABLED", "true")]).unwrap(),
            None
        );
        assert_eq!(
            traces(&[ENDPOINT, ("OTEL_TRACES_EXPORTER", "none")]).unwrap(),
            None
        );
        assert!(traces(&[ENDPOINT, ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")]).is_ok());
        let refused = traces(&[ENDPOINT, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]).unwrap_err();
        assert!(
            refused.0.contains("OTEL_EXPORTER_OTLP_PROTOCOL"),
            "{refused:?}"
        );
        assert!(refused.0.contains("http/protobuf"), "{refused:?}");
    }
}
