//! Models chosen per node, in the documented order (`baton_core::planning::model_choice`):
//! a capability pinned to a model, an envelope preferring another, and a
//! node whose capability names none. Each node's request reaches the model
//! the order picks, through the `ModelRouter` (one test double per
//! provider, standing in for the providers' endpoints, records what it was
//! asked); `plan_generated` and `node_start` name the model. An envelope
//! naming a model the catalog does not have, or one without structured
//! output, is refused at submission with its JSON path, and a capability
//! naming an unknown model fails the registry load.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunStatus, TokenUsage};
use baton_runtime::error::{LlmError, RuntimeError};
use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::models::router::{ModelRouter, ProviderRoute};
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use baton_runtime::registry_loader::load_registry;
use baton_runtime::workers::LocalRunner;
use baton_test_support::{TestServices, example_envelope, repository_path};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

const PINNED_CAPABILITY: &str = "StrategyManager.writerBrief";
const FREE_CAPABILITY: &str = "ContentGenerator.copyVariants";

/// What a provider double was asked: (schema name, model id).
type Asked = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// Test double for one provider's endpoint: answers every request with a
/// schema-shaped instance and records (schema name, model id asked for).
struct RecordingProvider {
    name: &'static str,
    asked: Asked,
}

#[async_trait]
impl LlmProvider for RecordingProvider {
    fn model_name(&self) -> String {
        self.name.into()
    }
    async fn complete(
        &self,
        request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        let model_id = request.model.as_ref().map(|target| target.model_id.clone());
        self.asked
            .lock()
            .unwrap()
            .push((request.schema_name.clone(), model_id.clone()));
        Ok(ModelAnswer {
            content: scripted_llm::generate_instance(&request.output_schema, "specialist")
                .to_string(),
            usage: TokenUsage::default(),
            model: model_id.unwrap_or_else(|| self.name.to_string()),
        })
    }

    /// A chat reply: plain text, no tool call.
    async fn converse(
        &self,
        request: &ModelRequest,
        _session: &baton_core::records::conversation::ToolSession,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<baton_core::records::conversation::SessionAnswer, LlmError> {
        let model_id = request.model.as_ref().map(|target| target.model_id.clone());
        self.asked
            .lock()
            .unwrap()
            .push(("chat".into(), model_id.clone()));
        Ok(baton_core::records::conversation::SessionAnswer {
            content: "Hello.".into(),
            tool_calls: Vec::new(),
            usage: TokenUsage::default(),
            model: model_id.unwrap_or_else(|| self.name.to_string()),
        })
    }
}

fn copy_folder(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_folder(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

fn edit(path: &Path, change: impl FnOnce(&mut Value)) {
    let mut document: Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    change(&mut document);
    std::fs::write(path, serde_json::to_string_pretty(&document).unwrap()).unwrap();
}

/// The repository registry with two providers of two models each, and the
/// writer-brief capability pinned to `alpha-large`.
fn registry_folder() -> tempfile::TempDir {
    let folder = tempfile::tempdir().unwrap();
    copy_folder(&repository_path("registry"), folder.path());
    edit(&folder.path().join("models.json"), |catalog| {
        let structured = json!({"tools": true, "jsonSchema": true, "streaming": true});
        catalog["providers"]["alpha"] =
            json!({"kind": "openai", "baseUrl": "http://127.0.0.1:9/v1"});
        catalog["providers"]["beta"] =
            json!({"kind": "openai", "baseUrl": "http://127.0.0.1:9/v1"});
        catalog["models"]["alpha-large"] = json!({"provider": "alpha", "modelId": "alpha-large-2026-01", "inputPerMillionUsd": 1.0, "outputPerMillionUsd": 2.0, "supports": structured});
        catalog["models"]["beta-small"] = json!({"provider": "beta", "inputPerMillionUsd": 0.5, "outputPerMillionUsd": 1.0, "supports": structured});
        catalog["models"]["beta-text-only"] =
            json!({"provider": "beta", "inputPerMillionUsd": 0.1, "outputPerMillionUsd": 0.1});
    });
    edit(
        &folder
            .path()
            .join(format!("capabilities/{PINNED_CAPABILITY}.json")),
        |capability| capability["model"] = Value::from("alpha-large"),
    );
    folder
}

fn recording(name: &'static str) -> (Arc<RecordingProvider>, Asked) {
    let asked: Asked = Arc::default();
    (
        Arc::new(RecordingProvider {
            name,
            asked: asked.clone(),
        }),
        asked,
    )
}

/// The real services over the in-memory store and queue, with `router` as
/// their model port, and a runner that drives runs to the end.
fn orchestrator(
    registry: Arc<baton_core::catalog::registry::Registry>,
    router: ModelRouter,
) -> (baton_runtime::services::Services, LocalRunner) {
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(Arc::new(router))
        .registry(registry)
        .queue(queue.clone())
        .build()
        .services;
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue,
    };
    (services, runner)
}

/// The (schema name, model id) pairs whose schema belongs to `capability`.
fn asked_for(asked: &Asked, capability: &str) -> Vec<Option<String>> {
    let schema_prefix = capability.replace('.', "_");
    asked
        .lock()
        .unwrap()
        .iter()
        .filter(|(schema, _)| schema.starts_with(&schema_prefix))
        .map(|(_, model)| model.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn each_node_calls_the_model_the_documented_order_picks() {
    let folder = registry_folder();
    let registry = Arc::new(load_registry(folder.path()).unwrap());
    let (default, asked_default) = recording("default");
    let (alpha, asked_alpha) = recording("alpha");
    let (beta, asked_beta) = recording("beta");
    let router = ModelRouter::new(default)
        .with_provider("alpha", ProviderRoute::Ready(alpha))
        .with_provider("beta", ProviderRoute::Ready(beta));
    let (services, runner) = orchestrator(registry, router);

    // The envelope prefers beta-small; the writer brief is pinned to alpha-large.
    let mut envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    envelope["constraints"]["preferredModels"] = json!(["beta-small"]);
    let run = services.runs.submit("t", &envelope).await.unwrap();
    assert_eq!(
        runner.run_until_settled("t", &run.run_id).await.unwrap(),
        RunStatus::Completed
    );
    // The pinned capability's own model wins over the envelope's.
    let pinned = asked_for(&asked_alpha, &schema_of(PINNED_CAPABILITY));
    assert!(
        !pinned.is_empty()
            && pinned
                .iter()
                .all(|model| model.as_deref() == Some("alpha-large-2026-01")),
        "alpha saw {:?}",
        asked_alpha.lock().unwrap()
    );
    // A capability naming none takes the envelope's preference.
    let free = asked_for(&asked_beta, &schema_of(FREE_CAPABILITY));
    assert!(
        !free.is_empty()
            && free
                .iter()
                .all(|model| model.as_deref() == Some("beta-small")),
        "beta saw {:?}",
        asked_beta.lock().unwrap()
    );
    assert!(
        asked_default.lock().unwrap().is_empty(),
        "nothing went to the default model: {:?}",
        asked_default.lock().unwrap()
    );
    // The frames name the models: per node in the plan, on each start.
    let frames = services
        .runs
        .read_all_events_after("t", &run.run_id, 0)
        .await
        .unwrap();
    let plan = frames
        .iter()
        .find(|frame| frame.event_type.as_str() == "plan_generated")
        .unwrap();
    let planned: Vec<(String, Option<String>)> = plan.payload.as_ref().unwrap()["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| {
            (
                node["capabilityId"].as_str().unwrap().to_string(),
                node["model"].as_str().map(str::to_string),
            )
        })
        .collect();
    assert!(
        planned.contains(&(PINNED_CAPABILITY.to_string(), Some("alpha-large".into())))
            && planned.contains(&(FREE_CAPABILITY.to_string(), Some("beta-small".into()))),
        "{planned:?}"
    );
    let started: Vec<Option<&str>> = frames
        .iter()
        .filter(|frame| frame.event_type.as_str() == "node_start")
        .map(|frame| frame.payload.as_ref().unwrap()["model"].as_str())
        .collect();
    assert!(
        started.contains(&Some("alpha-large")) && started.contains(&Some("beta-small")),
        "{started:?}"
    );

    // Without the envelope's preference, the free node uses the default.
    let plain = services
        .runs
        .submit(
            "t",
            &baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json"),
        )
        .await
        .unwrap();
    assert_eq!(
        runner.run_until_settled("t", &plain.run_id).await.unwrap(),
        RunStatus::Completed
    );
    let defaulted = asked_for(&asked_default, &schema_of(FREE_CAPABILITY));
    assert!(
        !defaulted.is_empty() && defaulted.iter().all(Option::is_none),
        "the default model was asked without a model id: {:?}",
        asked_default.lock().unwrap()
    );

    // Refused at submission, with the entry's JSON path.
    for (preferred, expected) in [
        ("no-such-model", "is not a model of the registry's catalog"),
        ("beta-text-only", "cannot do strict structured output"),
    ] {
        let mut refused =
            baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
        refused["constraints"]["preferredModels"] = json!(["beta-small", preferred]);
        match services.runs.submit("t", &refused).await {
            Err(RuntimeError::InvalidInput { path, message }) => {
                assert_eq!(path, "$.constraints.preferredModels[1]");
                assert!(message.contains(expected), "{message}");
            }
            other => panic!("`{preferred}` is refused at submission, got {other:?}"),
        }
    }
}

/// The schema name a capability's requests carry.
fn schema_of(capability: &str) -> String {
    capability.replace('.', "_")
}

#[test]
fn a_capability_naming_a_model_the_catalog_lacks_fails_the_registry_load() {
    let folder = registry_folder();
    edit(
        &folder
            .path()
            .join(format!("capabilities/{FREE_CAPABILITY}.json")),
        |capability| capability["preferredModels"] = json!(["beta-small", "gamma"]),
    );
    let error = load_registry(folder.path()).unwrap_err().to_string();
    assert!(
        error.contains(&format!("{FREE_CAPABILITY}.json"))
            && error.contains("$.preferredModels[1]")
            && error.contains("`gamma` is not a model"),
        "{error}"
    );
}

#[tokio::test]
async fn a_provider_this_process_cannot_reach_says_what_to_set() {
    let (default, _) = recording("default");
    let router = ModelRouter::new(default).with_provider(
        "alpha",
        ProviderRoute::Unavailable("no endpoint: set ALPHA_BASE_URL".into()),
    );
    let request = ModelRequest {
        system_instruction: String::new(),
        user_message: String::new(),
        schema_name: "s".into(),
        output_schema: Arc::new(json!({"type": "object"})),
        model: Some(Box::new(
            baton_core::contracts::model_request::ModelTarget {
                name: "alpha-large".into(),
                provider: "alpha".into(),
                model_id: "alpha-large-2026-01".into(),
                fallbacks: Vec::new(),
                ..Default::default()
            },
        )),
    };
    let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
    let error = router.complete(&request, sender).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "provider configuration: model `alpha-large` is served by provider `alpha`, which this process cannot reach: no endpoint: set ALPHA_BASE_URL"
    );
}

/// Test double for a judge model's endpoint: a fixed judgement, 1,000
/// prompt and 100 completion tokens, answered as the model id it was asked
/// for; records that id.
struct JudgeEndpoint {
    asked: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl LlmProvider for JudgeEndpoint {
    fn model_name(&self) -> String {
        "judge-endpoint".into()
    }
    async fn complete(
        &self,
        request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        let model = request
            .model
            .as_ref()
            .map(|target| target.model_id.clone())
            .unwrap_or_else(|| "default".into());
        self.asked.lock().unwrap().push(model.clone());
        Ok(ModelAnswer {
            content:
                json!({"score": 8.0, "feedback": "sound", "strengths": [], "improvements": []})
                    .to_string(),
            usage: TokenUsage {
                prompt_tokens: 1_000,
                completion_tokens: 100,
                cached_prompt_tokens: 0,
                cache_write_prompt_tokens: 0,
            },
            model,
        })
    }
}

/// A one-round panel request over `judges`.
fn panel_body(id: &str, judges: Value) -> Value {
    json!({
        "request": {"id": id, "content": "A claim to judge.", "selectedAgents": judges},
        "config": {"maxDiscussionRounds": 1, "roundTimeout": 30000, "consensusAlgorithm": "median",
                   "enableDiscussion": false, "convergenceThreshold": 1.0, "outlierDetection": false}
    })
}

/// Submits `body` as an evaluation and runs it until it settles; its run id.
async fn evaluate(
    services: &baton_runtime::services::Services,
    runner: &LocalRunner,
    body: &Value,
) -> String {
    let request = baton_judge::request::PanelRequest::parse(body).unwrap();
    let entry = services.runs.panel_entry().unwrap();
    let submitted = services
        .runs
        .submit_evaluation("t", &entry, &request, body)
        .await
        .unwrap();
    assert_eq!(
        runner
            .run_until_settled("t", &submitted.run_id)
            .await
            .unwrap(),
        RunStatus::Completed
    );
    submitted.run_id
}

#[tokio::test(flavor = "multi_thread")]
async fn each_judge_of_a_panel_asks_its_own_model_and_the_cost_adds_up_per_model() {
    let folder = registry_folder();
    edit(&folder.path().join("models.json"), |catalog| {
        catalog["models"]["alpha-mini"] =
            json!({"provider": "alpha", "inputPerMillionUsd": 0.25, "outputPerMillionUsd": 0.5});
    });
    let registry = Arc::new(load_registry(folder.path()).unwrap());
    let asked_alpha = Arc::new(Mutex::new(Vec::new()));
    let asked_beta = Arc::new(Mutex::new(Vec::new()));
    let asked_default = Arc::new(Mutex::new(Vec::new()));
    let endpoint = |asked: &Arc<Mutex<Vec<String>>>| {
        Arc::new(JudgeEndpoint {
            asked: asked.clone(),
        })
    };
    let router = ModelRouter::new(endpoint(&asked_default))
        .with_provider("alpha", ProviderRoute::Ready(endpoint(&asked_alpha)))
        .with_provider("beta", ProviderRoute::Ready(endpoint(&asked_beta)));
    let (services, runner) = orchestrator(registry, router);
    let judge = |id: &str, model: &str| json!({"id": id, "capabilities": {"modelName": model}});
    let body = panel_body(
        "req-models",
        json!([judge("a", "alpha-large"), judge("b", "alpha-mini"),
               // A provider alone: its first catalog model with structured output.
               {"id": "c", "capabilities": {"modelProvider": "Beta"}}]),
    );
    let run_id = evaluate(&services, &runner, &body).await;
    let entry = services.runs.panel_entry().unwrap();
    let mut alpha = asked_alpha.lock().unwrap().clone();
    alpha.sort();
    assert_eq!(alpha, vec!["alpha-large-2026-01", "alpha-mini"]);
    assert_eq!(*asked_beta.lock().unwrap(), vec!["beta-small"]);
    assert!(asked_default.lock().unwrap().is_empty());
    // The panel node's cost is each judge's tokens at its own model's price:
    // 1,000 × $1 + 100 × $2, 1,000 × $0.25 + 100 × $0.5, 1,000 × $0.5 + 100 × $1 per million.
    let expected = (1_200.0 + 300.0 + 600.0) / 1_000_000.0;
    let frames = services
        .runs
        .read_all_events_after("t", &run_id, 0)
        .await
        .unwrap();
    let completed = frames
        .iter()
        .find(|frame| frame.event_type.as_str() == "node_complete")
        .unwrap();
    // Every frame of a panel run (`progress` included) meets its own schema
    // and the one every frame shares.
    baton_test_support::assert_frames_match_schemas(&frames);
    // The verdict and the transcript name each judge's model.
    let verdict = completed.payload.as_ref().unwrap()["output"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()
        .clone();
    let by_judge: std::collections::BTreeMap<String, String> = verdict["individualResults"]
        .as_array()
        .unwrap()
        .iter()
        .map(|result| {
            (
                result["agentId"].as_str().unwrap().to_string(),
                result["model"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        by_judge,
        [
            ("a", "alpha-large-2026-01"),
            ("b", "alpha-mini"),
            ("c", "beta-small")
        ]
        .map(|(judge, model)| (judge.to_string(), model.to_string()))
        .into()
    );
    let written: Vec<(&str, &str)> = verdict["transcript"]["rounds"][0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["role"] == "agent")
        .map(|message| {
            (
                message["agentId"].as_str().unwrap(),
                message["model"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(written.len(), 3, "{verdict}");
    for (judge, model) in written {
        assert_eq!(by_judge[judge], model);
    }
    // A judge naming a model the catalog lacks is refused at submission.
    let mut unknown = body.clone();
    unknown["request"]["selectedAgents"][1]["capabilities"]["modelName"] = json!("gamma");
    let refused = baton_judge::request::PanelRequest::parse(&unknown).unwrap();
    match services
        .runs
        .submit_evaluation("t", &entry, &refused, &unknown)
        .await
    {
        Err(RuntimeError::InvalidInput { path, message }) => {
            assert_eq!(path, "$.request.selectedAgents[1].capabilities.modelName");
            assert!(message.contains("`gamma` is not a model"), "{message}");
        }
        other => panic!("an unknown judge model is refused, got {other:?}"),
    }
    // A provider the catalog lacks, or one that does not serve the named
    // model, is refused naming `modelProvider`.
    let refusals = [
        (
            json!({"modelProvider": "gamma"}),
            "`gamma` is not a provider",
        ),
        (
            json!({"modelName": "alpha-mini", "modelProvider": "beta"}),
            "served by the catalog's `alpha` provider",
        ),
    ];
    for (capabilities, expected) in refusals {
        let mut refused_body = body.clone();
        refused_body["request"]["selectedAgents"][0]["capabilities"] = capabilities;
        let refused = baton_judge::request::PanelRequest::parse(&refused_body).unwrap();
        match services
            .runs
            .submit_evaluation("t", &entry, &refused, &refused_body)
            .await
        {
            Err(RuntimeError::InvalidInput { path, message }) => {
                assert_eq!(
                    path,
                    "$.request.selectedAgents[0].capabilities.modelProvider"
                );
                assert!(message.contains(expected), "{message}");
            }
            other => panic!("{expected}: refused, got {other:?}"),
        }
    }
    let cost = completed.payload.as_ref().unwrap()["costUsd"]
        .as_f64()
        .unwrap();
    assert!(
        (cost - expected).abs() < 1e-9,
        "cost {cost}, expected {expected}"
    );
}

/// Test double for a provider whose endpoint keeps answering 429: gives up
/// the way a provider does after its own retries.
struct RateLimitedEndpoint {
    calls: Arc<Mutex<usize>>,
}

#[async_trait]
impl LlmProvider for RateLimitedEndpoint {
    fn model_name(&self) -> String {
        "rate-limited".into()
    }
    async fn complete(
        &self,
        _request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        *self.calls.lock().unwrap() += 1;
        Err(LlmError::RateLimited { attempts: 5 })
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rate_limited_model_falls_back_with_one_warning_and_without_a_fallback_the_node_fails() {
    let folder = registry_folder();
    edit(
        &folder
            .path()
            .join(format!("capabilities/{PINNED_CAPABILITY}.json")),
        |capability| capability["fallbackModels"] = json!(["beta-small"]),
    );
    let registry = Arc::new(load_registry(folder.path()).unwrap());
    let limited_calls = Arc::new(Mutex::new(0));
    let (default, _asked_default) = recording("default");
    let (beta, asked_beta) = recording("beta");
    let router = ModelRouter::new(default)
        .with_provider(
            "alpha",
            ProviderRoute::Ready(Arc::new(RateLimitedEndpoint {
                calls: limited_calls.clone(),
            })),
        )
        .with_provider("beta", ProviderRoute::Ready(beta));
    let (services, runner) = orchestrator(registry, router);
    let run = services
        .runs
        .submit(
            "t",
            &baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json"),
        )
        .await
        .unwrap();
    assert_eq!(
        runner.run_until_settled("t", &run.run_id).await.unwrap(),
        RunStatus::Completed
    );
    assert_eq!(*limited_calls.lock().unwrap(), 1, "alpha gave up once");
    assert_eq!(
        asked_for(&asked_beta, &schema_of(PINNED_CAPABILITY)),
        vec![Some("beta-small".to_string())],
        "the fallback answered the pinned node"
    );
    let frames = services
        .runs
        .read_all_events_after("t", &run.run_id, 0)
        .await
        .unwrap();
    let fallbacks: Vec<&baton_core::wire::event::EventFrame> = frames
        .iter()
        .filter(|frame| {
            frame.event_type.as_str() == "warning"
                && frame.payload.as_ref().unwrap()["code"] == "model_fallback"
        })
        .collect();
    assert_eq!(fallbacks.len(), 1, "one model_fallback warning");
    let message = fallbacks[0].message.clone().unwrap_or_default();
    assert!(
        message.contains("`alpha-large`")
            && message.contains("`beta-small`")
            && message.contains("rate-limited"),
        "{message}"
    );
    assert_eq!(
        fallbacks[0].payload.as_ref().unwrap()["model"],
        "beta-small"
    );

    // With no fallback model the node escalates to the next-ranked
    // capability that makes its facets: the run goes on, and says why.
    let plain_folder = registry_folder();
    let registry = Arc::new(load_registry(plain_folder.path()).unwrap());
    let rate_limited = || {
        let (default, _) = recording("default");
        ModelRouter::new(default).with_provider(
            "alpha",
            ProviderRoute::Ready(Arc::new(RateLimitedEndpoint {
                calls: Arc::new(Mutex::new(0)),
            })),
        )
    };
    let (services, runner) = orchestrator(registry.clone(), rate_limited());
    let mut envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    let run = services.runs.submit("t", &envelope).await.unwrap();
    let status = runner.run_until_settled("t", &run.run_id).await.unwrap();
    let frames = services
        .runs
        .read_all_events_after("t", &run.run_id, 0)
        .await
        .unwrap();
    assert_ne!(
        status,
        RunStatus::Failed,
        "an escalation exists, so no failure"
    );
    let updated = frames
        .iter()
        .find(|frame| frame.event_type.as_str() == "plan_updated")
        .expect("a new plan version hands the node on")
        .payload
        .clone()
        .unwrap();
    assert_eq!(updated["trigger"]["kind"], "model_failed");
    assert_eq!(updated["trigger"]["capabilityId"], PINNED_CAPABILITY);
    let escalated = frames
        .iter()
        .find(|frame| {
            frame.event_type.as_str() == "warning"
                && frame.payload.as_ref().unwrap()["code"] == "capability_fallback"
        })
        .expect("the escalation is said");
    // The registry has no other maker of the brief: the new version goes
    // without the strategist, and that is said too.
    let skipped = frames
        .iter()
        .find(|frame| {
            frame.event_type.as_str() == "warning"
                && frame.payload.as_ref().unwrap()["code"] == "specialist_skipped"
        })
        .expect("the dropped strategist is said");
    assert!(
        skipped
            .message
            .clone()
            .unwrap_or_default()
            .contains(PINNED_CAPABILITY),
        "{skipped:?}"
    );
    let said = escalated.message.clone().unwrap_or_default();
    assert!(
        said.contains(
            "alpha (model `alpha-large`): provider rate-limited the request after 5 attempts"
        ),
        "the warning names the provider, the model and the retry count: {said}"
    );
    // When the envelope requires that very capability, no plan without it
    // will do: nothing is left to escalate to, and the node fails saying why.
    let (services, runner) = orchestrator(registry, rate_limited());
    envelope["policies"]["planner"] = json!({"selection": {"require": [PINNED_CAPABILITY]}});
    let run = services.runs.submit("t", &envelope).await.unwrap();
    assert_eq!(
        runner.run_until_settled("t", &run.run_id).await.unwrap(),
        RunStatus::Failed
    );
    let frames = services
        .runs
        .read_all_events_after("t", &run.run_id, 0)
        .await
        .unwrap();
    let error = frames
        .iter()
        .find(|frame| frame.event_type.as_str() == "node_error")
        .unwrap();
    assert_eq!(error.payload.as_ref().unwrap()["code"], "llm_rate_limited");
    let text = error.message.clone().unwrap_or_default();
    assert!(
        text.contains(
            "alpha (model `alpha-large`): provider rate-limited the request after 5 attempts"
        ),
        "the error names the provider, the model and the retry count: {text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_judge_whose_model_is_rate_limited_answers_on_its_fallback_with_a_warning() {
    let folder = registry_folder();
    edit(&folder.path().join("models.json"), |catalog| {
        catalog["models"]["alpha-large"]["fallbackModels"] = json!(["beta-small"]);
    });
    let registry = Arc::new(load_registry(folder.path()).unwrap());
    let limited_calls = Arc::new(Mutex::new(0));
    let asked_beta = Arc::new(Mutex::new(Vec::new()));
    let asked_default = Arc::new(Mutex::new(Vec::new()));
    let router = ModelRouter::new(Arc::new(JudgeEndpoint {
        asked: asked_default.clone(),
    }))
    .with_provider(
        "alpha",
        ProviderRoute::Ready(Arc::new(RateLimitedEndpoint {
            calls: limited_calls.clone(),
        })),
    )
    .with_provider(
        "beta",
        ProviderRoute::Ready(Arc::new(JudgeEndpoint {
            asked: asked_beta.clone(),
        })),
    );
    let (services, runner) = orchestrator(registry, router);
    let body = panel_body(
        "req-fallback",
        json!([{"id": "a", "capabilities": {"modelName": "alpha-large"}}]),
    );
    let run_id = evaluate(&services, &runner, &body).await;
    assert_eq!(*limited_calls.lock().unwrap(), 1);
    assert_eq!(*asked_beta.lock().unwrap(), vec!["beta-small"]);
    let frames = services
        .runs
        .read_all_events_after("t", &run_id, 0)
        .await
        .unwrap();
    let fallbacks: Vec<&baton_core::wire::event::EventFrame> = frames
        .iter()
        .filter(|frame| {
            frame.event_type.as_str() == "warning"
                && frame.payload.as_ref().unwrap()["code"] == "model_fallback"
        })
        .collect();
    assert_eq!(fallbacks.len(), 1, "one model_fallback warning");
    let message = fallbacks[0].message.clone().unwrap_or_default();
    assert!(
        message.contains("`alpha-large`") && message.contains("`beta-small`"),
        "{message}"
    );
    assert!(fallbacks[0].node_id.is_some(), "on the panel node");
}

/// Test double for a slow provider endpoint: counts the calls in flight and
/// keeps the highest count.
struct SlowEndpoint {
    in_flight: Arc<Mutex<(usize, usize)>>,
}

#[async_trait]
impl LlmProvider for SlowEndpoint {
    fn model_name(&self) -> String {
        "slow".into()
    }
    async fn complete(
        &self,
        _request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        {
            let mut counts = self.in_flight.lock().unwrap();
            counts.0 += 1;
            counts.1 = counts.1.max(counts.0);
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        self.in_flight.lock().unwrap().0 -= 1;
        Ok(ModelAnswer {
            content: "{}".into(),
            usage: TokenUsage::default(),
            model: "slow".into(),
        })
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_provider_with_a_call_limit_takes_that_many_calls_at_once() {
    let in_flight = Arc::new(Mutex::new((0, 0)));
    let (default, _) = recording("default");
    let router = Arc::new(
        ModelRouter::new(default)
            .with_provider(
                "alpha",
                ProviderRoute::Ready(Arc::new(SlowEndpoint {
                    in_flight: in_flight.clone(),
                })),
            )
            .with_limit("alpha", 2),
    );
    let request = ModelRequest {
        system_instruction: String::new(),
        user_message: String::new(),
        schema_name: "s".into(),
        output_schema: Arc::new(json!({"type": "object"})),
        model: Some(Box::new(
            baton_core::contracts::model_request::ModelTarget {
                name: "alpha-large".into(),
                provider: "alpha".into(),
                model_id: "alpha-large".into(),
                fallbacks: Vec::new(),
                ..Default::default()
            },
        )),
    };
    let calls: Vec<_> = (0..10)
        .map(|_| {
            let router = router.clone();
            let request = request.clone();
            tokio::spawn(async move {
                let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
                router.complete(&request, sender).await
            })
        })
        .collect();
    for call in calls {
        call.await.unwrap().unwrap();
    }
    let (now, most) = *in_flight.lock().unwrap();
    assert_eq!((now, most), (0, 2), "ten calls, at most two at once");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_chat_agent_answers_with_the_model_chat_json_names() {
    let folder = registry_folder();
    edit(&folder.path().join("chat.json"), |settings| {
        settings["model"] = Value::from("beta-small")
    });
    let registry = Arc::new(load_registry(folder.path()).unwrap());
    let (default, asked_default) = recording("default");
    let (beta, asked_beta) = recording("beta");
    let router = ModelRouter::new(default).with_provider("beta", ProviderRoute::Ready(beta));
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(Arc::new(router))
        .registry(registry)
        .queue(queue.clone())
        .threads(Arc::new(
            baton_runtime::memory::InMemoryThreadStore::default(),
        ))
        .build()
        .services;
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue,
    };
    let request = baton_runtime::services::ChatRequest {
        message: "What can you do?".into(),
        ..Default::default()
    };
    let submitted = services.runs.submit_chat("t", &request).await.unwrap();
    assert_eq!(
        runner
            .run_until_settled("t", &submitted.run_id)
            .await
            .unwrap(),
        RunStatus::Completed
    );
    assert_eq!(
        *asked_beta.lock().unwrap(),
        vec![("chat".to_string(), Some("beta-small".to_string()))]
    );
    assert!(asked_default.lock().unwrap().is_empty());

    // A chat model that cannot call tools fails the registry load.
    edit(&folder.path().join("chat.json"), |settings| {
        settings["model"] = Value::from("beta-text-only")
    });
    let error = load_registry(folder.path()).unwrap_err().to_string();
    assert!(
        error.contains("chat.json") && error.contains("$.model") && error.contains("tool calls"),
        "{error}"
    );
}

#[test]
fn the_llm_planner_drafts_with_the_catalogs_planner_model() {
    let folder = registry_folder();
    edit(&folder.path().join("models.json"), |catalog| {
        catalog["plannerModel"] = Value::from("alpha-large")
    });
    let registry = load_registry(folder.path()).unwrap();
    let envelope = baton_core::contracts::envelope::TaskEnvelope::parse_value(&example_envelope(
        "seed-10.1-sample-envelope.json",
    ))
    .unwrap();
    let request = baton_core::planning::llm_planner::planner_request(&envelope, &registry, &[]);
    let target = request.model.expect("the planner names its model");
    assert_eq!(
        (
            target.name.as_str(),
            target.provider.as_str(),
            target.model_id.as_str()
        ),
        ("alpha-large", "alpha", "alpha-large-2026-01")
    );
    // A planner model without structured output fails the load.
    edit(&folder.path().join("models.json"), |catalog| {
        catalog["plannerModel"] = Value::from("beta-text-only")
    });
    let error = load_registry(folder.path()).unwrap_err().to_string();
    assert!(error.contains("$.plannerModel"), "{error}");
}
