//! A chat agent remembers a signed-in person's preference across threads
//! (the shipped `registry/chat.json` has `rememberPreferences`): in one
//! thread the person states it and the agent keeps it with `memory_put`;
//! in a new thread the agent looks it up with `memory_search` and answers
//! by it. The memory tools are offered only to a message that names its
//! person, and write only that person's namespace.
//!
//! The model is a test double of a tool-calling chat model: it keeps a
//! stated preference, searches before answering a new thread, and answers
//! with what the search found (so the answer shows what it was given).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use baton_core::records::conversation::{SessionAnswer, SessionTurn, ToolCallRequest, ToolSession};
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunStatus, TokenUsage};
use baton_runtime::error::LlmError;
use baton_runtime::memory::{InMemoryStepQueue, InMemoryThreadStore};
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use baton_runtime::services::{ChatRequest, Services};
use baton_runtime::workers::LocalRunner;
use baton_test_support::{TestServices, assert_frames_match_schemas};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

const PERSON: &str = "ana@example.com";

/// Test double for a tool-calling chat model; records the tools each
/// turn was offered.
#[derive(Default)]
struct RememberingChatModel {
    offered: Mutex<Vec<Vec<String>>>,
}

fn answer(content: &str, tool_calls: Vec<ToolCallRequest>) -> SessionAnswer {
    SessionAnswer {
        content: content.into(),
        tool_calls,
        usage: TokenUsage::default(),
        model: "chat-double".into(),
    }
}

fn call(id: &str, name: &str, arguments: Value) -> ToolCallRequest {
    ToolCallRequest {
        id: id.into(),
        name: name.into(),
        arguments: arguments.to_string(),
    }
}

#[async_trait]
impl LlmProvider for RememberingChatModel {
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
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<SessionAnswer, LlmError> {
        let offered: Vec<String> = session.tools.iter().map(|tool| tool.name.clone()).collect();
        self.offered.lock().unwrap().push(offered.clone());
        if let Some(SessionTurn::Tool { content, .. }) = session.turns.last() {
            let result: Value = serde_json::from_str(content).unwrap_or(Value::Null);
            if let Some(kept) = result.get("kept") {
                return Ok(answer(&format!("Noted ({}).", kept["key"]), Vec::new()));
            }
            let found: Vec<String> = result["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|item| item["text"].as_str().map(str::to_string))
                .collect();
            return Ok(answer(
                &format!("Answering as you prefer: {}", found.join("; ")),
                Vec::new(),
            ));
        }
        if !offered.iter().any(|name| name == "memory_search") {
            return Ok(answer("No memory here.", Vec::new()));
        }
        let message = &request.user_message;
        if message.contains("I prefer") {
            return Ok(answer(
                "",
                vec![call(
                    "call_put",
                    "memory_put",
                    json!({"key": "answer_format", "text": "short bullet points, no jargon"}),
                )],
            ));
        }
        Ok(answer(
            "",
            vec![call(
                "call_search",
                "memory_search",
                json!({"query": "answer format preferences"}),
            )],
        ))
    }
}

struct Chat {
    services: Services,
    queue: Arc<InMemoryStepQueue>,
    model: Arc<RememberingChatModel>,
}

fn chat() -> Chat {
    let model = Arc::new(RememberingChatModel::default());
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(model.clone())
        .queue(queue.clone())
        .threads(Arc::new(InMemoryThreadStore::new()))
        .build()
        .services;
    Chat {
        services,
        queue,
        model,
    }
}

impl Chat {
    async fn say(&self, text: &str, user: Option<&str>) -> (String, Value) {
        let request = ChatRequest {
            message: text.into(),
            user: user.map(str::to_string),
            ..ChatRequest::default()
        };
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
        let frames = self
            .services
            .runs
            .read_all_events_after("t", &submitted.run_id, 0)
            .await
            .unwrap();
        assert_frames_match_schemas(&frames);
        (submitted.run_id, stored.state.output.unwrap())
    }
}

fn preferences() -> Vec<String> {
    vec!["people".into(), PERSON.into(), "preferences".into()]
}

#[tokio::test(flavor = "multi_thread")]
async fn a_preference_kept_in_one_thread_is_used_in_another() {
    let chat = chat();
    let (first_run, first) = chat
        .say(
            "I prefer short bullet points and no jargon, always.",
            Some(PERSON),
        )
        .await;
    assert_eq!(first["message"], "Noted (\"answer_format\").");
    let kept = chat
        .services
        .memory
        .get("t", &preferences(), "answer_format")
        .await
        .unwrap()
        .expect("the preference is kept under the person's namespace");
    assert_eq!(kept.text, "short bullet points, no jargon");
    assert_eq!(kept.provenance.person.as_deref(), Some(PERSON));
    assert_eq!(kept.provenance.run_id.as_deref(), Some(first_run.as_str()));

    // A new thread (no thread id): nothing of the first thread's history.
    let (_, second) = chat.say("Summarise our launch plan.", Some(PERSON)).await;
    assert_ne!(second["threadId"], first["threadId"]);
    assert_eq!(
        second["message"],
        "Answering as you prefer: short bullet points, no jargon"
    );

    // Another person's new thread finds nothing of Ana's.
    let (_, other) = chat
        .say("Summarise our launch plan.", Some("ben@example.com"))
        .await;
    assert_eq!(other["message"], "Answering as you prefer: ");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_without_its_person_is_offered_no_memory_tools() {
    let chat = chat();
    let (_, answered) = chat.say("I prefer long answers.", None).await;
    assert_eq!(answered["message"], "No memory here.");
    let offered = chat.model.offered.lock().unwrap().clone();
    assert!(
        offered
            .iter()
            .all(|tools| !tools.iter().any(|name| name.starts_with("memory_"))),
        "{offered:?}"
    );
    assert!(
        offered[0].iter().any(|name| name == "registry_search"),
        "the other tools are still offered: {offered:?}"
    );
}
