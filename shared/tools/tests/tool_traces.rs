//! With spans exported (an OpenTelemetry layer over an in-memory exporter,
//! on this test's thread), an HTTP tool's request carries its
//! `execute_tool` span as `traceparent`. A test binary of its own: a
//! thread-scoped subscriber and other tests' threads would share the spans'
//! callsites.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod session_fixture;

use baton_core::state::run::RunStatus;
use session_fixture::{envelope, fixture, runner};

/// The tool's server continues the run's trace: the request's
/// `traceparent` is the `execute_tool` span, under the `run_tool` step's
/// span, under the run's root.
#[tokio::test]
async fn the_tool_request_carries_its_execute_tool_span_as_traceparent() {
    use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
    use tracing_subscriber::layer::SubscriberExt;
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .with_id_generator(baton_traces::TraceExport::id_generator())
        .build();
    let export = baton_traces::TraceExport::with_provider(provider);
    let _subscriber =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(export.layer()));

    let fixture = fixture().await;
    let submitted = fixture
        .services
        .runs
        .submit("t", &envelope())
        .await
        .unwrap();
    let status = runner(&fixture)
        .run_until_settled("t", &submitted.run_id)
        .await
        .unwrap();
    assert_eq!(status, RunStatus::Completed);
    let trace = fixture
        .services
        .runs
        .load("t", &submitted.run_id)
        .await
        .unwrap()
        .unwrap()
        .state
        .trace
        .unwrap();

    let sent = fixture.endpoint.traceparents.lock().unwrap().clone();
    let [Some(sent)] = sent.as_slice() else {
        panic!("one call with a traceparent: {sent:?}")
    };
    let sent = baton_core::basics::trace_context::TraceParent::parse(sent).unwrap();
    assert_eq!(sent.trace_id, trace.trace_id, "the run's trace");
    let spans = exporter.get_finished_spans().unwrap();
    let hex = |bytes: &[u8]| {
        bytes
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect::<String>()
    };
    let tool_span = spans
        .iter()
        .find(|span| hex(&span.span_context.span_id().to_bytes()) == sent.span_id.to_string())
        .expect("the traceparent names an exported span");
    assert_eq!(tool_span.name, "execute_tool lookup");
    assert!(
        tool_span
            .attributes
            .iter()
            .any(|pair| pair.key.as_str() == "gen_ai.tool.name" && pair.value.as_str() == "lookup")
    );
    let step = spans
        .iter()
        .find(|span| span.span_context.span_id() == tool_span.parent_span_id)
        .expect("the tool span's parent is exported");
    assert_eq!(step.name, "run_tool");
    assert_eq!(
        hex(&step.parent_span_id.to_bytes()),
        trace.root_span_id.to_string(),
        "the step hangs under the run's root"
    );
}
