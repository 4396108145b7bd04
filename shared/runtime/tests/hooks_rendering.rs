//! The hooks rendering of a real run: a two-turn agent session (one tool
//! call, then the answer) on the real engine, step service and in-memory
//! store, its frames rendered by `HookRenderer`. The model and the tool's
//! endpoint are the test doubles of `baton_test_support::agent_session`;
//! and a two-judge panel, each judge's call rendered as a request (its
//! messages read from the panel round) and a response with usage, against a
//! test double scoring every judge.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;

use baton_core::state::run::RunStatus;
use baton_core::wire::hooks::HookRenderer;
use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::workers::LocalRunner;
use baton_test_support::TestServices;
use baton_test_support::agent_session::{
    FixedLookup, OneLookupPerTurn, agent_envelope, agent_registry,
};

#[tokio::test(flavor = "multi_thread")]
async fn a_two_turn_agent_renders_two_requests_and_two_responses_with_usage() {
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(Arc::new(OneLookupPerTurn { turns: 2 }))
        .registry(agent_registry(2))
        .queue(queue.clone())
        .tools(Arc::new(FixedLookup { result_bytes: 40 }))
        .build()
        .services;
    let submitted = services.runs.submit("t", &agent_envelope()).await.unwrap();
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue,
    };
    let status = runner
        .run_until_settled("t", &submitted.run_id)
        .await
        .unwrap();
    assert_eq!(status, RunStatus::Completed);
    let frames = services
        .runs
        .read_all_events_after("t", &submitted.run_id, 0)
        .await
        .unwrap();
    baton_test_support::assert_frames_match_schemas(&frames);
    // As the SSE route and the CLI render hooks: a model node's
    // instructions filled in from the plan first.
    let mut renderer = HookRenderer::default();
    let mut events = Vec::new();
    for mut frame in frames {
        services.runs.fill_model_instructions("t", &mut frame).await;
        events.extend(renderer.render(&frame));
    }
    let named = |name: &str| -> Vec<&serde_json::Value> {
        events
            .iter()
            .filter(|event| event.event == name)
            .map(|event| &event.data)
            .collect()
    };
    let requests = named("provider:request");
    let responses = named("provider:response");
    assert_eq!(requests.len(), 2, "{events:#?}");
    assert_eq!(responses.len(), 2, "{events:#?}");
    for request in &requests {
        assert!(request.get("model").is_some(), "{request}");
        let messages = request["messages"].as_array().unwrap();
        assert_eq!(
            messages[0]["role"], "system",
            "the node's instructions first"
        );
    }
    let first = requests[0]["messages"].as_array().unwrap().len();
    let second = requests[1]["messages"].as_array().unwrap();
    assert_eq!(
        second.len(),
        first + 2,
        "the second turn also carries the first turn's call and its result"
    );
    assert_eq!(second[first]["toolCall"]["name"], "lookup");
    assert_eq!(second[first + 1]["role"], "tool");
    for response in &responses {
        assert!(
            response["usage"]["total"].as_u64().unwrap() > 0,
            "each response has its usage: {response}"
        );
        assert!(response["model"].is_string(), "{response}");
    }
    assert_eq!(responses[0]["response"]["toolCall"]["name"], "lookup");
    assert!(responses[1]["response"].is_string(), "the answer's text");
    let ended = named("orchestrator:complete");
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0]["turn_count"], 2);
    assert_eq!(ended[0]["status"], "success");
}

/// Test double for the judges' model endpoint: every judge scores 7, with
/// usage.
struct ScoringJudges;

#[async_trait::async_trait]
impl baton_runtime::ports::LlmProvider for ScoringJudges {
    fn model_name(&self) -> String {
        "judge-model".into()
    }
    async fn complete(
        &self,
        _request: &baton_core::state::context::ModelRequest,
        _deltas: tokio::sync::mpsc::UnboundedSender<baton_runtime::ports::ModelDelta>,
    ) -> Result<baton_runtime::ports::ModelAnswer, baton_runtime::error::LlmError> {
        Ok(baton_runtime::ports::ModelAnswer {
            content: serde_json::json!({"score": 7.0, "feedback": "clear", "strengths": [], "improvements": []})
                .to_string(),
            usage: baton_core::state::run::TokenUsage {
                prompt_tokens: 50,
                completion_tokens: 10,
                ..Default::default()
            },
            model: "judge-model".into(),
        })
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn each_judges_call_renders_as_a_request_with_its_messages_and_a_response_with_usage() {
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(Arc::new(ScoringJudges))
        .queue(queue.clone())
        .build()
        .services;
    let body = serde_json::json!({
        "request": {"id": "req-hooks", "content": "A claim to judge.",
                    "selectedAgents": [{"id": "a", "capabilities": {"systemPrompt": "You are judge a."}},
                                       {"id": "b", "capabilities": {"systemPrompt": "You are judge b."}}]},
        "config": {"maxDiscussionRounds": 1, "roundTimeout": 30000, "consensusAlgorithm": "median",
                   "enableDiscussion": false, "convergenceThreshold": 1.0, "outlierDetection": false}
    });
    let request = baton_judge::request::PanelRequest::parse(&body).unwrap();
    let entry = services.runs.panel_entry().unwrap();
    let submitted = services
        .runs
        .submit_evaluation("t", &entry, &request, &body)
        .await
        .unwrap();
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue,
    };
    let status = runner
        .run_until_settled("t", &submitted.run_id)
        .await
        .unwrap();
    assert_eq!(status, RunStatus::Completed);
    let frames = services
        .runs
        .read_all_events_after("t", &submitted.run_id, 0)
        .await
        .unwrap();
    baton_test_support::assert_frames_match_schemas(&frames);
    let mut renderer = HookRenderer::default();
    let mut events = Vec::new();
    for mut frame in frames {
        services.runs.fill_model_instructions("t", &mut frame).await;
        events.extend(renderer.render(&frame));
    }
    let judged: Vec<(&str, &serde_json::Value)> = events
        .iter()
        .filter(|event| event.data.get("judgeId").is_some())
        .map(|event| (event.event, &event.data))
        .collect();
    assert_eq!(
        judged.len(),
        4,
        "a request and a response per judge: {events:#?}"
    );
    for judge in ["a", "b"] {
        let request = judged
            .iter()
            .find(|(name, data)| *name == "provider:request" && data["judgeId"] == judge)
            .unwrap()
            .1;
        assert_eq!(request["model"], "judge-model");
        assert_eq!(request["iteration"], 0);
        let messages = request["messages"].as_array().unwrap();
        assert_eq!(messages[0]["role"], "system");
        assert!(
            messages[0]["content"]
                .as_str()
                .unwrap()
                .contains(&format!("You are judge {judge}.")),
            "{request}"
        );
        assert!(
            messages[1]["content"]
                .as_str()
                .unwrap()
                .contains("A claim to judge."),
            "{request}"
        );
        let response = judged
            .iter()
            .find(|(name, data)| *name == "provider:response" && data["judgeId"] == judge)
            .unwrap()
            .1;
        assert_eq!(response["response"]["score"], 7.0);
        assert_eq!(response["usage"]["total"], 60);
    }
    let ended = events.last().unwrap();
    assert_eq!(ended.event, "orchestrator:complete");
    assert_eq!(
        ended.data["turn_count"], 2,
        "both judges' calls are counted"
    );
    // The judges' tokens are the run's.
    let snapshot = services
        .runs
        .load("t", &submitted.run_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(snapshot.state.total_usage().total(), 120);
}

/// Test double for the judges' model endpoint: counts the calls it gets.
#[derive(Default)]
struct CountedJudges {
    calls: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl baton_runtime::ports::LlmProvider for CountedJudges {
    fn model_name(&self) -> String {
        "counted".into()
    }
    async fn complete(
        &self,
        request: &baton_core::state::context::ModelRequest,
        deltas: tokio::sync::mpsc::UnboundedSender<baton_runtime::ports::ModelDelta>,
    ) -> Result<baton_runtime::ports::ModelAnswer, baton_runtime::error::LlmError> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        ScoringJudges.complete(request, deltas).await
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn judges_whose_requests_exceed_their_window_are_left_out_without_a_call() {
    let queue = Arc::new(InMemoryStepQueue::new());
    let model = Arc::new(CountedJudges::default());
    let services = TestServices::with_model(model.clone())
        .queue(queue.clone())
        .build()
        .services;
    // Judge a answers on the catalog's 8,192-token local model (6,144 left
    // for a prompt); 40,000 characters are about 10,000 tokens. Judge b
    // is on the deployment's default (a 128,000-token window).
    let body = serde_json::json!({
        "request": {"id": "req-long", "content": "x".repeat(40_000),
                    "selectedAgents": [{"id": "a", "capabilities": {"modelName": "local:Smollm2 135M 8k Lc100K Mix1 Ep2"}},
                                       {"id": "b"}]},
        "config": {"maxDiscussionRounds": 1, "roundTimeout": 30000, "consensusAlgorithm": "median",
                   "enableDiscussion": false, "convergenceThreshold": 1.0, "outlierDetection": false}
    });
    let request = baton_judge::request::PanelRequest::parse(&body).unwrap();
    let entry = services.runs.panel_entry().unwrap();
    let submitted = services
        .runs
        .submit_evaluation("t", &entry, &request, &body)
        .await
        .unwrap();
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue,
    };
    let status = runner
        .run_until_settled("t", &submitted.run_id)
        .await
        .unwrap();
    assert_eq!(status, RunStatus::Completed, "judge b's verdict stands");
    assert_eq!(
        model.calls.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "only judge b was asked: a's request was over its window"
    );
    let frames = services
        .runs
        .read_all_events_after("t", &submitted.run_id, 0)
        .await
        .unwrap();
    baton_test_support::assert_frames_match_schemas(&frames);
    let left_out: Vec<&str> = frames
        .iter()
        .filter(|frame| frame.event_type.as_str() == "warning")
        .filter_map(|frame| frame.message.as_deref())
        .filter(|message| message.contains("context window"))
        .collect();
    assert_eq!(left_out.len(), 1, "{left_out:?}");
    assert!(
        left_out[0].contains("judge a left out of round 0"),
        "{left_out:?}"
    );
    assert!(left_out[0].contains("over the 6144"), "{left_out:?}");
}
