//! A test double for an OpenTelemetry collector: an HTTP server taking
//! OTLP/HTTP protobuf trace exports (`POST /v1/traces`), decoded with
//! `opentelemetry-proto`, every span kept for the test to read.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message;

/// One received span, its ids as lowercase hex.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedSpan {
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root.
    pub parent_span_id: String,
    pub name: String,
    /// Attribute values as text (numbers and booleans written out).
    pub attributes: BTreeMap<String, String>,
    pub resource: BTreeMap<String, String>,
    pub start_unix_nanos: u64,
    pub end_unix_nanos: u64,
    /// Its events (`tracing` events inside it): name and attributes.
    pub events: Vec<(String, BTreeMap<String, String>)>,
}

impl ReceivedSpan {
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// The running receiver.
pub struct OtlpReceiver {
    /// `http://127.0.0.1:PORT` (what `OTEL_EXPORTER_OTLP_ENDPOINT` takes).
    pub endpoint: String,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
    _server: tokio::task::JoinHandle<()>,
}

fn text(value: Option<&AnyValue>) -> String {
    match value.and_then(|value| value.value.as_ref()) {
        Some(any_value::Value::StringValue(text)) => text.clone(),
        Some(any_value::Value::IntValue(number)) => number.to_string(),
        Some(any_value::Value::DoubleValue(number)) => number.to_string(),
        Some(any_value::Value::BoolValue(flag)) => flag.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn attributes(pairs: &[KeyValue]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|pair| (pair.key.clone(), text(pair.value.as_ref())))
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

async fn export(
    State(spans): State<Arc<Mutex<Vec<ReceivedSpan>>>>,
    body: Bytes,
) -> (StatusCode, Vec<u8>) {
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return (StatusCode::BAD_REQUEST, Vec::new());
    };
    let mut received = Vec::new();
    for resource_spans in request.resource_spans {
        let resource = resource_spans
            .resource
            .map(|resource| attributes(&resource.attributes))
            .unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                received.push(ReceivedSpan {
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    name: span.name,
                    attributes: attributes(&span.attributes),
                    resource: resource.clone(),
                    start_unix_nanos: span.start_time_unix_nano,
                    end_unix_nanos: span.end_time_unix_nano,
                    events: span
                        .events
                        .into_iter()
                        .map(|event| (event.name, attributes(&event.attributes)))
                        .collect(),
                });
            }
        }
    }
    if let Ok(mut kept) = spans.lock() {
        kept.extend(received);
    }
    (
        StatusCode::OK,
        ExportTraceServiceResponse::default().encode_to_vec(),
    )
}

impl OtlpReceiver {
    pub async fn start() -> Self {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let app = axum::Router::new()
            .route("/v1/traces", post(export))
            .with_state(spans.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        OtlpReceiver {
            endpoint,
            spans,
            _server: server,
        }
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans
            .lock()
            .map(|spans| spans.clone())
            .unwrap_or_default()
    }

    /// Waits (at most `limit`) until `ready` holds of the spans received.
    pub async fn wait_for(
        &self,
        limit: Duration,
        ready: impl Fn(&[ReceivedSpan]) -> bool,
    ) -> Vec<ReceivedSpan> {
        let started = Instant::now();
        loop {
            let spans = self.spans();
            if ready(&spans) || started.elapsed() > limit {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
