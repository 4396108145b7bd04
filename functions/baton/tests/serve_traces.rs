//! One trace per run, across processes: `baton serve --store sqlite:FILE`
//! (the real binary) exporting to a local OTLP receiver (a test double of
//! an OpenTelemetry collector, decoding the protobuf export) takes a run
//! submitted with a caller's `traceparent`, is stopped (SIGTERM) after two
//! of its five nodes, and a second process on the same file finishes it.
//! The receiver gets one trace: the run's root span under the caller's
//! span, every step span under the root (from both processes), each model
//! call a `gen_ai.chat` span under its step with the GenAI attributes, the
//! lifecycle lines as span events, and every frame's `traceId`/`spanId`
//! naming the trace and an exported span.
//! The scripted OpenAI-compatible server stands in for the model.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod serve_support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use baton_test_support::otlp_receiver::{OtlpReceiver, ReceivedSpan};
use scripted_llm::{Behavior, ScriptedLlmServer};
use serde_json::Value;
use serve_support::{TOKEN, model_environment, run_frames, run_snapshot, run_status, start_serve};

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// The run's completed nodes, from its snapshot (`GET /runs/{id}`: the
/// event stream would follow the run to its end).
async fn completed_nodes(client: &reqwest::Client, base: &str, run_id: &str) -> usize {
    let snapshot = run_snapshot(client, base, run_id).await;
    assert_eq!(snapshot["run"]["traceId"], CALLER_TRACE, "{snapshot}");
    snapshot["nodes"]
        .as_object()
        .map(|nodes| {
            nodes
                .values()
                .filter(|node| node["status"] == "completed")
                .count()
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_finished_by_a_second_process_is_one_trace_under_its_callers_span() {
    let receiver = OtlpReceiver::start().await;
    let model = ScriptedLlmServer::start().await.unwrap();
    model.set_default_behavior(Behavior::SlowValid { delay_ms: 1_500 });
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", folder.path().join("runs.sqlite3").display());
    // Five capabilities in a line: a five-node plan.
    let registry = folder.path().join("registry");
    baton_test_support::five_stages::write_five_stage_registry(&registry);
    let registry = registry.display().to_string();
    let mut environment = model_environment(&model);
    environment.push((
        "OTEL_EXPORTER_OTLP_ENDPOINT".into(),
        receiver.endpoint.clone(),
    ));
    environment.push(("OTEL_BSP_SCHEDULE_DELAY".into(), "100".into()));
    let client = reqwest::Client::new();

    // The first process: the run is submitted under the caller's span and
    // the process stops after two nodes.
    let first = start_serve(&["--store", &store, "--registry", &registry], &environment).await;
    let response = client
        .post(format!("{}/runs", first.base))
        .bearer_auth(TOKEN)
        .header("traceparent", format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"))
        .json(&baton_test_support::five_stages::five_stage_envelope())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    let run_id = response.json::<Value>().await.unwrap()["runId"]
        .as_str()
        .unwrap()
        .to_string();
    let started = Instant::now();
    while completed_nodes(&client, &first.base, &run_id).await < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "two nodes never completed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let stopping = Instant::now();
    let status = first.terminate(Duration::from_secs(60)).await;
    eprintln!(
        "the first process stopped in {} ms",
        stopping.elapsed().as_millis()
    );
    assert!(status.success(), "the first process stopped with {status}");

    // The second process finishes it.
    let second = start_serve(&["--store", &store, "--registry", &registry], &environment).await;
    let completed_before = completed_nodes(&client, &second.base, &run_id).await;
    assert!(
        completed_before < 5,
        "the first process finished the run ({completed_before} nodes), proving nothing"
    );
    let started = Instant::now();
    while run_status(&client, &second.base, &run_id).await != "completed" {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the run never completed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let frames = run_frames(&client, &second.base, &run_id).await;
    let status = second.terminate(Duration::from_secs(60)).await;
    assert!(status.success(), "the second process stopped with {status}");

    let spans = receiver
        .wait_for(Duration::from_secs(20), |spans| {
            spans.iter().any(|span| span.name == "run")
        })
        .await;
    let trace: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|span| span.trace_id == CALLER_TRACE)
        .collect();

    // The root: the run, under the caller's span.
    let roots: Vec<&&ReceivedSpan> = trace.iter().filter(|span| span.name == "run").collect();
    assert_eq!(roots.len(), 1, "one root span: {roots:?}");
    let root = roots[0];
    assert_eq!(root.parent_span_id, CALLER_SPAN);
    assert_eq!(root.attribute("baton.run_id"), Some(run_id.as_str()));
    assert_eq!(root.attribute("baton.run.status"), Some("completed"));
    // The envelope names no workflow and its schema has no title.
    assert_eq!(root.attribute("baton.workflow_name"), Some("baton"));
    assert!(root.end_unix_nanos > root.start_unix_nanos);

    // Every step under the root, from both processes.
    let steps: Vec<&&ReceivedSpan> = trace
        .iter()
        .filter(|span| span.attributes.contains_key("step_id"))
        .collect();
    assert!(
        steps.iter().all(|step| step.parent_span_id == root.span_id),
        "a step span is not the root's child: {steps:#?}"
    );
    let node_steps: BTreeSet<&str> = steps
        .iter()
        .filter(|step| step.name == "execute_node")
        .filter_map(|step| step.attribute("node_id"))
        .collect();
    assert_eq!(node_steps.len(), 5, "five nodes' steps: {node_steps:?}");
    assert!(steps.iter().any(|step| step.name == "plan"));
    let processes: BTreeSet<&str> = steps
        .iter()
        .filter_map(|step| step.resource.get("process.pid").map(String::as_str))
        .collect();
    assert_eq!(
        processes.len(),
        2,
        "steps from both processes: {processes:?}"
    );

    // Each model call under a step, by the GenAI conventions.
    let step_ids: BTreeSet<&str> = steps.iter().map(|step| step.span_id.as_str()).collect();
    let calls: Vec<&&ReceivedSpan> = trace
        .iter()
        .filter(|span| span.attribute("gen_ai.operation.name") == Some("chat"))
        .collect();
    assert!(calls.len() >= 5, "a model call per node: {}", calls.len());
    for call in &calls {
        assert!(step_ids.contains(call.parent_span_id.as_str()), "{call:#?}");
        assert!(call.name.starts_with("chat "), "{}", call.name);
        assert!(
            call.attribute("gen_ai.request.model")
                .is_some_and(|model| !model.is_empty())
        );
        assert!(call.attribute("gen_ai.response.model").is_some());
        assert!(
            call.attribute("gen_ai.usage.input_tokens").is_some(),
            "{call:#?}"
        );
        assert!(call.attribute("gen_ai.usage.output_tokens").is_some());
        assert_eq!(
            call.attribute("gen_ai.response.finish_reasons"),
            Some("[\"stop\"]")
        );
    }
    // Commits and queue sends are spans of their steps.
    assert!(
        trace
            .iter()
            .any(|span| span.name == "commit" && step_ids.contains(span.parent_span_id.as_str()))
    );
    assert!(trace.iter().any(|span| span.name == "steps send"));

    // The lifecycle lines are events of the spans that wrote them.
    let lifecycle: BTreeSet<&str> = trace
        .iter()
        .flat_map(|span| span.events.iter())
        .filter_map(|(_, attributes)| attributes.get("event").map(String::as_str))
        .collect();
    // (`run.started` is logged by the request that submits, which has no
    // span of its own.)
    for event in [
        "plan.generated",
        "node.started",
        "node.completed",
        "run.completed",
    ] {
        assert!(lifecycle.contains(event), "{event} in {lifecycle:?}");
    }

    // Every frame names the trace; a step's frames name an exported span.
    let exported: BTreeMap<&str, &str> = trace
        .iter()
        .map(|span| (span.span_id.as_str(), span.name.as_str()))
        .collect();
    assert!(frames.iter().all(|frame| frame["traceId"] == CALLER_TRACE));
    let node_frames: Vec<&Value> = frames
        .iter()
        .filter(|frame| frame["type"] == "node_complete")
        .collect();
    assert_eq!(node_frames.len(), 5);
    for frame in node_frames {
        let span_id = frame["spanId"]
            .as_str()
            .expect("a step's frame has a span id");
        assert_eq!(exported.get(span_id), Some(&"execute_node"), "{frame}");
    }
}
