//! Baton's OpenTelemetry export. Owns the tracer provider (OTLP over
//! HTTP/protobuf, batched), configured only by the standard `OTEL_*`
//! variables the SDK reads itself (`OTEL_EXPORTER_OTLP_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_HEADERS`,
//! `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`,
//! `OTEL_BSP_*`); the `tracing` layer that turns Baton's existing `tracing`
//! spans into OpenTelemetry spans (no second instrumentation); and each
//! run's root span, written when the run ends with the ids its steps were
//! parented to ([`baton_runtime::observe::run_traces`]).
//!
//! It never decides whether traces are exported (the functions' config
//! does, from the same variables) and never reads the environment itself.
//!
//! Invariants:
//! - Off costs nothing: when traces are not exported this crate is not
//!   called, no layer is installed and no span is built.
//! - A run's root span has exactly the ids the run chose when it was
//!   created (`RunTrace`): the id generator hands them out for that one
//!   span, on the thread building it, and random ids to every other span.

use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use baton_core::basics::trace_context::TraceParent;
use baton_runtime::observe::run_traces::{EndedRun, RunSpanExporter};
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer, TracerProvider as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator, SdkTracer, SdkTracerProvider};

/// The instrumentation scope of every Baton span.
pub const INSTRUMENTATION_SCOPE: &str = "baton";

/// Why export could not start.
#[derive(Debug, thiserror::Error)]
pub enum TracesError {
    #[error("the OTLP trace exporter could not be built: {0}")]
    Exporter(String),
}

impl TracesError {
    /// Start-up configuration: never worth retrying.
    pub fn is_retryable(&self) -> bool {
        false
    }
}

thread_local! {
    /// The ids the next span built on this thread takes (a run's root).
    static CHOSEN_SPAN_ID: Cell<Option<u64>> = const { Cell::new(None) };
    static CHOSEN_TRACE_ID: Cell<Option<u128>> = const { Cell::new(None) };
}

/// Random ids, except for the one span a run's root is built as.
#[derive(Debug, Default)]
struct RunRootIds {
    random: RandomIdGenerator,
}

impl IdGenerator for RunRootIds {
    fn new_trace_id(&self) -> opentelemetry::trace::TraceId {
        match CHOSEN_TRACE_ID.with(Cell::take) {
            Some(id) => opentelemetry::trace::TraceId::from_bytes(id.to_be_bytes()),
            None => self.random.new_trace_id(),
        }
    }

    fn new_span_id(&self) -> opentelemetry::trace::SpanId {
        match CHOSEN_SPAN_ID.with(Cell::take) {
            Some(id) => opentelemetry::trace::SpanId::from_bytes(id.to_be_bytes()),
            None => self.random.new_span_id(),
        }
    }
}

/// What the functions' config decided.
#[derive(Debug, Clone, Default)]
pub struct TraceExportSettings {
    /// The service name when `OTEL_SERVICE_NAME` is not set (the SDK reads
    /// it when it is): `baton`, `baton-step`, …
    pub default_service_name: Option<String>,
    /// Resource attributes Baton adds (the process id: two processes of one
    /// run are told apart).
    pub process_id: u32,
}

/// The running export. Clone-free: hold it for the process's life, flush
/// it before a Lambda invocation returns, shut it down on exit.
pub struct TraceExport {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
}

impl TraceExport {
    /// Starts the OTLP exporter (its endpoint, headers and timeout from the
    /// standard variables) behind a batch processor.
    pub fn start(settings: &TraceExportSettings) -> Result<Self, TracesError> {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .build()
            .map_err(|error| TracesError::Exporter(error.to_string()))?;
        let mut resource = Resource::builder()
            .with_attribute(KeyValue::new("process.pid", i64::from(settings.process_id)));
        if let Some(name) = &settings.default_service_name {
            resource = resource.with_service_name(name.clone());
        }
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_id_generator(RunRootIds::default())
            .with_resource(resource.build())
            .build();
        Ok(Self::with_provider(provider))
    }

    /// Export through `provider` (a test's in-memory exporter, a bench's).
    /// Its id generator should be [`Self::id_generator`] for run roots to
    /// keep their chosen ids.
    pub fn with_provider(provider: SdkTracerProvider) -> Self {
        let tracer = provider.tracer(INSTRUMENTATION_SCOPE);
        TraceExport { provider, tracer }
    }

    /// The id generator a provider built elsewhere needs.
    pub fn id_generator() -> impl IdGenerator + 'static {
        RunRootIds::default()
    }

    /// The `tracing` layer: every `tracing` span becomes an OpenTelemetry
    /// span of this provider.
    pub fn layer<S>(&self) -> impl tracing_subscriber::Layer<S> + 'static
    where
        S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    {
        tracing_opentelemetry::layer().with_tracer(self.tracer.clone())
    }

    /// Where runs' root spans go.
    pub fn run_spans(&self) -> Arc<dyn RunSpanExporter> {
        Arc::new(RootSpans {
            tracer: self.tracer.clone(),
        })
    }

    /// Sends every finished span now (a Lambda invocation ends: the
    /// execution environment may be frozen right after). Blocking: call it
    /// off the async workers.
    pub fn flush(&self) {
        if let Err(error) = self.provider.force_flush() {
            tracing::warn!(%error, "could not flush spans");
        }
    }

    /// Flushes and stops the exporter (the process ends).
    pub fn shutdown(&self) {
        if let Err(error) = self.provider.shutdown_with_timeout(Duration::from_secs(5)) {
            tracing::warn!(%error, "could not shut the span exporter down");
        }
    }
}

struct RootSpans {
    tracer: SdkTracer,
}

fn system_time(instant: baton_core::basics::instant::Instant) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(instant.unix_millis())
}

impl RunSpanExporter for RootSpans {
    fn run_ended(&self, run: &EndedRun) {
        let trace = run.trace;
        let parent = match trace.caller_span_id {
            Some(caller) => baton_runtime::observe::run_traces::remote_parent(TraceParent {
                trace_id: trace.trace_id,
                span_id: caller,
                sampled: trace.sampled,
            }),
            None => Context::new(),
        };
        let mut attributes = vec![
            KeyValue::new("baton.run_id", run.run_id.clone()),
            KeyValue::new("baton.tenant_id", run.tenant_id.clone()),
            KeyValue::new("baton.correlation_id", run.correlation_id.clone()),
            KeyValue::new("baton.workflow_name", run.workflow_name.clone()),
            KeyValue::new("baton.run.status", run.status.clone()),
            KeyValue::new(
                "gen_ai.usage.input_tokens",
                i64::try_from(run.input_tokens).unwrap_or(i64::MAX),
            ),
            KeyValue::new(
                "gen_ai.usage.output_tokens",
                i64::try_from(run.output_tokens).unwrap_or(i64::MAX),
            ),
        ];
        if let Some(cost) = run.cost_usd {
            attributes.push(KeyValue::new("baton.cost_usd", cost));
        }
        if let Some((code, _)) = &run.failure {
            attributes.push(KeyValue::new("error.type", code.clone()));
        }
        // The span takes the run's chosen ids (this thread, this build).
        CHOSEN_SPAN_ID.with(|chosen| chosen.set(Some(trace.root_span_id.0)));
        CHOSEN_TRACE_ID.with(|chosen| chosen.set(Some(trace.trace_id.0)));
        let span = self
            .tracer
            .span_builder("run")
            .with_kind(SpanKind::Internal)
            .with_start_time(system_time(run.started_at))
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &parent);
        CHOSEN_SPAN_ID.with(|chosen| chosen.set(None));
        CHOSEN_TRACE_ID.with(|chosen| chosen.set(None));
        let context = Context::new().with_span(span);
        let span = context.span();
        if let Some((code, message)) = &run.failure {
            span.set_status(Status::error(format!("{code}: {message}")));
        } else if run.status == "completed" {
            span.set_status(Status::Ok);
        }
        span.end_with_timestamp(system_time(run.ended_at));
    }
}
