//! End-to-end tests of `baton run` / `baton plan`: the real binary, the real
//! engine and registry, and the scripted OpenAI-compatible server standing in
//! for the external model endpoint (the only test double here).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

mod serve_support;

use baton_core::basics::ids::RunKey;
use baton_runtime::ports::RunLog;
use std::path::{Path, PathBuf};
use std::process::Output;

use baton_core::basics::schema::{collect_violations, compile_schema};
use scripted_llm::{Behavior, ScriptedLlmServer};
use serde_json::{Value, json};

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

async fn baton(server: Option<&ScriptedLlmServer>, arguments: &[&str]) -> Output {
    baton_with(server, arguments, &[]).await
}

async fn baton_with(
    server: Option<&ScriptedLlmServer>,
    arguments: &[&str],
    extra_environment: &[(&str, &str)],
) -> Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_baton"));
    // The default store is a file under the data directory: this process's own.
    let data_home = std::env::temp_dir().join(format!("baton-cli-tests-{}", std::process::id()));
    command
        .env("XDG_DATA_HOME", data_home)
        .env_remove("BATON_LLM")
        .env_remove("BATON_LOCAL_MODEL_PATH");
    command
        .args(arguments)
        .current_dir(repository_root())
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_MODEL")
        .env_remove("BATON_LLM_API_KEY")
        .env_remove("BATON_REGISTRY_DIR")
        .env("BATON_LLM_INITIAL_BACKOFF_MS", "5");
    match server {
        Some(server) => command
            .env("BATON_LLM_BASE_URL", server.base_url())
            .env("BATON_LLM_MODEL", "gpt-4o-mini"),
        None => command
            .env_remove("BATON_LLM_BASE_URL")
            .env_remove("BATON_LLM_MODEL"),
    };
    // The test's own variables come last: they win.
    command.envs(extra_environment.iter().copied());
    command.output().await.unwrap()
}

async fn run_ndjson(server: &ScriptedLlmServer, envelope: &Path) -> (i32, Vec<Value>, String) {
    run_ndjson_with(server, envelope, &[]).await
}

/// `baton run ENVELOPE --format ndjson` with extra variables: (exit code, frames, stderr).
async fn run_ndjson_with(
    server: &ScriptedLlmServer,
    envelope: &Path,
    extra_environment: &[(&str, &str)],
) -> (i32, Vec<Value>, String) {
    let output = baton_with(
        Some(server),
        &["run", envelope.to_str().unwrap(), "--format", "ndjson"],
        extra_environment,
    )
    .await;
    let frames = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    (
        output.status.code().unwrap(),
        frames,
        String::from_utf8(output.stderr).unwrap(),
    )
}

/// The frame types, without the narration (`phase`, `handoff`, a node's
/// `metrics`; checked in the engine's narration test).
fn types(frames: &[Value]) -> Vec<&str> {
    frames
        .iter()
        .filter(|frame| !is_narration(frame))
        .map(|frame| frame["type"].as_str().unwrap())
        .collect()
}

/// The frames without the narration.
fn story(frames: &[Value]) -> Vec<&Value> {
    frames.iter().filter(|frame| !is_narration(frame)).collect()
}

fn is_narration(frame: &Value) -> bool {
    matches!(frame["type"].as_str(), Some("phase" | "handoff"))
        || (frame["type"] == "metrics" && frame.get("nodeId").is_some())
}

fn event_frame_schema() -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(repository_root().join("events/schemas/event-frame.schema.json"))
            .unwrap(),
    )
    .unwrap()
}

/// Frame invariants every stream must keep, including the published frame schema.
fn assert_frame_invariants(frames: &[Value]) {
    let frame_validator = compile_schema(
        &event_frame_schema(),
        "events/schemas/event-frame.schema.json",
    )
    .unwrap();
    for frame in frames {
        let violations = collect_violations(&frame_validator, frame);
        assert!(
            violations.is_empty(),
            "frame breaks events/schemas/event-frame.schema.json: {violations:?}\n{frame}"
        );
    }
    baton_test_support::assert_frame_values_match_schemas(frames);
    assert_eq!(frames.first().unwrap()["type"], "start");
    let run_id = frames[0]["runId"].as_str().unwrap();
    let correlation_id = frames[0]["correlationId"].as_str().unwrap();
    for (index, frame) in frames.iter().enumerate() {
        assert_eq!(
            frame["id"],
            json!(index + 1),
            "ids run 1, 2, 3, … without gaps: {frame}"
        );
        assert_eq!(frame["runId"], run_id);
        assert_eq!(frame["correlationId"], correlation_id);
        assert!(
            frame["timestamp"]
                .as_str()
                .is_some_and(|t| t.ends_with('Z'))
        );
    }
}

fn envelope_schema(path: &Path) -> Value {
    let envelope: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    envelope["outputContract"]["schema"].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_example_envelope_completes_with_contract_valid_output() {
    let examples: Vec<PathBuf> = std::fs::read_dir(repository_root().join("registry/examples"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "json")
        })
        .collect();
    assert!(
        examples.len() >= 3,
        "the seed envelopes plus a positioning one"
    );
    for example in examples {
        let server = ScriptedLlmServer::start().await.unwrap();
        let (mut code, mut frames, mut stderr) = run_ndjson(&server, &example).await;
        let envelope: Value =
            serde_json::from_str(&std::fs::read_to_string(&example).unwrap()).unwrap();
        let legacy_keys = [
            "persona",
            "brandVoice",
            "variantCount",
            "hitlRequiredFor",
            "requiresHitlApproval",
        ];
        let sent: Vec<&str> = legacy_keys
            .into_iter()
            .filter(|key| envelope["policies"].get(*key).is_some())
            .collect();
        let said: Vec<&str> = frames
            .iter()
            .filter(|frame| frame["payload"]["code"] == "legacy_policy_normalized")
            .map(|frame| frame["payload"]["field"].as_str().unwrap())
            .collect();
        for key in &sent {
            assert!(
                said.iter()
                    .any(|field| field.starts_with(&format!("$.policies.{key}"))),
                "{}: the legacy `{key}` is said to be normalised: {said:?}",
                example.display()
            );
        }
        if envelope["policies"]["hitlRequiredFor"] == json!(["final_publish"]) {
            // The final output waits for a person: approve it, the run ends.
            assert_eq!(code, 4, "{}: {stderr}", example.display());
            assert_eq!(frames.last().unwrap()["type"], "hitl_request");
            let run_id = frames[0]["runId"].as_str().unwrap().to_string();
            let resolved = baton(
                Some(&server),
                &["resolve", &run_id, "--approve", "--format", "ndjson"],
            )
            .await;
            code = resolved.status.code().unwrap();
            stderr = String::from_utf8(resolved.stderr).unwrap();
            frames.extend(
                String::from_utf8(resolved.stdout)
                    .unwrap()
                    .lines()
                    .map(|line| serde_json::from_str::<Value>(line).unwrap()),
            );
        }
        assert_eq!(code, 0, "{}: {stderr}\n{frames:?}", example.display());
        assert_frame_invariants(&frames);
        let last = frames.last().unwrap();
        assert_eq!(last["type"], "complete", "{}", example.display());
        let validator = compile_schema(&envelope_schema(&example), "contract").unwrap();
        let violations = collect_violations(&validator, &last["payload"]["output"]);
        assert!(
            violations.is_empty(),
            "{}: {violations:?}",
            example.display()
        );
        let model_nodes = frames
            .iter()
            .filter(|frame| {
                frame["type"] == "node_start" && frame["payload"]["executorType"] == "ai"
            })
            .count();
        assert_eq!(
            server.request_count(),
            model_nodes,
            "one model call per AI node when every answer is valid"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_seed_sample_asks_for_two_variants_and_gets_exactly_two() {
    let server = ScriptedLlmServer::start().await.unwrap();
    let (code, frames, _) = run_ndjson(
        &server,
        &repository_root().join("registry/examples/seed-10.0.1-stream-contract-variants.json"),
    )
    .await;
    assert_eq!(code, 0);
    assert_frame_invariants(&frames);
    let plan = frames
        .iter()
        .find(|frame| frame["type"] == "plan_generated")
        .unwrap();
    let nodes = plan["payload"]["nodes"].as_array().unwrap();
    let branches: Vec<&Value> = nodes
        .iter()
        .filter(|node| node["kind"] == "branch")
        .collect();
    assert_eq!(branches.len(), 2, "two parallel branch nodes: {nodes:?}");
    let edges = plan["payload"]["edges"].as_array().unwrap();
    for branch in &branches {
        let id = branch["nodeId"].as_str().unwrap();
        assert!(
            edges
                .iter()
                .all(|edge| !(edge["from"] == id && edge["to"].as_str().unwrap().contains("_v"))),
            "branches do not feed each other"
        );
    }
    let join = nodes
        .iter()
        .find(|node| node["agentType"] == "builtin")
        .unwrap();
    assert_eq!(join["provides"], json!(["copyVariants"]));
    let branch_answers: Vec<Value> = server.requests()[1..]
        .iter()
        .map(|request| {
            request.body["response_format"]["json_schema"]["schema"]["properties"]["copyVariants"]
                .clone()
        })
        .collect();
    assert_eq!(branch_answers.len(), 2, "one model call per branch");
    for schema in branch_answers {
        assert_eq!(
            schema["allOf"][2],
            json!({"minItems": 1, "maxItems": 1}),
            "each branch writes exactly one variant"
        );
    }
    let output = &frames.last().unwrap()["payload"]["output"];
    assert_eq!(output["copyVariants"].as_array().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_impossible_contract_ends_in_plan_rejected() {
    let server = ScriptedLlmServer::start().await.unwrap();
    let (code, frames, stderr) = run_ndjson(&server, &fixture("impossible-contract.json")).await;
    assert_eq!(code, 3, "{stderr}");
    assert_frame_invariants(&frames);
    assert_eq!(
        types(&frames),
        vec![
            "start",
            "plan_requested",
            "plan_rejected",
            "metrics",
            "error"
        ]
    );
    let rejection = &story(&frames)[2]["payload"];
    assert_eq!(rejection["status"], "rejected");
    assert_eq!(rejection["failures"][0]["cause"], "missing_producer");
    assert_eq!(
        rejection["failures"][0]["constraintId"],
        "output.quarterlyForecast"
    );
    assert_eq!(
        server.request_count(),
        0,
        "no model call for a rejected plan"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_contract_asking_for_more_than_the_facets_gets_a_normalization_node() {
    let server = ScriptedLlmServer::start().await.unwrap();
    let envelope = fixture("normalized-summary.json");
    let (code, frames, stderr) = run_ndjson(&server, &envelope).await;
    assert_eq!(code, 0, "{stderr}");
    assert_frame_invariants(&frames);
    let generated = frames
        .iter()
        .find(|frame| frame["type"] == "plan_generated")
        .unwrap();
    let last_node = generated["payload"]["nodes"]
        .as_array()
        .unwrap()
        .last()
        .unwrap();
    assert_eq!(last_node["capabilityId"], "baton.normalize", "{generated}");
    let normalize_start = frames
        .iter()
        .find(|frame| frame["type"] == "node_start" && frame["nodeId"] == "normalize")
        .unwrap();
    assert_eq!(normalize_start["payload"]["kind"], "transformation");
    assert_eq!(normalize_start["payload"]["executorType"], "ai");
    // The normaliser was asked for the caller's whole schema.
    let last_request = server.requests().last().unwrap().body.clone();
    assert_eq!(
        last_request["response_format"]["json_schema"]["schema"]["required"],
        serde_json::json!(["positioning_recommendation", "messaging_stack", "summary"])
    );
    let last = frames.last().unwrap();
    assert_eq!(last["type"], "complete");
    let output = &last["payload"]["output"];
    assert!(
        output["summary"]
            .as_str()
            .is_some_and(|summary| !summary.is_empty())
    );
    let validator = compile_schema(&envelope_schema(&envelope), "contract").unwrap();
    assert!(collect_violations(&validator, output).is_empty());
}

/// `BATON_DELTA_FLUSH_MILLIS=off` keeps no streamed text: the same run
/// writes no `delta` frame, and its output is the same as when it streams.
#[tokio::test(flavor = "multi_thread")]
async fn delta_flush_off_writes_no_delta_frames_and_the_same_output() {
    let envelope = repository_root().join("registry/examples/positioning-recommendation.json");
    let streamed_server = ScriptedLlmServer::start().await.unwrap();
    let (code, streamed, stderr) = run_ndjson(&streamed_server, &envelope).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        streamed.iter().any(|frame| frame["type"] == "delta"),
        "by default a writing node streams its text"
    );
    let quiet_server = ScriptedLlmServer::start().await.unwrap();
    let (code, quiet, stderr) = run_ndjson_with(
        &quiet_server,
        &envelope,
        &[("BATON_DELTA_FLUSH_MILLIS", "off")],
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert_frame_invariants(&quiet);
    assert!(
        !quiet.iter().any(|frame| frame["type"] == "delta"),
        "off: no delta frame"
    );
    assert_eq!(types(&quiet).last(), Some(&"complete"));
    assert_eq!(
        quiet.last().unwrap()["payload"]["output"],
        streamed.last().unwrap()["payload"]["output"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_stream_cut_mid_answer_is_retried_and_readers_are_told_to_drop_its_deltas() {
    let server = ScriptedLlmServer::start().await.unwrap();
    // The first node analyses (its text is not streamed); the second writes
    // (generation: streamed), and its stream is cut.
    server.push_behaviors([Behavior::Valid, Behavior::BrokenStream { after_chunks: 3 }]);
    let envelope = repository_root().join("registry/examples/positioning-recommendation.json");
    let (code, frames, stderr) = run_ndjson(&server, &envelope).await;
    assert_eq!(code, 0, "{stderr}");
    assert_frame_invariants(&frames);
    assert!(
        !frames
            .iter()
            .any(|frame| frame["nodeId"] == "node_1" && frame["type"] == "delta"),
        "an analysis node's text is not streamed"
    );
    let first_node: Vec<&Value> = frames
        .iter()
        .filter(|frame| frame["nodeId"] == "node_2")
        .collect();
    let restart = first_node
        .iter()
        .position(|frame| frame["type"] == "warning")
        .unwrap();
    assert_eq!(first_node[restart]["payload"]["code"], "stream_restarted");
    assert!(
        first_node[..restart]
            .iter()
            .any(|frame| frame["type"] == "delta"),
        "the cut answer had streamed deltas before the warning"
    );
    // What streamed after the warning is exactly the answer that was committed.
    let after: String = first_node[restart..]
        .iter()
        .filter(|frame| frame["type"] == "delta")
        .map(|frame| frame["message"].as_str().unwrap())
        .collect();
    let completed = first_node
        .iter()
        .find(|frame| frame["type"] == "node_complete")
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&after).unwrap(),
        completed["payload"]["output"]
    );
    assert_eq!(
        server.request_count(),
        3,
        "the first node, then the second's cut call and its retry"
    );
    assert_eq!(frames.last().unwrap()["type"], "complete");
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_envelopes_exit_2_naming_the_path() {
    let server = ScriptedLlmServer::start().await.unwrap();
    let directory = std::env::temp_dir().join(format!("baton-malformed-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let cases = [
        (
            "missing-objective",
            json!({"outputContract": {"schema": {"type": "object"}}}),
            "objective",
        ),
        (
            "wrong-type",
            json!({"objective": "x", "specialInstructions": "not a list", "outputContract": {"schema": {}}}),
            "$.specialInstructions",
        ),
        (
            "schema-does-not-compile",
            json!({"objective": "x", "outputContract": {"schema": {"type": "nonsense"}}}),
            "$.outputContract.schema",
        ),
        (
            "goto-policy",
            json!({"objective": "x", "outputContract": {"schema": {}}, "policies": {"runtime": [
                {"id": "back", "trigger": {"kind": "manual"}, "action": {"type": "goto", "next": "node_1"}}]}}),
            "$.policies.runtime[0].action",
        ),
        (
            "facet-input-breaks-its-schema",
            json!({"objective": "x", "inputs": {"toneOfVoice": 7}, "outputContract": {"schema": {}}}),
            "$.inputs.toneOfVoice",
        ),
    ];
    for (name, envelope, expected_path) in cases {
        let path = directory.join(format!("{name}.json"));
        std::fs::write(&path, envelope.to_string()).unwrap();
        let output = baton(Some(&server), &["run", path.to_str().unwrap()]).await;
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert_eq!(output.status.code(), Some(2), "{name}: {stderr}");
        assert!(
            stderr.contains(expected_path),
            "{name}: `{stderr}` should name {expected_path}"
        );
        assert!(
            output.stdout.is_empty(),
            "{name}: nothing runs for a bad envelope"
        );
    }
    let output = baton(
        Some(&server),
        &["run", directory.join("goto-policy.json").to_str().unwrap()],
    )
    .await;
    assert!(
        String::from_utf8(output.stderr).unwrap().contains("replan"),
        "goto gets a migration hint"
    );
    std::fs::remove_dir_all(&directory).unwrap();
    assert_eq!(server.request_count(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn schema_violating_answers_twice_then_valid_still_complete() {
    let server = ScriptedLlmServer::start().await.unwrap();
    server.push_behaviors([Behavior::SchemaViolating, Behavior::SchemaViolating]);
    let (code, frames, stderr) = run_ndjson(
        &server,
        &baton_test_support::plain_example_file("seed-10.1-sample-envelope.json"),
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert_frame_invariants(&frames);
    let validation_errors: Vec<&Value> = frames
        .iter()
        .filter(|frame| frame["type"] == "validation_error")
        .collect();
    assert_eq!(validation_errors.len(), 2);
    assert_eq!(validation_errors[0]["payload"]["scope"], "node_output");
    assert!(
        validation_errors[0]["payload"]["errors"]
            .as_array()
            .is_some_and(|errors| !errors.is_empty())
    );
    assert_eq!(
        server.request_count(),
        4,
        "three attempts for the first node, one for the second"
    );
    let third_attempt: Value = serde_json::from_str(
        server.requests()[2].body["messages"][1]["content"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert!(
        third_attempt["previousAttemptErrors"]
            .as_array()
            .is_some_and(|errors| !errors.is_empty()),
        "errors are fed back"
    );
    assert_eq!(frames.last().unwrap()["type"], "complete");
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_json_is_reprompted() {
    let server = ScriptedLlmServer::start().await.unwrap();
    server.push_behaviors([Behavior::MalformedJson]);
    let (code, frames, _) = run_ndjson(
        &server,
        &repository_root().join("registry/examples/social-post-new-case.json"),
    )
    .await;
    assert_eq!(code, 0);
    let error = frames
        .iter()
        .find(|frame| frame["type"] == "validation_error")
        .unwrap();
    assert!(
        error["payload"]["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("not valid JSON")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn three_violating_answers_hand_the_node_to_the_next_ranked_capability() {
    let server = ScriptedLlmServer::start().await.unwrap();
    server.push_behaviors([
        Behavior::SchemaViolating,
        Behavior::SchemaViolating,
        Behavior::SchemaViolating,
    ]);
    let (code, frames, _) = run_ndjson(
        &server,
        &baton_test_support::plain_example_file("seed-10.1-sample-envelope.json"),
    )
    .await;
    assert_eq!(code, 0, "{:?}", types(&frames));
    let fallback = frames
        .iter()
        .find(|frame| frame["type"] == "warning")
        .expect("a capability_fallback warning");
    assert_eq!(fallback["payload"]["code"], "capability_fallback");
    let updated = frames
        .iter()
        .find(|frame| frame["type"] == "plan_updated")
        .expect("a new plan version");
    assert_eq!(updated["payload"]["previousVersion"], 1);
    assert_eq!(updated["payload"]["version"], 2);
    assert_eq!(updated["payload"]["trigger"]["kind"], "attempts_exhausted");
    let failed_capability = updated["payload"]["trigger"]["capabilityId"].clone();
    assert!(
        updated["payload"]["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|node| node["capabilityId"] != failed_capability),
        "the new version does not use the capability that failed"
    );
    assert_eq!(frames.last().unwrap()["type"], "complete");
}

#[tokio::test(flavor = "multi_thread")]
async fn violating_answers_fail_the_run_once_no_capability_is_left() {
    let server = ScriptedLlmServer::start().await.unwrap();
    server.push_behaviors((0..30).map(|_| Behavior::SchemaViolating));
    // By default the shipped catch-all takes the facets: a person's task
    // carrying the failure, the run waiting for it (exit 4).
    let (code, frames, _) = run_ndjson(
        &server,
        &baton_test_support::plain_example_file("seed-10.1-sample-envelope.json"),
    )
    .await;
    assert_eq!(code, 4, "{:?}", types(&frames));
    let taken_over = frames
        .iter()
        .rev()
        .find(|frame| frame["type"] == "node_start")
        .unwrap();
    assert_eq!(taken_over["payload"]["capabilityId"], "HumanAgent.takeOver");
    assert_eq!(taken_over["payload"]["executorType"], "human");
    assert!(
        taken_over["payload"]["escalatedFrom"]["failure"]
            .as_str()
            .is_some_and(|failure| !failure.is_empty()),
        "{taken_over}"
    );
    // With no catch-all (`policies.fallbackCapability: "none"`) the run fails.
    let server = ScriptedLlmServer::start().await.unwrap();
    server.push_behaviors((0..30).map(|_| Behavior::SchemaViolating));
    let (code, frames, _) = run_ndjson(
        &server,
        &baton_test_support::fail_fast_example_file("seed-10.1-sample-envelope.json"),
    )
    .await;
    assert_eq!(code, 3);
    assert_eq!(
        &types(&frames)[types(&frames).len() - 3..],
        &["node_error", "metrics", "error"]
    );
    assert_eq!(
        frames.last().unwrap()["payload"]["code"],
        "output_contract_violated"
    );
    assert!(!types(&frames).contains(&"complete"));
}

#[tokio::test(flavor = "multi_thread")]
async fn five_server_errors_in_a_row_escalate_to_the_next_capability_instead_of_failing() {
    let server = ScriptedLlmServer::start().await.unwrap();
    // Test double for the model: the first node's model answers 500 on
    // every try (five attempts), then the endpoint recovers.
    server.push_behaviors((0..5).map(|_| Behavior::Status {
        status: 500,
        retry_after_seconds: None,
    }));
    let (code, frames, stderr) = run_ndjson(
        &server,
        &baton_test_support::plain_example_file("seed-10.1-sample-envelope.json"),
    )
    .await;
    assert_eq!(
        code, 0,
        "an escalation exists, so the run goes on: {stderr}"
    );
    assert_frame_invariants(&frames);
    let updated = frames
        .iter()
        .find(|frame| frame["type"] == "plan_updated")
        .expect("a new plan version hands the failing node on");
    assert_eq!(updated["payload"]["trigger"]["kind"], "model_failed");
    let escalated = frames
        .iter()
        .find(|frame| frame["payload"]["code"] == "capability_fallback")
        .expect("the escalation is said");
    assert!(
        escalated["message"]
            .as_str()
            .unwrap()
            .contains("llm_server_error"),
        "{escalated}"
    );
    assert_eq!(frames.last().unwrap()["type"], "complete");
    assert!(server.request_count() > 5, "the next capability was asked");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_human_capability_parks_the_run_with_its_contract() {
    let server = ScriptedLlmServer::start().await.unwrap();
    let (code, frames, stderr) = run_ndjson(&server, &fixture("human-review.json")).await;
    assert_eq!(code, 4, "{stderr}");
    assert_frame_invariants(&frames);
    let last = frames.last().unwrap();
    assert_eq!(last["type"], "node_start");
    assert_eq!(last["payload"]["executorType"], "human");
    assert_eq!(
        last["payload"]["contract"]["outputSchema"]["required"],
        json!(["positioning", "feedback"])
    );
    assert!(!types(&frames).contains(&"complete") && !types(&frames).contains(&"error"));
    assert_eq!(
        server.request_count(),
        2,
        "the two AI nodes before the human one ran"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_node_sees_only_its_own_input_facets_and_no_orchestrator_prompt() {
    let server = ScriptedLlmServer::start().await.unwrap();
    let (code, _, _) = run_ndjson(
        &server,
        &baton_test_support::plain_example_file("seed-10.1-sample-envelope.json"),
    )
    .await;
    assert_eq!(code, 0);
    let writer_request = &server.requests()[1].body;
    let user: Value =
        serde_json::from_str(writer_request["messages"][1]["content"].as_str().unwrap()).unwrap();
    let input_facets: Vec<&String> = user["inputs"].as_object().unwrap().keys().collect();
    assert_eq!(
        input_facets,
        vec!["writerBrief", "planKnobs", "toneOfVoice"]
    );
    assert!(
        user["inputs"].get("strategicRationale").is_none(),
        "an upstream facet it does not consume stays out"
    );
    assert_eq!(
        writer_request["messages"].as_array().unwrap().len(),
        2,
        "system (capability) + user only"
    );
    let system = writer_request["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.starts_with("You are a content writer."),
        "the capability's own prompt, not an orchestrator's"
    );
    assert_eq!(writer_request["response_format"]["type"], "json_schema");
}

#[tokio::test(flavor = "multi_thread")]
async fn sse_format_prints_wire_frames() {
    let server = ScriptedLlmServer::start().await.unwrap();
    let output = baton(
        Some(&server),
        &[
            "run",
            "registry/examples/social-post-new-case.json",
            "--format",
            "sse",
        ],
    )
    .await;
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8(output.stdout).unwrap();
    let blocks: Vec<&str> = text
        .split("\n\n")
        .filter(|block| !block.is_empty())
        .collect();
    assert!(blocks[0].starts_with("id: 1\nevent: start\ndata: {"));
    assert!(blocks.last().unwrap().contains("event: complete"));
}

#[tokio::test(flavor = "multi_thread")]
async fn model_choice_problems_are_clear_errors_at_start() {
    // (environment, what stderr must name); exit 2 before any run.
    type Environment<'a> = &'a [(&'a str, &'a str)];
    let table: [(Environment, &[&str]); 3] = [
        // Forced remote without an endpoint.
        (&[("BATON_LLM", "remote")], &["BATON_LLM_BASE_URL"]),
        // No endpoint: the offline model, whose file is absent here.
        (
            &[("BATON_LOCAL_MODEL_PATH", "/nonexistent/baton/model.gguf")],
            &[
                "/nonexistent/baton/model.gguf",
                "bash scripts/fetch-local-model.sh",
            ],
        ),
        (&[("BATON_LLM", "gpu")], &["BATON_LLM=\"gpu\""]),
    ];
    for (environment, named) in table {
        let output = baton_with(
            None,
            &["run", "registry/examples/social-post-new-case.json"],
            environment,
        )
        .await;
        assert_eq!(output.status.code(), Some(2), "{environment:?}");
        let stderr = String::from_utf8(output.stderr).unwrap();
        for text in named {
            assert!(stderr.contains(text), "{environment:?}: {stderr}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_prints_the_validated_plan_without_calling_a_model() {
    let output = baton(
        None,
        &["plan", "registry/examples/positioning-recommendation.json"],
    )
    .await;
    assert_eq!(output.status.code(), Some(0));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["diagnostics"]["status"], "accepted");
    let capabilities: Vec<&str> = report["plan"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| node["capabilityId"].as_str().unwrap())
        .collect();
    assert_eq!(capabilities.len(), 2);
    // Where each node would escalate: no other capability makes their
    // facets, so the shipped catch-all, a person's task.
    let escalation = report["escalation"].as_array().unwrap();
    assert_eq!(escalation.len(), 2, "{escalation:?}");
    for target in escalation {
        assert_eq!(target["via"], "fallback", "{target}");
        assert_eq!(target["capabilityId"], "HumanAgent.takeOver", "{target}");
        assert_eq!(target["person"], true, "{target}");
    }
    let rejected = baton(
        None,
        &[
            "plan",
            fixture("impossible-contract.json").to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(rejected.status.code(), Some(3));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_default_model_is_a_catalog_model_named_on_every_ai_node_and_by_a_judge() {
    // Test double for the deployment's endpoint: it serves `stand-in`, a
    // model the shipped catalog does not list.
    let server = ScriptedLlmServer::start().await.unwrap();
    let stand_in = [
        ("BATON_LLM_BASE_URL", server.base_url()),
        ("BATON_LLM_MODEL", "stand-in".to_string()),
    ];
    let stand_in: Vec<(&str, &str)> = stand_in
        .iter()
        .map(|(name, value)| (*name, value.as_str()))
        .collect();
    // No capability or envelope preference: every AI node names the default.
    let planned = baton_with(
        None,
        &["plan", "registry/examples/seed-10.1-sample-envelope.json"],
        &stand_in,
    )
    .await;
    assert_eq!(planned.status.code(), Some(0), "{planned:?}");
    let report: Value = serde_json::from_slice(&planned.stdout).unwrap();
    let nodes = report["plan"]["nodes"].as_array().unwrap();
    let ai_nodes: Vec<&Value> = nodes
        .iter()
        .filter(|node| matches!(node["agentType"].as_str(), Some("ai") | Some("agent")))
        .collect();
    assert!(!ai_nodes.is_empty(), "{nodes:?}");
    for node in &ai_nodes {
        assert_eq!(node["model"]["name"], "stand-in", "{node}");
        assert_eq!(node["model"]["provider"], "openai", "{node}");
    }
    // Without an endpoint the CLI's offline model is the default, named as
    // the catalog lists it.
    let offline = baton(
        None,
        &["plan", "registry/examples/seed-10.1-sample-envelope.json"],
    )
    .await;
    let report: Value = serde_json::from_slice(&offline.stdout).unwrap();
    for node in report["plan"]["nodes"].as_array().unwrap() {
        if matches!(node["agentType"].as_str(), Some("ai") | Some("agent")) {
            assert_eq!(node["model"]["provider"], "local", "{node}");
        }
    }
    // `registry check` says the default's prices are unknown, not zero.
    let checked = baton_with(None, &["registry", "check", "registry"], &stand_in).await;
    assert_eq!(checked.status.code(), Some(0), "{checked:?}");
    let said = String::from_utf8_lossy(&checked.stdout);
    assert!(
        said.contains("default model stand-in: provider openai; prices unknown"),
        "{said}"
    );
    // A judge naming the default model reaches it (before: exit 2, "not a
    // model of the registry's catalog").
    server.push_behaviors([Behavior::Content {
        content: json!({"score": 7.0, "feedback": "fine", "strengths": [], "improvements": []})
            .to_string(),
    }]);
    let folder = tempfile::tempdir().unwrap();
    let request = folder.path().join("panel.json");
    std::fs::write(
        &request,
        json!({
            "request": {"id": "req-default", "content": "Baton names its default model.",
                        "selectedAgents": [{"id": "a", "capabilities": {"modelName": "stand-in"}}]},
            "config": {"maxDiscussionRounds": 1, "roundTimeout": 30000, "consensusAlgorithm": "simple_average",
                       "enableDiscussion": false, "convergenceThreshold": 0.5, "outlierDetection": false}
        })
        .to_string(),
    )
    .unwrap();
    let judged = baton_with(
        None,
        &["judge", request.to_str().unwrap(), "--format", "ndjson"],
        &stand_in,
    )
    .await;
    assert_eq!(judged.status.code(), Some(0), "{judged:?}");
    let asked: Vec<String> = server
        .requests()
        .iter()
        .map(|request| request.model.clone())
        .collect();
    assert_eq!(asked, ["stand-in"]);
    let last: Value = serde_json::from_str(
        String::from_utf8(judged.stdout)
            .unwrap()
            .lines()
            .last()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        last["payload"]["output"]["individualResults"][0]["model"],
        "stand-in"
    );
}

/// The fenced block of `language` after `marker` in `docs/concepts.md`.
fn readme_block(marker: &str, language: &str) -> String {
    let readme = std::fs::read_to_string(repository_root().join("docs/concepts.md")).unwrap();
    let after = &readme[readme
        .find(marker)
        .expect("docs/concepts.md has the marker")..];
    let fence = format!("```{language}\n");
    let start = after.find(&fence).unwrap() + fence.len();
    let end = start + after[start..].find("```").unwrap();
    after[start..end].to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_pictures_match_the_readme_and_name_every_node_and_facet() {
    let envelope = "registry/examples/seed-10.1-sample-envelope.json";
    let mermaid = baton(None, &["plan", envelope, "--format", "mermaid"]).await;
    assert_eq!(mermaid.status.code(), Some(0));
    let mermaid = String::from_utf8(mermaid.stdout).unwrap();
    assert_eq!(
        mermaid,
        readme_block("<!-- baton plan seed-10.1 --format mermaid -->", "mermaid"),
        "docs/concepts.md's rendered plan is what `baton plan --format mermaid` prints today"
    );
    let json = baton(None, &["plan", envelope]).await;
    let report: Value = serde_json::from_slice(&json.stdout).unwrap();
    let dot = baton(None, &["plan", envelope, "--format", "dot"]).await;
    assert_eq!(dot.status.code(), Some(0));
    let dot = String::from_utf8(dot.stdout).unwrap();
    assert!(
        dot.starts_with("digraph \"plan v1\" {") && dot.ends_with("}\n"),
        "{dot}"
    );
    for node in report["plan"]["nodes"].as_array().unwrap() {
        let id = node["nodeId"].as_str().unwrap();
        let capability = node["capabilityId"].as_str().unwrap();
        assert!(
            mermaid.contains(&format!("    {id}[\"")),
            "{id} in {mermaid}"
        );
        assert!(mermaid.contains(capability) && dot.contains(capability));
    }
    for edge in report["plan"]["edges"].as_array().unwrap() {
        let (from, to) = (edge["from"].as_str().unwrap(), edge["to"].as_str().unwrap());
        let arrow = mermaid
            .lines()
            .find(|line| {
                line.trim_start().starts_with(&format!("{from} -->")) && line.ends_with(to)
            })
            .unwrap_or_else(|| panic!("no arrow {from} -> {to} in {mermaid}"));
        assert!(arrow.contains(edge["facet"].as_str().unwrap()), "{arrow}");
        assert!(
            dot.contains(&format!("    {from} -> {to} [label=")),
            "{dot}"
        );
    }
    let rejected = baton(
        None,
        &[
            "plan",
            fixture("impossible-contract.json").to_str().unwrap(),
            "--format",
            "mermaid",
        ],
    )
    .await;
    assert_eq!(rejected.status.code(), Some(3));
    assert!(
        rejected.stdout.is_empty(),
        "no picture of a plan that does not exist"
    );
    assert!(String::from_utf8_lossy(&rejected.stderr).contains("rejected"));
}

fn plan_draft(nodes: Value) -> Behavior {
    Behavior::Content {
        content: json!({"nodes": nodes, "rationale": "scripted draft"}).to_string(),
    }
}

async fn run_with_llm_planner(server: &ScriptedLlmServer) -> (i32, Vec<Value>) {
    let envelope = baton_test_support::plain_example_file("seed-10.1-sample-envelope.json");
    let (code, frames, _) = run_ndjson_with(server, &envelope, &[("BATON_PLANNER", "llm")]).await;
    (code, frames)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_llm_planner_is_re_prompted_with_diagnostics_until_its_plan_validates() {
    let server = ScriptedLlmServer::start().await.unwrap();
    server.push_behaviors([
        // Missing producer: the writer needs a writer brief nobody produces.
        plan_draft(json!([{"nodeId": "write", "capabilityId": "ContentGenerator.copyVariants"}])),
        plan_draft(json!([
            {"nodeId": "brief", "capabilityId": "StrategyManager.writerBrief"},
            {"nodeId": "write", "capabilityId": "ContentGenerator.copyVariants", "dependsOn": ["brief"]}
        ])),
    ]);
    let (code, frames) = run_with_llm_planner(&server).await;
    assert_eq!(code, 0, "{frames:?}");
    assert_frame_invariants(&frames);
    assert_eq!(
        &types(&frames)[..5],
        &[
            "start",
            "plan_requested",
            "plan_rejected",
            "plan_requested",
            "plan_generated"
        ]
    );
    let rejection = &story(&frames)[2]["payload"];
    assert_eq!(rejection["status"], "rejected");
    assert!(
        rejection["failures"]
            .as_array()
            .unwrap()
            .iter()
            .any(|failure| failure["cause"] == "missing_producer" && failure["nodeId"] == "write"),
        "{rejection}"
    );
    assert_eq!(story(&frames)[3]["payload"]["attempt"], 2);
    let generated = &story(&frames)[4]["payload"];
    assert_eq!(generated["plannerRuntime"], "llm");
    assert_eq!(generated["plannerModel"], "gpt-4o-mini");
    let second_prompt: Value = serde_json::from_str(
        server.requests()[1].body["messages"][1]["content"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        second_prompt["previousAttempts"][0]["failures"][0]["cause"], "missing_producer",
        "the diagnostics were fed back"
    );
    assert_eq!(
        server.requests()[0].body["response_format"]["json_schema"]["name"],
        "plan_draft"
    );
    assert_eq!(frames.last().unwrap()["type"], "complete");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_draft_with_a_forbidden_capability_is_rejected_by_policy_then_replanned() {
    let server = ScriptedLlmServer::start().await.unwrap();
    server.push_behaviors([
        plan_draft(json!([
            {"nodeId": "brief", "capabilityId": "StrategyManager.writerBrief"},
            {"nodeId": "write", "capabilityId": "ContentGenerator.copyVariants", "dependsOn": ["brief"]},
            {"nodeId": "review", "capabilityId": "QualityAssurance.contentReview", "dependsOn": ["write"]}
        ])),
        plan_draft(json!([
            {"nodeId": "brief", "capabilityId": "StrategyManager.writerBrief"},
            {"nodeId": "write", "capabilityId": "ContentGenerator.copyVariants", "dependsOn": ["brief"]}
        ])),
    ]);
    let mut envelope: Value = serde_json::from_str(
        &std::fs::read_to_string(baton_test_support::plain_example_file(
            "seed-10.1-sample-envelope.json",
        ))
        .unwrap(),
    )
    .unwrap();
    envelope["policies"]["planner"] =
        json!({"selection": {"forbid": ["QualityAssurance.contentReview"]}});
    let path = std::env::temp_dir().join(format!("baton-forbid-{}.json", std::process::id()));
    std::fs::write(&path, envelope.to_string()).unwrap();
    let (code, frames, stderr) = run_ndjson_with(&server, &path, &[("BATON_PLANNER", "llm")]).await;
    let _ = std::fs::remove_file(&path);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        &types(&frames)[..5],
        &[
            "start",
            "plan_requested",
            "plan_rejected",
            "plan_requested",
            "plan_generated"
        ]
    );
    let forbidden = &story(&frames)[2]["payload"]["failures"][0];
    assert_eq!(forbidden["constraintId"], "policy.selection.forbid");
    assert_eq!(forbidden["nodeId"], "review");
    assert_eq!(forbidden["capabilityId"], "QualityAssurance.contentReview");
    let planned: Vec<&str> = story(&frames)[4]["payload"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| node["capabilityId"].as_str().unwrap())
        .collect();
    assert!(
        !planned.contains(&"QualityAssurance.contentReview"),
        "{planned:?}"
    );
    assert_eq!(frames.last().unwrap()["type"], "complete");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_planner_that_never_validates_falls_back_to_the_deterministic_plan_with_a_warning() {
    let server = ScriptedLlmServer::start().await.unwrap();
    server.push_behaviors([
        plan_draft(json!([{"nodeId": "ghost", "capabilityId": "NoSuch.capability"}])),
        plan_draft(json!([
            {"nodeId": "a", "capabilityId": "StrategyManager.writerBrief", "dependsOn": ["b"]},
            {"nodeId": "b", "capabilityId": "ContentGenerator.copyVariants", "dependsOn": ["a"]}
        ])),
        plan_draft(json!([{"nodeId": "only", "capabilityId": "QualityAssurance.contentReview"}])),
    ]);
    let (code, frames) = run_with_llm_planner(&server).await;
    assert_eq!(code, 0, "{frames:?}");
    assert_frame_invariants(&frames);
    let rejections: Vec<&Value> = frames
        .iter()
        .filter(|frame| frame["type"] == "plan_rejected")
        .collect();
    assert_eq!(rejections.len(), 3);
    assert_eq!(
        rejections[0]["payload"]["failures"][0]["constraintId"],
        "structure.capability_exists"
    );
    assert_eq!(
        rejections[1]["payload"]["failures"][0]["constraintId"],
        "structure.acyclic"
    );
    let warning = frames
        .iter()
        .find(|frame| frame["type"] == "warning")
        .unwrap();
    assert!(
        warning["message"]
            .as_str()
            .unwrap()
            .contains("deterministic planner")
    );
    let generated = frames
        .iter()
        .find(|frame| frame["type"] == "plan_generated")
        .unwrap();
    assert_eq!(generated["payload"]["plannerRuntime"], "deterministic");
    assert_eq!(frames.last().unwrap()["type"], "complete");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_planner_choice_is_a_clear_error_at_start() {
    let server = ScriptedLlmServer::start().await.unwrap();
    let output = baton_with(
        Some(&server),
        &["run", "registry/examples/social-post-new-case.json"],
        &[("BATON_PLANNER", "oracle")],
    )
    .await;
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8(output.stderr)
            .unwrap()
            .contains("BATON_PLANNER")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_parked_on_sqlite_stays_in_the_file_after_the_process_ends() {
    let server = ScriptedLlmServer::start().await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let data_home = data.path().to_str().unwrap();
    let output = baton_with(
        Some(&server),
        &[
            "run",
            fixture("human-review.json").to_str().unwrap(),
            "--format",
            "ndjson",
            "--store",
            "sqlite",
        ],
        &[("XDG_DATA_HOME", data_home)],
    )
    .await;
    assert_eq!(output.status.code(), Some(4), "{output:?}");
    let printed: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let run_id = printed[0]["runId"].as_str().unwrap();
    let file = data.path().join("baton/runs.sqlite3");
    let store = baton_sqlite::SqliteStore::open(&file).unwrap();

    let stored = store
        .load_run(RunKey::new("local", run_id))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.state.status().as_str(), "awaiting_human");
    let kept = store
        .read_events(RunKey::new("local", run_id), 0, 10_000)
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&kept).unwrap(),
        Value::Array(printed),
        "the file holds every frame the run printed"
    );

    let refused = baton(Some(&server), &["run", "x.json", "--store", "postgres"]).await;
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8(refused.stderr)
            .unwrap()
            .contains("use memory, sqlite, sqlite:PATH or dynamodb")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_parked_run_is_listed_and_resumed_by_later_processes() {
    let server = ScriptedLlmServer::start().await.unwrap();
    let folder = tempfile::tempdir().unwrap();
    let store = format!(
        "--store=sqlite:{}",
        folder.path().join("runs.sqlite3").display()
    );
    let parked = baton(
        Some(&server),
        &[
            "run",
            fixture("human-review.json").to_str().unwrap(),
            "--format",
            "ndjson",
            &store,
        ],
    )
    .await;
    assert_eq!(parked.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&parked.stderr).contains("baton resume"));

    let listed = baton(None, &["tasks", "--format", "json", &store]).await;
    assert_eq!(listed.status.code(), Some(0), "{listed:?}");
    let tasks: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let task = &tasks.as_array().unwrap()[0];
    assert_eq!(tasks.as_array().unwrap().len(), 1);
    let run_id = task["runId"].as_str().unwrap();
    assert_eq!(
        task["taskId"],
        format!("{run_id}:{}", task["nodeId"].as_str().unwrap())
    );
    assert!(
        task["dueAt"].as_str().is_some_and(|due| due.ends_with('Z')),
        "the task's SLA is listed: {task}"
    );

    // An answer that breaks the contract: exit 2 naming the path, nothing changes.
    let wrong = folder.path().join("wrong.json");
    std::fs::write(&wrong, r#"{"positioning": 7}"#).unwrap();
    // With the model configured (as a user would have it), so the refusal is about the answer.
    let refused = baton(
        Some(&server),
        &[
            "resume",
            run_id,
            "--output",
            wrong.to_str().unwrap(),
            &store,
        ],
    )
    .await;
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("$.positioning"));
    let still = baton(None, &["tasks", "--format", "json", &store]).await;
    assert_eq!(
        serde_json::from_slice::<Value>(&still.stdout).unwrap(),
        tasks
    );

    let answer = folder.path().join("answer.json");
    let output = scripted_llm::generate_instance(&task["outputSchema"], "answer");
    std::fs::write(&answer, output.to_string()).unwrap();
    let resumed = baton(
        Some(&server),
        &[
            "resume",
            run_id,
            "--output",
            answer.to_str().unwrap(),
            "--format",
            "ndjson",
            &store,
        ],
    )
    .await;
    assert_eq!(resumed.status.code(), Some(0), "{resumed:?}");
    let frames: Vec<Value> = String::from_utf8(resumed.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(types(&frames)[..2], ["plan_generated", "node_complete"]);
    assert_eq!(story(&frames)[0]["payload"]["metadata"]["resumed"], true);
    assert_eq!(types(&frames).last(), Some(&"complete"));
    assert_eq!(story(&frames)[1]["payload"]["output"], output);
    let listed_runs = baton(None, &["runs", "--format", "json", &store]).await;
    let runs: Value = serde_json::from_slice(&listed_runs.stdout).unwrap();
    assert_eq!(runs[0]["runId"], run_id);
    assert_eq!(runs[0]["status"], "completed");
    let none_left = baton(None, &["tasks", "--format", "json", &store]).await;
    assert_eq!(
        serde_json::from_slice::<Value>(&none_left.stdout).unwrap(),
        serde_json::json!([])
    );
}

/// The newest run in `store` (`baton runs --format json`).
async fn newest_run_id(store: &str) -> String {
    let listed = baton(None, &["runs", "--format", "json", store]).await;
    let runs: Value = serde_json::from_slice(&listed.stdout).unwrap();
    runs[0]["runId"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn approvals_and_pauses_continue_in_later_processes() {
    let server = ScriptedLlmServer::start().await.unwrap();
    let folder = tempfile::tempdir().unwrap();
    let store = format!(
        "--store=sqlite:{}",
        folder.path().join("runs.sqlite3").display()
    );
    let mut envelope: Value = serde_json::from_str(
        &std::fs::read_to_string(baton_test_support::plain_example_file(
            "seed-10.1-sample-envelope.json",
        ))
        .unwrap(),
    )
    .unwrap();
    for (name, action) in [
        (
            "gated",
            serde_json::json!({"type": "hitl", "rationale": "Go ahead?"}),
        ),
        ("paused", serde_json::json!({"type": "pause"})),
    ] {
        envelope["policies"]["runtime"] =
            serde_json::json!([{"id": name, "trigger": {"kind": "onStart"}, "action": action}]);
        let path = folder.path().join(format!("{name}.json"));
        std::fs::write(&path, envelope.to_string()).unwrap();
        let held = baton(
            Some(&server),
            &["run", path.to_str().unwrap(), "--format", "ndjson", &store],
        )
        .await;
        assert_eq!(held.status.code(), Some(4), "{held:?}");
        let hint = String::from_utf8_lossy(&held.stderr).to_string();
        let run_id = newest_run_id(&store).await;
        let continued = if name == "gated" {
            assert!(hint.contains("baton resolve"), "{hint}");
            // The tasks list shows the approval: its prompt and how to decide.
            let listed = baton(Some(&server), &["tasks", &store]).await;
            let listing = String::from_utf8_lossy(&listed.stdout).to_string();
            assert!(listing.contains("approval"), "{listing}");
            assert!(listing.contains("Go ahead?"), "{listing}");
            assert!(
                listing.contains(&format!("baton resolve {run_id} --approve|--reject")),
                "{listing}"
            );
            baton(
                Some(&server),
                &[
                    "resolve",
                    &run_id,
                    "--approve",
                    "--note",
                    "fine",
                    "--format",
                    "ndjson",
                    &store,
                ],
            )
            .await
        } else {
            assert!(hint.contains("baton resume"), "{hint}");
            baton(
                Some(&server),
                &["resume", &run_id, "--format", "ndjson", &store],
            )
            .await
        };
        assert_eq!(continued.status.code(), Some(0), "{continued:?}");
        let frames: Vec<Value> = String::from_utf8(continued.stdout)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert!(
            frames.iter().any(|frame| frame["type"] == "plan_generated"
                && frame["payload"]["metadata"]["resumed"] == true),
            "{name}: {:?}",
            types(&frames)
        );
        assert_eq!(types(&frames).last(), Some(&"complete"), "{name}");
        if name == "gated" {
            assert!(types(&frames).contains(&"hitl_resolved"));
            // Resolved once: a second resolution changes nothing.
            let again = baton(Some(&server), &["resolve", &run_id, "--reject", &store]).await;
            assert_eq!(again.status.code(), Some(3), "{again:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn judge_verify_names_the_first_broken_link() {
    use baton_judge::transcript::{
        ConversationMessage, EvaluationTranscript, MessagePhase, MessageRole,
    };
    let mut transcript = EvaluationTranscript::new("run_judge");
    for (round, id, content) in [
        (0, "m1", "score 9"),
        (0, "m2", "score 8"),
        (1, "m3", "revised to 8.5"),
    ] {
        transcript.append(
            round,
            ConversationMessage {
                id: id.into(),
                role: MessageRole::Agent,
                agent_id: Some("judge-a".into()),
                model: None,
                content: content.into(),
                timestamp: 1_730_050_000_000,
                phase: if round == 0 {
                    MessagePhase::Scoring
                } else {
                    MessagePhase::Discussion
                },
                round: Some(round),
                ledger_tx_id: None,
                previous_hash: String::new(),
                hash: String::new(),
            },
        );
    }
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("evaluation.json");
    let output = serde_json::json!({"requestId": "req-001", "transcript": transcript});
    std::fs::write(&path, serde_json::to_string_pretty(&output).unwrap()).unwrap();
    let verified = baton(None, &["judge", "verify", path.to_str().unwrap()]).await;
    assert_eq!(verified.status.code(), Some(0), "{verified:?}");
    assert!(String::from_utf8_lossy(&verified.stdout).contains("3 messages"));

    let tampered = std::fs::read_to_string(&path)
        .unwrap()
        .replace("score 8", "score 9");
    std::fs::write(&path, tampered).unwrap();
    let broken = baton(None, &["judge", "verify", path.to_str().unwrap()]).await;
    assert_eq!(broken.status.code(), Some(3), "{broken:?}");
    let said = String::from_utf8_lossy(&broken.stderr);
    assert!(said.contains("`m2`") && said.contains("round 0"), "{said}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_clarifying_question_is_answered_from_a_later_process() {
    let server = ScriptedLlmServer::start().await.unwrap();
    server.push_behaviors([Behavior::Content {
        content: serde_json::json!({"clarify": {"question": "Which market first?"}}).to_string(),
    }]);
    let folder = tempfile::tempdir().unwrap();
    // The registry as data: one capability may ask questions.
    let registry = serve_support::people::registry_with_a_clarifying_capability(folder.path());
    let store = format!(
        "--store=sqlite:{}",
        folder.path().join("runs.sqlite3").display()
    );
    let registry_argument = format!("--registry={}", registry.display());
    let envelope = baton_test_support::plain_example_file("seed-10.1-sample-envelope.json");
    let asked = baton(
        Some(&server),
        &[
            "run",
            envelope.to_str().unwrap(),
            "--format",
            "ndjson",
            &store,
            &registry_argument,
        ],
    )
    .await;
    assert_eq!(asked.status.code(), Some(4), "{asked:?}");
    let hint = String::from_utf8_lossy(&asked.stderr).to_string();
    assert!(
        hint.contains("Which market first?") && hint.contains("--answer"),
        "{hint}"
    );
    let run_id = newest_run_id(&store).await;
    let answered = baton(
        Some(&server),
        &[
            "resume",
            &run_id,
            "--answer",
            "The Nordics",
            "--format",
            "ndjson",
            &store,
            &registry_argument,
        ],
    )
    .await;
    assert_eq!(answered.status.code(), Some(0), "{answered:?}");
    let frames: Vec<Value> = String::from_utf8(answered.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(types(&frames)[..2], ["hitl_resolved", "plan_generated"]);
    assert_eq!(types(&frames).last(), Some(&"complete"));
    assert!(
        server
            .requests()
            .iter()
            .any(|request| request.body.to_string().contains("The Nordics")),
        "the node ran again with the answer"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_judge_panel_runs_and_its_transcript_verifies() {
    let server = ScriptedLlmServer::start().await.unwrap();
    // Test double for the judges' model: three close scores (converged at once).
    server.push_behaviors([8.0, 8.5, 8.2].map(|score| Behavior::Content {
        content: serde_json::json!({"score": score, "feedback": "solid", "strengths": ["clear"], "improvements": []})
            .to_string(),
    }));
    let folder = tempfile::tempdir().unwrap();
    let request = folder.path().join("panel.json");
    std::fs::write(
        &request,
        serde_json::json!({
            "request": {"id": "req-cli", "content": "Baton runs plans one durable step at a time.",
                        "criteria": ["Accuracy", "Clarity"],
                        "selectedAgents": [
                            {"id": "a", "capabilities": {"systemPrompt": "You check facts."}},
                            {"id": "b", "paymentConfig": {"enabled": true}},
                            {"id": "c", "capabilities": {"modelName": "gpt-4.1-nano"}}
                        ]},
            "config": {"maxDiscussionRounds": 2, "roundTimeout": 30000, "consensusAlgorithm": "simple_average",
                       "enableDiscussion": true, "convergenceThreshold": 0.5, "outlierDetection": true}
        })
        .to_string(),
    )
    .unwrap();
    let judged = baton(
        Some(&server),
        &["judge", request.to_str().unwrap(), "--format", "ndjson"],
    )
    .await;
    assert_eq!(judged.status.code(), Some(0), "{judged:?}");
    let lines: Vec<Value> = String::from_utf8(judged.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "progress");
    // Every line is a frame of the event-frame schema (ids from 1): the
    // progress, then the `complete` whose output is the evaluation.
    let progress: Vec<&Value> = lines[..lines.len() - 1].iter().collect();
    assert!(progress.iter().all(|line| line["type"] == "progress"));
    baton_test_support::assert_frame_values_match_schemas(lines.iter());
    let ids: Vec<u64> = lines
        .iter()
        .map(|line| line["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, (1..=lines.len() as u64).collect::<Vec<_>>());
    assert_eq!(lines.last().unwrap()["type"], "complete");
    let evaluation = &lines.last().unwrap()["payload"]["output"];
    let consensus = &evaluation["consensus"];
    assert!((consensus["finalScore"].as_f64().unwrap() - (8.0 + 8.5 + 8.2) / 3.0).abs() < 1e-9);
    assert_eq!(consensus["convergenceRounds"], 0);
    assert_eq!(evaluation["individualResults"].as_array().unwrap().len(), 3);
    assert_eq!(server.request_count(), 3, "one call per judge");
    // Judge c asks its own catalog model; the others the default.
    let asked: Vec<String> = server
        .requests()
        .iter()
        .map(|request| request.model.clone())
        .collect();
    assert_eq!(
        asked
            .iter()
            .filter(|model| *model == "gpt-4.1-nano")
            .count(),
        1,
        "{asked:?}"
    );
    let judge_c = evaluation["individualResults"]
        .as_array()
        .unwrap()
        .iter()
        .find(|result| result["agentId"] == "c")
        .unwrap();
    assert_eq!(judge_c["model"], "gpt-4.1-nano");
    let saved = folder.path().join("evaluation.json");
    std::fs::write(&saved, evaluation.to_string()).unwrap();
    let verified = baton(None, &["judge", "verify", saved.to_str().unwrap()]).await;
    assert_eq!(verified.status.code(), Some(0), "{verified:?}");
    let refused = folder.path().join("empty.json");
    std::fs::write(&refused, r#"{"request": {"id": "x", "content": "c", "selectedAgents": []}, "config": {"maxDiscussionRounds": 1, "roundTimeout": 1, "consensusAlgorithm": "median", "enableDiscussion": false, "convergenceThreshold": 0, "outlierDetection": false}}"#).unwrap();
    let invalid = baton(None, &["judge", refused.to_str().unwrap()]).await;
    assert_eq!(invalid.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&invalid.stderr).contains("$.request.selectedAgents"));
    // A judge naming a model the catalog lacks: exit 2 before any call.
    let mut unknown: Value =
        serde_json::from_str(&std::fs::read_to_string(&request).unwrap()).unwrap();
    unknown["request"]["selectedAgents"][0]["capabilities"]["modelName"] = "no-such-model".into();
    std::fs::write(&request, unknown.to_string()).unwrap();
    let before = server.request_count();
    let refused_model = baton(Some(&server), &["judge", request.to_str().unwrap()]).await;
    assert_eq!(refused_model.status.code(), Some(2), "{refused_model:?}");
    let stderr = String::from_utf8_lossy(&refused_model.stderr);
    assert!(
        stderr.contains("$.request.selectedAgents[0].capabilities.modelName")
            && stderr.contains("`no-such-model`"),
        "{stderr}"
    );
    assert_eq!(server.request_count(), before, "nothing was asked");
}

/// A reviewer's answer scoring `score` (0–1), valid for the registry's
/// facets: the reviewer declares `partialOutputs` and nothing downstream
/// reads its `recommendationSet`, so it is asked for its findings and
/// acceptance report alone.
fn qa_answer(score: f64) -> String {
    let facet_schema = |name: &str| -> Value {
        let file = repository_root().join(format!("registry/facets/{name}.json"));
        serde_json::from_str::<Value>(&std::fs::read_to_string(file).unwrap()).unwrap()["schema"]
            .clone()
    };
    let mut findings = scripted_llm::generate_instance(&facet_schema("qaFindings"), "qa");
    findings["overallScore"] = serde_json::json!(score);
    serde_json::json!({"qaFindings": findings,
                       "acceptanceReport": [{"criterion": "names the product", "pass": score >= 0.8, "evidence": "first line"}]})
    .to_string()
}

/// Runs seed 10.1 under `qualityThreshold` 0.8 and `executionDepth`, with
/// `reviewer` required, against `server`.
async fn run_reviewed(
    server: &ScriptedLlmServer,
    depth: u32,
    reviewer: &str,
) -> (i32, Vec<Value>, String) {
    let folder = tempfile::tempdir().unwrap();
    let mut envelope: Value = serde_json::from_str(
        &std::fs::read_to_string(baton_test_support::plain_example_file(
            "seed-10.1-sample-envelope.json",
        ))
        .unwrap(),
    )
    .unwrap();
    envelope["constraints"] = serde_json::json!({"qualityThreshold": 0.8, "executionDepth": depth});
    envelope["policies"]["planner"] = serde_json::json!({"selection": {"require": [reviewer]}});
    let path = folder.path().join("reviewed.json");
    std::fs::write(&path, envelope.to_string()).unwrap();
    run_ndjson(server, &path).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_draft_below_the_quality_threshold_is_revised_once() {
    let server = ScriptedLlmServer::start().await.unwrap();
    // Test double for the model: the brief and the draft are schema-shaped;
    // the reviewer scores 0.5, then 0.9 after the revision.
    server.push_behaviors([
        Behavior::Valid,
        Behavior::Valid,
        Behavior::Content {
            content: qa_answer(0.5),
        },
        Behavior::Valid,
        Behavior::Content {
            content: qa_answer(0.9),
        },
    ]);
    let (code, frames, _) = run_reviewed(&server, 3, "QualityAssurance.contentReview").await;
    assert_eq!(code, 0, "{:?}", types(&frames));
    let updates: Vec<&Value> = frames
        .iter()
        .filter(|frame| frame["type"] == "plan_updated")
        .collect();
    assert_eq!(updates.len(), 1, "exactly one revision");
    assert_eq!(
        updates[0]["payload"]["trigger"]["kind"],
        "quality_below_threshold"
    );
    let quality = &frames.last().unwrap()["payload"]["quality"];
    assert_eq!(quality["drafts"], 2);
    assert_eq!(quality["passed"], true);
    assert_eq!(
        frames.last().unwrap()["payload"]["acceptanceReport"][0]["pass"],
        true
    );
    assert_eq!(server.request_count(), 5, "the brief is not written again");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_first_draft_that_passes_review_is_delivered_as_is() {
    let server = ScriptedLlmServer::start().await.unwrap();
    server.push_behaviors([
        Behavior::Valid,
        Behavior::Valid,
        Behavior::Content {
            content: qa_answer(0.95),
        },
    ]);
    let (code, frames, _) = run_reviewed(&server, 3, "QualityAssurance.contentReview").await;
    assert_eq!(code, 0, "{:?}", types(&frames));
    assert!(!types(&frames).contains(&"plan_updated"), "no revision");
    let quality = &frames.last().unwrap()["payload"]["quality"];
    assert_eq!(quality["drafts"], 1);
    assert_eq!(quality["passed"], true);
    assert_eq!(server.request_count(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn at_the_depth_limit_the_best_draft_is_delivered_best_effort() {
    let server = ScriptedLlmServer::start().await.unwrap();
    server.push_behaviors([
        Behavior::Valid,
        Behavior::Valid,
        Behavior::Content {
            content: qa_answer(0.6),
        },
        Behavior::Valid,
        Behavior::Content {
            content: qa_answer(0.4),
        },
    ]);
    let (code, frames, _) = run_reviewed(&server, 2, "QualityAssurance.contentReview").await;
    assert_eq!(
        code,
        0,
        "best effort is still a result: {:?}",
        types(&frames)
    );
    let warning = frames
        .iter()
        .find(|frame| frame["type"] == "warning")
        .expect("a warning");
    assert_eq!(warning["payload"]["code"], "execution_depth_reached");
    let complete = frames.last().unwrap();
    assert_eq!(complete["payload"]["quality"]["passed"], false);
    assert_eq!(complete["payload"]["quality"]["drafts"], 2);
    // The first draft (0.6) is delivered, not the last (0.4).
    let first_draft = frames
        .iter()
        .find(|frame| {
            frame["type"] == "node_complete"
                && frame["payload"]["outputFacets"] == serde_json::json!(["copyVariants"])
        })
        .expect("the first draft");
    assert_eq!(
        complete["payload"]["output"]["copyVariants"],
        first_draft["payload"]["output"]["copyVariants"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reviewer_that_cannot_run_is_an_explained_plan_rejection() {
    let server = ScriptedLlmServer::start().await.unwrap();
    let (code, frames, _) = run_reviewed(&server, 2, "director.SocialPostingReview").await;
    assert_eq!(code, 3);
    let rejected = frames
        .iter()
        .find(|frame| frame["type"] == "plan_rejected")
        .expect("plan_rejected");
    let failure = &rejected["payload"]["failures"][0];
    assert_eq!(failure["cause"], "missing_producer");
    assert!(
        failure["suggestion"]
            .as_str()
            .is_some_and(|text| text.contains("post_context")),
        "the explanation names what is missing: {failure}"
    );
    assert_eq!(server.request_count(), 0, "nothing ran");
}

/// `baton run ENVELOPE --format hooks [--store memory]`: (exit code, hook events).
async fn run_hooks(server: &ScriptedLlmServer, envelope: &Path) -> (i32, Vec<Value>) {
    let output = baton(
        Some(server),
        &[
            "run",
            envelope.to_str().unwrap(),
            "--format",
            "hooks",
            "--store",
            "memory",
        ],
    )
    .await;
    let events = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    (output.status.code().unwrap(), events)
}

#[tokio::test(flavor = "multi_thread")]
async fn hooks_render_the_run_and_orchestrator_complete_comes_last() {
    let server = ScriptedLlmServer::start().await.unwrap();
    let envelope = baton_test_support::plain_example_file("seed-10.1-sample-envelope.json");
    let (code, events) = run_hooks(&server, &envelope).await;
    assert_eq!(code, 0);
    let names: Vec<&str> = events
        .iter()
        .map(|event| event["event"].as_str().unwrap())
        .collect();
    assert_eq!(names.first(), Some(&"prompt:submit"));
    assert_eq!(
        &names[names.len() - 2..],
        ["prompt:complete", "orchestrator:complete"]
    );
    let requests = names
        .iter()
        .filter(|name| **name == "provider:request")
        .count();
    assert_eq!(
        requests,
        server.request_count(),
        "one provider:request per model call"
    );
    assert_eq!(
        events.last().unwrap()["data"],
        serde_json::json!({"orchestrator": "baton", "turn_count": requests, "status": "success"})
    );
    assert!(names.contains(&"provider:stream") && names.contains(&"provider:response"));
    // A run that waits for a person ends its hook stream too.
    let (parked, events) = run_hooks(&server, &fixture("human-review.json")).await;
    assert_eq!(parked, 4);
    assert_eq!(events.last().unwrap()["event"], "orchestrator:complete");
    assert_eq!(events.last().unwrap()["data"]["status"], "incomplete");
}

/// `baton chat`: the orchestrator's chat agent searches the registry with
/// its tool (the real builtin, through the step engine), answers, and the
/// next `baton chat --thread` (a new process, the same SQLite file) sees
/// the first exchange. The model is the scripted server (a test double).
#[tokio::test(flavor = "multi_thread")]
async fn baton_chat_answers_with_a_tool_and_continues_a_thread_across_processes() {
    let server = ScriptedLlmServer::start().await.unwrap();
    server.push_behaviors([
        Behavior::ToolCalls {
            calls: vec![scripted_llm::ScriptedToolCall {
                name: "registry_search".into(),
                arguments: json!({"query": "review", "kind": "capability"}),
            }],
        },
        Behavior::Content {
            content: "I can review content with a panel of judges.".into(),
        },
        Behavior::Content {
            content: "A few minutes.".into(),
        },
    ]);
    let output = baton(
        Some(&server),
        &["chat", "-m", "Can you review things?", "--format", "ndjson"],
    )
    .await;
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let frames: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    baton_test_support::assert_frame_values_match_schemas(frames.iter());
    let agent_frames: Vec<&str> = frames
        .iter()
        .filter_map(|frame| frame["type"].as_str())
        .filter(|kind| {
            [
                "tool_call",
                "tool_result",
                "agent_state",
                "message",
                "complete",
            ]
            .contains(kind)
        })
        .collect();
    assert_eq!(
        agent_frames,
        [
            "agent_state",
            "tool_call",
            "agent_state",
            "tool_result",
            "agent_state",
            "message",
            "agent_state",
            "complete"
        ]
    );
    let last_state = frames
        .iter()
        .rfind(|frame| frame["type"] == "agent_state")
        .unwrap();
    assert_eq!(
        last_state["payload"]["state"], "waiting_on_user",
        "once it has answered, the agent waits for the person"
    );
    let result = frames
        .iter()
        .find(|frame| frame["type"] == "tool_result")
        .unwrap();
    let found = result["payload"]["result"]["matches"].as_array().unwrap();
    assert!(!found.is_empty(), "the registry has reviewers: {result}");
    let thread = stderr
        .lines()
        .find_map(|line| line.strip_prefix("baton: thread "))
        .expect("the thread id on stderr")
        .to_string();
    let complete = frames.last().unwrap();
    assert_eq!(complete["payload"]["output"]["threadId"], thread.as_str());

    let output = baton(
        Some(&server),
        &[
            "chat",
            "-m",
            "How long?",
            "--thread",
            &thread,
            "--format",
            "ndjson",
        ],
    )
    .await;
    assert_eq!(output.status.code(), Some(0));
    let last = server.requests().last().unwrap().body.clone();
    let contents: Vec<&str> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|message| message["content"].as_str())
        .collect();
    assert!(contents.contains(&"Can you review things?"), "{contents:?}");
    assert!(contents.contains(&"I can review content with a panel of judges."));
    assert_eq!(contents.last(), Some(&"How long?"));

    let unknown = baton(
        Some(&server),
        &["chat", "-m", "hi", "--thread", "thread_nope"],
    )
    .await;
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        String::from_utf8(unknown.stderr)
            .unwrap()
            .contains("no thread `thread_nope`")
    );
}

/// Interactive `baton chat`: each line is a message on one thread; an empty
/// line gets the clarifying question without a model call.
#[tokio::test(flavor = "multi_thread")]
async fn interactive_baton_chat_keeps_one_thread() {
    let server = ScriptedLlmServer::start().await.unwrap();
    server.push_behaviors([
        Behavior::Content {
            content: "Hello!".into(),
        },
        Behavior::Content {
            content: "Still here.".into(),
        },
    ]);
    let data_home = std::env::temp_dir().join(format!("baton-cli-chat-{}", std::process::id()));
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["chat", "--store", "memory"])
        .current_dir(repository_root())
        .env("XDG_DATA_HOME", data_home)
        .env_remove("BATON_LLM")
        .env_remove("BATON_REGISTRY_DIR")
        .env("BATON_LLM_BASE_URL", server.base_url())
        .env("BATON_LLM_MODEL", "gpt-4o-mini")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use tokio::io::AsyncWriteExt;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(b"hi\n\nare you there?\nexit\n")
            .await
            .unwrap();
    }
    let output = child.wait_with_output().await.unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("Hello!") && stdout.contains("Still here."),
        "{stdout}"
    );
    assert!(stdout.contains("Your message was empty"), "{stdout}");
    assert_eq!(server.request_count(), 2, "the empty line called no model");
    let stderr = String::from_utf8(output.stderr).unwrap();
    let threads: std::collections::BTreeSet<&str> = stderr
        .lines()
        .filter_map(|line| line.strip_prefix("baton: thread "))
        .collect();
    assert_eq!(threads.len(), 1, "one thread: {stderr}");
    let last = server.requests().last().unwrap().body.clone();
    assert_eq!(
        last["messages"].as_array().unwrap().len(),
        4,
        "system, the first exchange (the blank one is left out), the new message: {last}"
    );
}

/// An envelope preferring a catalog model of the shipped registry's
/// `openai` provider (its endpoint `BATON_LLM_BASE_URL`, the double): the
/// real binary routes each model node's request there with that model's id,
/// not the default `BATON_LLM_MODEL`, and `node_start` and `baton plan` name
/// it. A model the
/// catalog lacks is refused before any run (exit 2, the JSON path).
#[tokio::test(flavor = "multi_thread")]
async fn a_preferred_catalog_model_is_the_one_each_node_asks() {
    let server = ScriptedLlmServer::start().await.unwrap();
    let mut envelope: Value = serde_json::from_str(
        &std::fs::read_to_string(baton_test_support::plain_example_file(
            "seed-10.1-sample-envelope.json",
        ))
        .unwrap(),
    )
    .unwrap();
    envelope["constraints"]["preferredModels"] = json!(["gpt-4.1-nano"]);
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("envelope.json");
    std::fs::write(&path, envelope.to_string()).unwrap();
    let (code, frames, stderr) = run_ndjson(&server, &path).await;
    assert_eq!(code, 0, "{stderr}");
    let asked: Vec<String> = server
        .requests()
        .iter()
        .map(|request| {
            request.body["model"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert!(
        !asked.is_empty() && asked.iter().all(|model| *model == "gpt-4.1-nano"),
        "every request asked the preferred model: {asked:?}"
    );
    let started: Vec<&Value> = frames
        .iter()
        .filter(|frame| frame["type"] == "node_start" && frame["payload"]["executorType"] == "ai")
        .collect();
    assert!(!started.is_empty());
    for frame in started {
        assert_eq!(frame["payload"]["model"], "gpt-4.1-nano", "{frame}");
    }

    // `baton plan` shows the choice without calling anything.
    let planned = baton(None, &["plan", path.to_str().unwrap()]).await;
    assert_eq!(planned.status.code(), Some(0), "{planned:?}");
    let report: Value = serde_json::from_slice(&planned.stdout).unwrap();
    let models: Vec<&Value> = report["plan"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| &node["model"])
        .collect();
    assert!(!models.is_empty());
    for model in models {
        assert_eq!(
            model,
            &json!({"name": "gpt-4.1-nano", "provider": "openai", "modelId": "gpt-4.1-nano",
                    "strictOutput": true, "promptCache": true})
        );
    }

    envelope["constraints"]["preferredModels"] = json!(["no-such-model"]);
    std::fs::write(&path, envelope.to_string()).unwrap();
    let (code, _, stderr) = run_ndjson(&server, &path).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("$.constraints.preferredModels[0]") && stderr.contains("`no-such-model`"),
        "{stderr}"
    );
}

/// `baton history` lists a finished run's checkpoints; `baton fork` at its
/// plan version with nothing changed reuses every node (no model call) and
/// completes; a plan version the run does not hold exits 2 naming the path.
/// The model endpoint is the scripted double.
#[tokio::test(flavor = "multi_thread")]
async fn history_lists_the_checkpoints_and_a_fork_reuses_every_node() {
    let server = ScriptedLlmServer::start().await.unwrap();
    let (code, frames, stderr) = run_ndjson(
        &server,
        &repository_root().join("registry/examples/seed-10.0.1-stream-contract-variants.json"),
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    let run_id = frames[0]["runId"].as_str().unwrap().to_string();
    let history = baton(Some(&server), &["history", &run_id]).await;
    assert_eq!(history.status.code(), Some(0));
    let listed = String::from_utf8(history.stdout).unwrap();
    assert!(listed.contains("plan v1  plan generated"), "{listed}");
    assert!(listed.contains("completed"), "{listed}");

    let calls = server.request_count();
    let refused = baton(Some(&server), &["fork", &run_id, "--at", "9"]).await;
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8(refused.stderr)
            .unwrap()
            .contains("$.at.planVersion"),
        "the refusal names its path"
    );
    let forked = baton(
        Some(&server),
        &["fork", &run_id, "--at", "1", "--format", "ndjson"],
    )
    .await;
    let stderr = String::from_utf8(forked.stderr).unwrap();
    assert_eq!(forked.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("forked from {run_id}")),
        "{stderr}"
    );
    let fork_frames: Vec<Value> = String::from_utf8(forked.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(fork_frames.last().unwrap()["type"], "complete");
    assert_ne!(fork_frames[0]["runId"], run_id.as_str());
    assert_eq!(server.request_count(), calls, "every node was reused");
}

/// `baton draft`: three messages (an objective, the inputs it asks for,
/// `yes`) draft an envelope into `--out`; `baton run` then completes it
/// with contract-valid output (the scripted model answering). Piped
/// paragraphs work the same, and a conversation that stops early exits 2
/// naming where it stopped.
#[tokio::test(flavor = "multi_thread")]
async fn baton_draft_builds_an_envelope_in_three_messages_that_then_runs() {
    let objective = "Recommend a market positioning for Acme Analytics and the messaging stack that expresses it.";
    let inputs = "positioning_context.company_name: Acme Analytics\npositioning_context.company_url: https://acmeanalytics.io\npositioning_context.competing_factors: Data reliability, Ease of integration";
    let folder = tempfile::tempdir().unwrap();
    let drafted = folder.path().join("drafted.json");
    let output = baton(
        None,
        &[
            "draft",
            "-m",
            objective,
            "-m",
            inputs,
            "-m",
            "yes",
            "--out",
            drafted.to_str().unwrap(),
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("What should the run produce"), "{stderr}");
    assert!(stderr.contains("company_name (required)"), "{stderr}");
    assert!(stderr.contains("Here is your envelope"), "{stderr}");
    let envelope: Value =
        serde_json::from_str(&std::fs::read_to_string(&drafted).unwrap()).unwrap();
    assert_eq!(
        envelope["inputs"]["positioning_context"]["competing_factors"],
        json!(["Data reliability", "Ease of integration"])
    );

    let server = ScriptedLlmServer::start().await.unwrap();
    let (code, frames, stderr) = run_ndjson(&server, &drafted).await;
    assert_eq!(code, 0, "{stderr}");
    let complete = frames.last().unwrap();
    assert_eq!(complete["type"], "complete", "{complete}");
    let output_schema = envelope["outputContract"]["schema"].clone();
    let validator = compile_schema(&output_schema, "$").unwrap();
    let violations = collect_violations(&validator, &complete["payload"]["output"]);
    assert!(violations.is_empty(), "{violations:?}");

    // The same conversation piped, one paragraph per message, as JSON lines.
    let mut piped = tokio::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["draft", "--json"])
        .current_dir(repository_root())
        .env_remove("BATON_REGISTRY_DIR")
        .env_remove("BATON_LLM_BASE_URL")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use tokio::io::AsyncWriteExt;
        let mut stdin = piped.stdin.take().unwrap();
        stdin
            .write_all(format!("{objective}\n\n{inputs}\n\nyes\n").as_bytes())
            .await
            .unwrap();
    }
    let finished = piped.wait_with_output().await.unwrap();
    assert_eq!(
        finished.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&finished.stderr)
    );
    let turns: Vec<Value> = String::from_utf8(finished.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let stages: Vec<&str> = turns
        .iter()
        .map(|turn| turn["stage"].as_str().unwrap())
        .collect();
    assert_eq!(
        stages,
        [
            "needs_objective",
            "needs_inputs",
            "awaiting_confirmation",
            "ready"
        ]
    );
    assert_eq!(turns[3]["envelope"], envelope);

    // Stopped before the inputs: not ready, exit 2, the stage named.
    let early = baton(None, &["draft", "-m", objective]).await;
    assert_eq!(early.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&early.stderr);
    assert!(stderr.contains("`needs_inputs`"), "{stderr}");
    assert!(early.stdout.is_empty());
}
