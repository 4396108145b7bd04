//! A run's trace in the shell: choosing a new run's ids, continuing the
//! run's trace in each step's span, and stamping what a write makes durable
//! (frames get `traceId` and the writing span's `spanId`, step messages get
//! `traceparent`).
//!
//! Only the OpenTelemetry API is used here: with no OpenTelemetry layer
//! installed (traces not exported) a step's span has no OpenTelemetry
//! context, frames carry the run's trace id without a span id, and nothing
//! here allocates beyond the ids' text.
//!
//! Invariants:
//! - Every frame and step message written for a run that has a trace
//!   carries it: each write path stamps before it writes (`stamp_write`).
//! - A step's span is a child of its run's root span, whichever process or
//!   invocation runs it (the parent comes from the message, never from the
//!   process).

use baton_core::basics::trace_context::{RunTrace, SpanId, TraceId, TraceParent};
use baton_core::state::run::StepMessage;
use baton_core::wire::event::EventDraft;
use opentelemetry::trace::{SpanContext, TraceContextExt, TraceFlags, TraceState};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// A run that ended, as its root span says it: the root outlives every
/// process that ran a step of the run, so it is written once, by the
/// process whose commit ended the run, with the ids its steps hang under.
#[derive(Debug, Clone, PartialEq)]
pub struct EndedRun {
    pub trace: RunTrace,
    pub run_id: String,
    pub tenant_id: String,
    pub correlation_id: String,
    /// The run's workflow name (`TaskEnvelope::workflow_name`).
    pub workflow_name: String,
    /// `completed`, `failed`, `cancelled`, … (the run's status).
    pub status: String,
    /// The failure's code and message, when it failed.
    pub failure: Option<(String, String)>,
    pub started_at: baton_core::basics::instant::Instant,
    pub ended_at: baton_core::basics::instant::Instant,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: Option<f64>,
}

impl EndedRun {
    /// The run `state` ended by a commit whose frames are `frames`, when it
    /// has a trace and one of the frames ends it (`complete`, `error`: each
    /// is written once per run).
    pub fn of_commit(
        state: &baton_core::state::run::RunState,
        frames: &[EventDraft],
    ) -> Option<Self> {
        use baton_core::wire::event::EventType;
        let trace = state.trace?;
        let ending = frames
            .iter()
            .find(|frame| matches!(frame.event_type, EventType::Complete | EventType::Error))?;
        let ended_at = baton_core::basics::instant::Instant::parse_rfc3339(&ending.timestamp)
            .unwrap_or(state.updated_at);
        let usage = state.total_usage();
        Some(EndedRun {
            trace,
            run_id: state.run_id.clone(),
            tenant_id: state.tenant_id.clone(),
            correlation_id: state.correlation_id.clone(),
            workflow_name: state.envelope.workflow_name().to_string(),
            status: state.status().as_str().to_string(),
            failure: state
                .failure
                .as_ref()
                .map(|failure| (failure.code.as_str().to_string(), failure.message.clone())),
            started_at: state.created_at,
            ended_at,
            input_tokens: usage.prompt_tokens,
            output_tokens: usage.completion_tokens,
            cost_usd: state.total_cost_usd(),
        })
    }
}

/// Where a run's root span goes (an OpenTelemetry exporter; nowhere when
/// traces are not exported). Called after the commit that ended the run
/// is durable, at most once per run by that commit (a retried commit that
/// failed calls nothing).
pub trait RunSpanExporter: Send + Sync {
    fn run_ended(&self, run: &EndedRun);
}

/// A new run's trace: under the caller's span when it sent one.
pub fn new_run_trace(caller: Option<TraceParent>) -> RunTrace {
    let trace_id = uuid::Uuid::new_v4().as_u128();
    let root_span_id = uuid::Uuid::new_v4().as_u64_pair().0;
    RunTrace::new(caller, trace_id, root_span_id)
}

/// The current `tracing` span as an OpenTelemetry span, when it is
/// exported (nothing is looked up when nothing listens).
fn current_span_context() -> Option<TraceParent> {
    let current = tracing::Span::current();
    if current.is_disabled() {
        return None;
    }
    let context = current.context();
    let span = context.span();
    let span_context = span.span_context();
    span_context.is_valid().then(|| TraceParent {
        trace_id: TraceId(u128::from_be_bytes(span_context.trace_id().to_bytes())),
        span_id: SpanId(u64::from_be_bytes(span_context.span_id().to_bytes())),
        sampled: span_context.is_sampled(),
    })
}

/// The span of the current `tracing` span, when it is exported.
pub fn current_span_id() -> Option<SpanId> {
    current_span_context().map(|span| span.span_id)
}

/// The current span as a `traceparent` header value, when it is exported
/// (what an outgoing HTTP call forwards).
pub fn current_traceparent() -> Option<String> {
    current_span_context().map(|span| span.header_value())
}

/// An OpenTelemetry context whose parent is the remote span `parent` (a
/// step's run root; a run root's caller).
pub fn remote_parent(parent: TraceParent) -> opentelemetry::Context {
    let remote = SpanContext::new(
        opentelemetry::trace::TraceId::from_bytes(parent.trace_id.0.to_be_bytes()),
        opentelemetry::trace::SpanId::from_bytes(parent.span_id.0.to_be_bytes()),
        if parent.sampled {
            TraceFlags::SAMPLED
        } else {
            TraceFlags::default()
        },
        true,
        TraceState::default(),
    );
    opentelemetry::Context::new().with_remote_span_context(remote)
}

/// Makes `span` a child of the remote span `traceparent` names (a step
/// continuing its run's trace). A malformed value is ignored: a step is
/// never refused for its trace.
pub fn continue_trace(span: &tracing::Span, traceparent: Option<&str>) {
    if span.is_disabled() {
        // Nothing listens: no OpenTelemetry span to parent.
        return;
    }
    let Some(parent) = traceparent.and_then(|text| TraceParent::parse(text).ok()) else {
        return;
    };
    // Refused only when the span has no OpenTelemetry data (not exported).
    let _ = span.set_parent(remote_parent(parent));
}

/// Gives each of `frames` the run's trace id and the current span's id.
fn stamp_frames(trace_id: TraceId, frames: &mut [EventDraft]) {
    if frames.is_empty() {
        return;
    }
    let span_id = current_span_id();
    for frame in frames {
        frame.trace_id.get_or_insert(trace_id);
        if frame.span_id.is_none() {
            frame.span_id = span_id;
        }
    }
}

/// Stamps a write of a run whose trace is `trace`: each frame gets the
/// trace id and the current span's id, each step message its
/// `traceparent` (unless it has one).
pub fn stamp_write(
    trace: Option<&RunTrace>,
    frames: &mut [EventDraft],
    outbox: &mut [StepMessage],
) {
    let Some(trace) = trace else {
        return;
    };
    stamp_frames(trace.trace_id, frames);
    if !outbox.is_empty() {
        let traceparent = trace.step_traceparent();
        for message in outbox.iter_mut() {
            if message.traceparent.is_none() {
                message.traceparent = Some(traceparent.clone());
            }
        }
    }
}

/// `frames`, stamped for a run whose trace is `trace` (a write of frames
/// alone: streamed text, a warning beside a claim).
pub fn traced_frames(trace: Option<&RunTrace>, mut frames: Vec<EventDraft>) -> Vec<EventDraft> {
    stamp_write(trace, &mut frames, &mut []);
    frames
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::state::run::StepCommand;
    use baton_core::wire::event::EventType;

    #[test]
    fn without_an_exported_span_frames_get_the_trace_and_messages_the_root() {
        let trace = new_run_trace(None);
        let mut frames = vec![EventDraft::new(EventType::Start, "t", 0)];
        let mut outbox = vec![StepMessage::new("t", "r", StepCommand::Plan)];
        stamp_write(Some(&trace), &mut frames, &mut outbox);
        assert_eq!(frames[0].trace_id, Some(trace.trace_id));
        assert_eq!(frames[0].span_id, None);
        assert_eq!(
            outbox[0].traceparent.as_deref(),
            Some(trace.step_traceparent().as_str())
        );
        let mut untraced = vec![EventDraft::new(EventType::Start, "t", 0)];
        stamp_write(None, &mut untraced, &mut []);
        assert_eq!(untraced[0].trace_id, None);
    }
}
