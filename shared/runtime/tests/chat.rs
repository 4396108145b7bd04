//! Chat mode on the step engine: a message is a run of one agent node; the
//! thread's exchanges are recorded when a run completes and replayed before
//! the next message; a specialist gets its own instructions only; a blank
//! message gets the registry's question without a model call; bad requests
//! store nothing. The model is a test double recording what it was sent.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use baton_core::basics::ids::ThreadKey;
use baton_core::records::conversation::{SessionAnswer, SessionTurn, ToolSession};
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunStatus, TokenUsage};
use baton_runtime::error::{LlmError, RuntimeError};
use baton_runtime::memory::{InMemoryStepQueue, InMemoryThreadStore};
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta, ThreadStore};
use baton_runtime::services::{ChatRequest, Services};
use baton_runtime::workers::LocalRunner;
use baton_test_support::{TestServices, assert_frames_match_schemas, repository_registry};
use tokio::sync::mpsc::UnboundedSender;

/// Test double for the model endpoint: answers each chat turn with a
/// numbered reply, streaming it in two pieces; records each request.
#[derive(Default)]
struct ChatModel {
    requests: Mutex<Vec<(ModelRequest, ToolSession)>>,
}

#[async_trait]
impl LlmProvider for ChatModel {
    fn model_name(&self) -> String {
        "chat-double".into()
    }

    async fn complete(
        &self,
        _request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        Err(LlmError::Configuration("a chat node converses".into()))
    }

    async fn converse(
        &self,
        request: &ModelRequest,
        session: &ToolSession,
        deltas: UnboundedSender<ModelDelta>,
    ) -> Result<SessionAnswer, LlmError> {
        let mut requests = self.requests.lock().unwrap();
        requests.push((request.clone(), session.clone()));
        let reply = format!("Reply number {}.", requests.len());
        let _ = deltas.send(ModelDelta::Text("Reply ".into()));
        let _ = deltas.send(ModelDelta::Text(reply["Reply ".len()..].to_string()));
        Ok(SessionAnswer {
            content: reply,
            tool_calls: Vec::new(),
            usage: TokenUsage {
                prompt_tokens: 12,
                completion_tokens: 4,
                cached_prompt_tokens: 0,
                cache_write_prompt_tokens: 0,
            },
            model: "gpt-4o-mini".into(),
        })
    }
}

struct Chat {
    services: Services,
    queue: Arc<InMemoryStepQueue>,
    model: Arc<ChatModel>,
    threads: Arc<InMemoryThreadStore>,
}

fn chat() -> Chat {
    let model = Arc::new(ChatModel::default());
    let queue = Arc::new(InMemoryStepQueue::new());
    let threads = Arc::new(InMemoryThreadStore::new());
    let services = TestServices::with_model(model.clone())
        .queue(queue.clone())
        .threads(threads.clone())
        .build()
        .services;
    Chat {
        services,
        queue,
        model,
        threads,
    }
}

impl Chat {
    /// Sends `request` and runs it to the end; the delivered output.
    async fn say(&self, request: ChatRequest) -> (String, serde_json::Value) {
        let submitted = self.services.runs.submit_chat("t", &request).await.unwrap();
        let runner = LocalRunner {
            steps: self.services.steps.clone(),
            runs: self.services.runs.clone(),
            queue: self.queue.clone(),
        };
        let status = runner
            .run_until_settled("t", &submitted.run_id)
            .await
            .unwrap();
        assert_eq!(status, RunStatus::Completed);
        let stored = self
            .services
            .runs
            .load("t", &submitted.run_id)
            .await
            .unwrap()
            .unwrap();
        (submitted.run_id, stored.state.output.unwrap())
    }

    async fn frame_types(&self, run_id: &str) -> Vec<&'static str> {
        let frames = self
            .services
            .runs
            .read_all_events_after("t", run_id, 0)
            .await
            .unwrap();
        assert_frames_match_schemas(&frames);
        frames
            .iter()
            .map(|frame| frame.event_type.as_str())
            .collect()
    }
}

impl Chat {
    /// The payloads of a run's `session`, `ontology_loaded` and
    /// `last_turn_context` frames, by type.
    async fn opening_frames(&self, run_id: &str) -> serde_json::Value {
        let frames = self
            .services
            .runs
            .read_all_events_after("t", run_id, 0)
            .await
            .unwrap();
        let mut opening = serde_json::Map::new();
        for frame in frames {
            let name = frame.event_type.as_str();
            if ["session", "ontology_loaded", "last_turn_context"].contains(&name) {
                opening.insert(name.into(), frame.payload.as_ref().unwrap().value().clone());
            }
        }
        serde_json::Value::Object(opening)
    }
}

fn message(text: &str) -> ChatRequest {
    ChatRequest {
        message: text.into(),
        ..ChatRequest::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_second_message_of_a_thread_sees_the_first_exchange() {
    let chat = chat();
    let (first_run, first) = chat.say(message("What can you do?")).await;
    let thread_id = first["threadId"].as_str().unwrap().to_string();
    assert_eq!(first["message"], "Reply number 1.");
    assert_eq!(
        chat.frame_types(&first_run).await,
        [
            "start",
            "phase",
            "session",
            "ontology_loaded",
            "last_turn_context",
            "plan_generated",
            "handoff",
            "phase",
            "handoff",
            "node_start",
            "agent_state",
            "delta",
            "message",
            "agent_state",
            "node_complete",
            "metrics",
            "phase",
            "metrics",
            "complete"
        ]
    );
    let opening = chat.opening_frames(&first_run).await;
    assert_eq!(opening["session"]["sessionId"], thread_id.as_str());
    assert_eq!(opening["session"]["messageNumber"], 1);
    assert_eq!(opening["last_turn_context"]["exchanges"], 0);
    assert!(opening["last_turn_context"].get("previousRunId").is_none());
    let (second_run, second) = chat
        .say(ChatRequest {
            thread_id: Some(thread_id.clone()),
            context_type: Some("project".into()),
            ..message("And how long does it take?")
        })
        .await;
    assert_eq!(second["threadId"], thread_id.as_str());
    assert_eq!(second["message"], "Reply number 2.");
    // The second message's opening frames: its place in the thread, the
    // context type's guidance as loaded, and the exchange it follows.
    let opening = chat.opening_frames(&second_run).await;
    assert_eq!(opening["session"]["messageNumber"], 2);
    assert_eq!(opening["session"]["contextType"], "project");
    assert_eq!(opening["ontology_loaded"]["contextType"], "project");
    assert_eq!(opening["ontology_loaded"]["profile"], "balanced");
    assert!(
        opening["ontology_loaded"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|tool| tool == "registry_search"),
        "{}",
        opening["ontology_loaded"]
    );
    assert_eq!(opening["last_turn_context"]["exchanges"], 1);
    assert_eq!(
        opening["last_turn_context"]["previousRunId"],
        first_run.as_str()
    );
    assert_eq!(
        opening["last_turn_context"]["previousMessage"],
        "What can you do?"
    );
    assert_eq!(
        opening["last_turn_context"]["previousAnswer"],
        "Reply number 1."
    );

    let requests = chat.model.requests.lock().unwrap().clone();
    let (first_request, first_session) = &requests[0];
    assert_eq!(first_request.user_message, "What can you do?");
    assert!(first_session.turns.is_empty() && first_session.free_text);
    assert!(
        first_session
            .tools
            .iter()
            .any(|tool| tool.name == "registry_search"),
        "the orchestrator's chat agent has its registry tools"
    );
    let (second_request, second_session) = &requests[1];
    assert_eq!(second_request.user_message, "What can you do?");
    assert_eq!(
        second_session.turns,
        vec![
            SessionTurn::Assistant {
                content: "Reply number 1.".into(),
                tool_calls: Vec::new()
            },
            SessionTurn::User {
                content: "And how long does it take?".into()
            },
        ]
    );
    let recorded = chat
        .threads
        .thread_exchanges(ThreadKey::new("t", &thread_id))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(recorded.len(), 2);
    assert_eq!(recorded[1].assistant, "Reply number 2.");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_specialist_gets_its_own_instructions_and_never_the_orchestrators() {
    let chat = chat();
    let registry = repository_registry();
    let orchestrator = registry.chat_settings().unwrap().instructions.clone();
    let specialist = registry.capability("copywriter.Messaging").unwrap();
    let own = specialist.instructions.clone().unwrap();
    let (_, answered) = chat
        .say(ChatRequest {
            agent: Some("copywriter.Messaging".into()),
            context_type: Some("project".into()),
            ..message("Draft a one-line pitch.")
        })
        .await;
    assert_eq!(answered["message"], "Reply number 1.");
    let requests = chat.model.requests.lock().unwrap().clone();
    let (request, session) = &requests[0];
    assert_eq!(
        request.system_instruction,
        format!("{own}{}", baton_core::engine::NO_TOOLS_REMINDER),
        "its own instructions, and that it has no tools"
    );
    let sent = serde_json::to_string(&(request, session)).unwrap();
    assert!(
        !sent.contains(&orchestrator),
        "no orchestrator prompt: {sent}"
    );
    let guidance = registry.context_guidance("project").unwrap().intent.clone();
    assert!(
        !sent.contains(&guidance),
        "no orchestrator context guidance"
    );
    assert!(session.tools.is_empty(), "the specialist declares no tools");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_orchestrator_gets_the_context_types_guidance() {
    let chat = chat();
    let (run_id, _) = chat
        .say(ChatRequest {
            context_type: Some("project_audit".into()),
            ..message("Audit the project.")
        })
        .await;
    let registry = repository_registry();
    let section = registry
        .context_guidance("project_audit")
        .unwrap()
        .prompt_section();
    let requests = chat.model.requests.lock().unwrap().clone();
    assert!(requests[0].0.system_instruction.ends_with(&section));
    // Every agent_state says the conversation's context type; the last says
    // the agent waits for the person once it has answered.
    let frames = chat
        .services
        .runs
        .read_all_events_after("t", &run_id, 0)
        .await
        .unwrap();
    let states: Vec<(String, String)> = frames
        .iter()
        .filter(|frame| frame.event_type.as_str() == "agent_state")
        .map(|frame| {
            let payload = frame.payload.as_ref().unwrap();
            (
                payload["state"].as_str().unwrap().to_string(),
                payload["contextType"]
                    .as_str()
                    .unwrap_or("none")
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("thinking".to_string(), "project_audit".to_string()),
            ("waiting_on_user".to_string(), "project_audit".to_string())
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_blank_message_gets_a_clarifying_question_without_a_model_call() {
    let chat = chat();
    let (run_id, answered) = chat.say(message("   ")).await;
    let question = repository_registry()
        .chat_settings()
        .unwrap()
        .clarifying_question
        .clone();
    assert_eq!(answered["message"], question.as_str());
    assert!(chat.model.requests.lock().unwrap().is_empty());
    assert_eq!(
        chat.frame_types(&run_id).await,
        ["start", "phase", "metrics", "complete"]
    );
    let thread = answered["threadId"].as_str().unwrap();
    let recorded = chat
        .threads
        .thread_exchanges(ThreadKey::new("t", thread))
        .await
        .unwrap();
    assert_eq!(recorded.unwrap()[0].assistant, question);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_agent_context_or_thread_is_refused_and_nothing_is_stored() {
    let chat = chat();
    for (request, expected) in [
        (
            ChatRequest {
                agent: Some("nobody.here".into()),
                ..message("hi")
            },
            "$.agent",
        ),
        (
            ChatRequest {
                context_type: Some("astrology".into()),
                ..message("hi")
            },
            "$.contextType",
        ),
        (
            ChatRequest {
                agent: Some("JudgePanel.evaluate".into()),
                ..message("hi")
            },
            "$.agent",
        ),
    ] {
        match chat.services.runs.submit_chat("t", &request).await {
            Err(RuntimeError::InvalidInput { path, .. }) => assert_eq!(path, expected),
            other => panic!("expected a refusal at {expected}, got {other:?}"),
        }
    }
    let unknown = chat
        .services
        .runs
        .submit_chat(
            "t",
            &ChatRequest {
                thread_id: Some("thread_missing".into()),
                ..message("hi")
            },
        )
        .await;
    assert!(matches!(unknown, Err(RuntimeError::ThreadNotFound(ref id)) if id == "thread_missing"));
    assert_eq!(chat.queue.outstanding(), 0, "nothing was started");
    assert!(chat.model.requests.lock().unwrap().is_empty());
}

#[test]
fn a_context_types_profile_picks_the_orchestrators_model_through_chat_json() {
    let mut registry = (*repository_registry()).clone();
    let mut settings = registry.chat_settings().unwrap().clone();
    settings
        .profile_models
        .insert("quality".into(), "gpt-4o-mini".into());
    registry.set_chat_settings(settings, "chat.json").unwrap();
    let turn = |context_type: &str| baton_core::records::chat::ChatTurn {
        thread_id: "thread_1".into(),
        message: "Audit the project.".into(),
        user: None,
        agent: None,
        context_type: Some(context_type.into()),
        history: Vec::new(),
        summary: None,
        pending_drafts: Vec::new(),
        new_drafts: Vec::new(),
        inputs: serde_json::Map::new(),
        entity_id: None,
        waiting_on_thread: false,
        lane_releases: Default::default(),
    };
    let model_of = |context_type: &str| {
        let plan =
            baton_core::planning::chat_plan::chat_plan(&turn(context_type), &registry).unwrap();
        plan.nodes[0]
            .model
            .as_ref()
            .map(|target| target.name.clone())
    };
    // `project_audit` wants the `quality` profile: chat.json maps it.
    assert_eq!(
        registry
            .context_guidance("project_audit")
            .unwrap()
            .profile
            .as_deref(),
        Some("quality")
    );
    assert_eq!(model_of("project_audit").as_deref(), Some("gpt-4o-mini"));
    // The plan reviewer (`agent_review`) answers with chat.json's
    // `planReviewProfile` (`quality`) model.
    let review = |settings: &baton_core::records::chat::ChatSettings| {
        baton_core::planning::model_choice::model_for_plan_review(settings, registry.models())
            .map(|target| target.name)
    };
    let mapped = registry.chat_settings().unwrap();
    assert_eq!(mapped.plan_review_profile.as_deref(), Some("quality"));
    assert_eq!(review(mapped).as_deref(), Some("gpt-4o-mini"));
    assert_eq!(
        review(repository_registry().chat_settings().unwrap()),
        None,
        "unmapped: the deployment's default"
    );
    // `general` wants `balanced`, which chat.json does not map: its model
    // (none here: the deployment's default).
    assert_eq!(model_of("general"), None);
    // A profile naming a model the catalog does not have is refused when
    // the registry loads.
    let mut broken = registry.chat_settings().unwrap().clone();
    broken
        .profile_models
        .insert("speed".into(), "no-such-model".into());
    let (path, message) =
        baton_core::planning::model_choice::check_chat_model(&broken, registry.models())
            .unwrap_err();
    assert_eq!(path, "$.profileModels.speed", "{message}");
}

/// Double texting on the in-memory stores: the four strategies, two
/// messages sent together each time (`baton_test_support::double_texting`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_messages_sent_together_obey_each_multitask_strategy_in_memory() {
    baton_test_support::double_texting::double_texting_suite(
        Arc::new(baton_runtime::memory::InMemoryRunStore::new()),
        Arc::new(InMemoryThreadStore::new()),
        "memory",
    )
    .await;
}

/// Test double for a model endpoint with a context window: refuses a
/// request whose text (system instruction, every message) is over
/// `window_tokens` at four characters a token, as a provider refuses an
/// oversized prompt; else answers, recording the messages it was sent.
struct ContextLimitedModel {
    window_tokens: usize,
    messages_sent: Mutex<Vec<usize>>,
}

#[async_trait]
impl LlmProvider for ContextLimitedModel {
    fn model_name(&self) -> String {
        "context-limited-double".into()
    }

    async fn complete(
        &self,
        _request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        Err(LlmError::Configuration("a chat node converses".into()))
    }

    async fn converse(
        &self,
        request: &ModelRequest,
        session: &ToolSession,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<SessionAnswer, LlmError> {
        let turns: usize = session
            .turns
            .iter()
            .map(|turn| match turn {
                SessionTurn::User { content } => content.chars().count(),
                SessionTurn::Assistant { content, .. } => content.chars().count(),
                other => serde_json::to_string(other).map_or(0, |text| text.len()),
            })
            .sum();
        let characters = request.system_instruction.chars().count()
            + request.user_message.chars().count()
            + turns;
        if characters.div_ceil(4) > self.window_tokens {
            return Err(LlmError::RequestRejected {
                status: 400,
                body: format!(
                    "prompt is {} tokens, over this model's {}",
                    characters.div_ceil(4),
                    self.window_tokens
                ),
            });
        }
        self.messages_sent
            .lock()
            .unwrap()
            .push(session.turns.len() + 1);
        Ok(SessionAnswer {
            content: "Answered within the window.".into(),
            tool_calls: Vec::new(),
            usage: TokenUsage {
                prompt_tokens: characters.div_ceil(4) as u64,
                completion_tokens: 5,
                cached_prompt_tokens: 0,
                cache_write_prompt_tokens: 0,
            },
            model: "gpt-4o-mini".into(),
        })
    }
}

/// A thread of 500 long exchanges: the request keeps the newest that fit
/// the model's context (the deployment's default model: the documented
/// 128,000-token window, a quarter kept for the answer), the model double
/// answers it, and the run says what was left out.
#[tokio::test(flavor = "multi_thread")]
async fn a_500_exchange_thread_is_answered_within_the_context_window_with_a_warning() {
    let model = Arc::new(ContextLimitedModel {
        window_tokens: baton_core::state::context_budget::DEFAULT_CONTEXT_WINDOW_TOKENS as usize,
        messages_sent: Mutex::new(Vec::new()),
    });
    let queue = Arc::new(InMemoryStepQueue::new());
    let threads = Arc::new(InMemoryThreadStore::new());
    let services = TestServices::with_model(model.clone())
        .queue(queue.clone())
        .threads(threads.clone())
        .build()
        .services;
    let thread = "thread_long";
    // 500 exchanges of 2 × 14,000 characters (7,000 tokens reckoned each):
    // the chat's newest 20 (chat.json's historyLimit) are 140,000 tokens,
    // more than the model's whole window: sent whole, the double refuses.
    for index in 0..500u64 {
        threads
            .record_exchange(
                ThreadKey::new("t", thread),
                &baton_core::records::chat::ChatExchange {
                    run_id: format!("run_{index:03}"),
                    at_millis: 1_000 + index,
                    user: format!("question {index} ").repeat(2_000)[..14_000].to_string(),
                    assistant: format!("answer {index} ").repeat(2_000)[..14_000].to_string(),
                    agent: None,
                    drafts: Vec::new(),
                    interrupted: false,
                    summary: None,
                },
            )
            .await
            .unwrap();
    }
    let submitted = services
        .runs
        .submit_chat(
            "t",
            &ChatRequest {
                thread_id: Some(thread.into()),
                ..message("Sum it all up, please.")
            },
        )
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
    assert_eq!(status, RunStatus::Completed, "answered, not refused");
    let frames = services
        .runs
        .read_all_events_after("t", &submitted.run_id, 0)
        .await
        .unwrap();
    assert_frames_match_schemas(&frames);
    let warnings: Vec<_> = frames
        .iter()
        .filter(|frame| frame.event_type.as_str() == "warning")
        .filter_map(|frame| frame.payload_value())
        .filter(|payload| payload["code"] == "context_trimmed")
        .collect();
    assert_eq!(warnings.len(), 1, "{frames:?}");
    let context = &warnings[0]["context"];
    let (dropped, kept) = (
        context["droppedExchanges"].as_u64().unwrap(),
        context["keptExchanges"].as_u64().unwrap(),
    );
    assert_eq!(dropped + kept, 20, "of the 20 the chat reads");
    assert_eq!(
        kept, 13,
        "13 × 7,000 tokens fit in 96,000 beside the prompt, 14 do not"
    );
    let estimated = context["estimatedTokens"].as_u64().unwrap();
    assert!((91_000..=96_000).contains(&estimated), "{estimated}");
    assert_eq!(context["budgetTokens"], 96_000);
    let sent = model.messages_sent.lock().unwrap().clone();
    assert_eq!(
        sent,
        [kept as usize * 2 + 1],
        "the kept exchanges and the new message"
    );
}
