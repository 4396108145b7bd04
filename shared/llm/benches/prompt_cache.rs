//! Prompt caching, cached against not: tokens and dollars of a 5-node run
//! (three runs in a row, as a team running one pipeline sends them) and of
//! a 3-judge panel with 3 discussion rounds (4 rounds, 12 calls), on `claude-sonnet-4-5` through the real
//! Anthropic provider, priced by the catalog's rates (input, output, cache
//! read, cache write).
//!
//! The model endpoint is the scripted double of Anthropic's Messages API
//! (a test double, `tests/scripted-llm`), whose prompt cache follows
//! Anthropic's documentation: the prefix up to the last `cache_control`
//! mark (tools, then system) is written on first sight and read after; a
//! prefix under 1,024 tokens is never cached; tokens are counted as four
//! characters each. "Not cached" is the same catalog with the model's
//! `supports.promptCache` off, so Baton marks nothing.
//!
//! Two prompt sizes: the registry's short prompts (about 100 tokens), and the
//! same with a shared house style guide of about 1,500 tokens in front of
//! every node's and judge's instructions, the size where caching pays.
//!
//! `cargo bench -p baton-llm --bench prompt_cache`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench code

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use baton_core::catalog::model_catalog::ModelCatalog;
use baton_core::catalog::registry::{Registry, RegistryDocument};
use baton_core::records::conversation::{SessionAnswer, ToolSession};
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunStatus, TokenUsage};
use baton_llm::anthropic::{AnthropicConfig, AnthropicProvider};
use baton_runtime::error::LlmError;
use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::models::router::{ModelRouter, ProviderRoute};
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use baton_runtime::workers::LocalRunner;
use baton_test_support::five_stages::{five_stage_envelope, five_stage_registry};
use baton_test_support::{TestServices, repository_path};
use scripted_llm::{Behavior, ScriptedLlmServer, generate_instance};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

const MODEL: &str = "claude-sonnet-4-5";

/// What the calls used, summed from the provider's own answers.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    calls: u64,
    prompt: u64,
    cache_read: u64,
    cache_write: u64,
    completion: u64,
    dollars: f64,
}

/// Sums the usage of every answer of the provider it wraps (a measuring
/// wrapper around the real provider, not a double).
struct Measured {
    inner: Arc<dyn LlmProvider>,
    catalog: ModelCatalog,
    tally: Mutex<Tally>,
}

impl Measured {
    fn count(&self, usage: &TokenUsage) {
        let mut tally = self.tally.lock().unwrap();
        tally.calls += 1;
        tally.prompt += usage.prompt_tokens;
        tally.cache_read += usage.cached_prompt_tokens;
        tally.cache_write += usage.cache_write_prompt_tokens;
        tally.completion += usage.completion_tokens;
        tally.dollars += self.catalog.cost_usd(MODEL, usage).unwrap();
    }
}

#[async_trait]
impl LlmProvider for Measured {
    fn model_name(&self) -> String {
        self.inner.model_name()
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        let answer = self.inner.complete(request, deltas).await?;
        self.count(&answer.usage);
        Ok(answer)
    }

    async fn converse(
        &self,
        request: &ModelRequest,
        session: &ToolSession,
        deltas: UnboundedSender<ModelDelta>,
    ) -> Result<SessionAnswer, LlmError> {
        let answer = self.inner.converse(request, session, deltas).await?;
        self.count(&answer.usage);
        Ok(answer)
    }
}

/// A house style guide of about 1,500 tokens, the same in every prompt.
fn house_style_guide() -> String {
    (1..=40)
        .map(|rule| {
            format!(
                "House rule {rule}: write plainly for a reader who is busy; prefer short sentences, concrete nouns and verbs; cite the source of each figure; never promise outcomes.\n"
            )
        })
        .collect()
}

/// The shipped catalog with the model's prompt caching on or off.
fn catalog_document(prompt_cache: bool) -> RegistryDocument {
    let mut catalog: Value = serde_json::from_str(
        &std::fs::read_to_string(repository_path("registry/models.json")).unwrap(),
    )
    .unwrap();
    catalog["models"][MODEL]["supports"]["promptCache"] = Value::Bool(prompt_cache);
    RegistryDocument {
        source_name: "models.json".into(),
        text: catalog.to_string(),
    }
}

/// The Anthropic provider at the double, measured, behind the router.
fn measured_models(server: &ScriptedLlmServer, catalog: &ModelCatalog) -> Arc<Measured> {
    let mut config = AnthropicConfig::new(
        server.root_url(),
        Some("sk-ant-bench".into()),
        "ANTHROPIC_API_KEY",
    );
    config.model = MODEL.into();
    let anthropic: Arc<dyn LlmProvider> = Arc::new(AnthropicProvider::new(config).unwrap());
    let router = ModelRouter::new(anthropic.clone())
        .with_provider("anthropic", ProviderRoute::Ready(anthropic));
    Arc::new(Measured {
        inner: Arc::new(router),
        catalog: catalog.clone(),
        tally: Mutex::new(Tally::default()),
    })
}

async fn settle(
    services: &baton_runtime::services::Services,
    queue: Arc<InMemoryStepQueue>,
    run_id: &str,
) {
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue,
    };
    assert_eq!(
        runner.run_until_settled("bench", run_id).await.unwrap(),
        RunStatus::Completed
    );
}

/// Three 5-node runs in a row.
async fn five_node_runs(prompt_cache: bool, long_prompts: bool) -> Tally {
    let guide = if long_prompts {
        house_style_guide()
    } else {
        String::new()
    };
    let mut registry: Registry =
        five_stage_registry(&|role| format!("{guide}You are the {role}: do your stage well."));
    registry
        .add_model_catalog_document(&catalog_document(prompt_cache))
        .unwrap();
    let server = ScriptedLlmServer::start().await.unwrap();
    let models = measured_models(&server, registry.models());
    let registry = Arc::new(registry);
    let mut envelope = five_stage_envelope();
    envelope["constraints"] = json!({"preferredModels": [MODEL]});
    for _ in 0..3 {
        let queue = Arc::new(InMemoryStepQueue::new());
        let services = TestServices::with_model(models.clone())
            .registry(registry.clone())
            .queue(queue.clone())
            .build()
            .services;
        let submitted = services.runs.submit("bench", &envelope).await.unwrap();
        settle(&services, queue, &submitted.run_id).await;
    }
    let tally = *models.tally.lock().unwrap();
    assert_eq!(tally.calls, 15, "five model calls a run");
    tally
}

/// One panel: three judges on the model, a scoring round and three
/// discussion rounds (the scripted scores
/// stay apart, so the panel discusses until its round bound).
async fn panel_with_three_discussion_rounds(prompt_cache: bool, long_prompts: bool) -> Tally {
    let guide = if long_prompts {
        house_style_guide()
    } else {
        String::new()
    };
    let mut registry = (*baton_test_support::repository_registry()).clone();
    registry
        .add_model_catalog_document(&catalog_document(prompt_cache))
        .unwrap();
    let server = ScriptedLlmServer::start().await.unwrap();
    let answer_schema = baton_judge::panel::judge_answer_schema();
    for _round in 0..4 {
        for score in [2.0, 5.5, 9.0] {
            let mut answer = generate_instance(&answer_schema, "judge");
            answer["score"] = json!(score);
            server.push_behaviors([Behavior::Content {
                content: answer.to_string(),
            }]);
        }
    }
    let models = measured_models(&server, registry.models());
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(models.clone())
        .registry(Arc::new(registry))
        .queue(queue.clone())
        .build()
        .services;
    let judge = |id: &str| {
        json!({"id": id, "capabilities": {"modelName": MODEL,
            "systemPrompt": format!("{guide}You are judge {id}: score strictly against the criteria.")}})
    };
    let body = json!({
        "request": {"id": "bench-panel", "content": "A launch post to judge.", "criteria": ["accuracy", "tone"],
                    "selectedAgents": [judge("a"), judge("b"), judge("c")]},
        "config": {"maxDiscussionRounds": 3, "roundTimeout": 30000, "consensusAlgorithm": "median",
                   "enableDiscussion": true, "convergenceThreshold": 0.01, "outlierDetection": false}
    });
    let request = baton_judge::request::PanelRequest::parse(&body).unwrap();
    let entry = services.runs.panel_entry().unwrap();
    let submitted = services
        .runs
        .submit_evaluation("bench", &entry, &request, &body)
        .await
        .unwrap();
    settle(&services, queue, &submitted.run_id).await;
    *models.tally.lock().unwrap()
}

fn row(workload: &str, prompts: &str, caching: &str, tally: &Tally) {
    println!(
        "| {workload} | {prompts} | {caching} | {} | {} | {} | {} | {} | ${:.5} |",
        tally.calls,
        tally.prompt,
        tally.cache_write,
        tally.cache_read,
        tally.completion,
        tally.dollars
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing
    // else either: the measurement is quick, so both run it.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "Prompt caching on {MODEL} (catalog prices), through the Anthropic provider at its scripted double"
    );
    println!();
    println!(
        "| workload | prompts | caching | calls | prompt tokens | cache write | cache read | output tokens | cost |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for (long_prompts, prompts) in [(false, "registry (short)"), (true, "+ 1,500-token guide")] {
        let mut savings = Vec::new();
        for (workload, is_panel) in [
            ("3 × 5-node run", false),
            ("3-judge panel, 3 discussion rounds", true),
        ] {
            let measure = |prompt_cache| {
                runtime.block_on(async {
                    if is_panel {
                        panel_with_three_discussion_rounds(prompt_cache, long_prompts).await
                    } else {
                        five_node_runs(prompt_cache, long_prompts).await
                    }
                })
            };
            let uncached = measure(false);
            let cached = measure(true);
            assert_eq!(
                uncached.cache_read + uncached.cache_write,
                0,
                "nothing marked, nothing cached"
            );
            row(workload, prompts, "off", &uncached);
            row(workload, prompts, "on", &cached);
            savings.push((workload, 1.0 - cached.dollars / uncached.dollars));
        }
        for (workload, saving) in savings {
            println!(
                "|   | {prompts} | saving, {workload} | | | | | | {:.1} % |",
                saving * 100.0
            );
        }
    }
}
