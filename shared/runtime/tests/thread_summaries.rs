//! Summarised threads (`chat.json` `summarizeDroppedHistory`): a thread
//! longer than `historyLimit` has what each message leaves out summarised
//! by a model call, folded forward message after message, so nothing the
//! person said is lost and no request holds more than the limit; a failed
//! summary leaves the exchanges out, unsummarised, and says so. The real
//! engine, step service and in-memory stores; the model is a test double
//! (its chat answers numbered, its summaries naming what they were given).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use baton_core::records::conversation::{SessionAnswer, SessionTurn, ToolSession};
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunStatus, TokenUsage};
use baton_runtime::error::LlmError;
use baton_runtime::memory::{InMemoryStepQueue, InMemoryThreadStore};
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use baton_runtime::services::{ChatRequest, Services};
use baton_runtime::workers::LocalRunner;
use baton_test_support::{TestServices, assert_frames_match_schemas, repository_registry};
use tokio::sync::mpsc::UnboundedSender;

/// Test double for the model endpoint.
#[derive(Default)]
struct SummarisingModel {
    /// Each chat turn: its system instruction and how many messages it sent.
    chat_turns: Mutex<Vec<(String, usize)>>,
    /// Each summariser request's user message.
    summaries_asked: Mutex<Vec<String>>,
    /// Fail the summariser (a provider error).
    fail_summaries: Mutex<bool>,
}

fn usage() -> TokenUsage {
    TokenUsage {
        prompt_tokens: 10,
        completion_tokens: 5,
        ..TokenUsage::default()
    }
}

#[async_trait]
impl LlmProvider for SummarisingModel {
    fn model_name(&self) -> String {
        "summarising-double".into()
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        assert_eq!(request.schema_name, "history_summary");
        if *self.fail_summaries.lock().unwrap() {
            return Err(LlmError::RequestRejected {
                status: 503,
                body: "the summariser is down".into(),
            });
        }
        let mut asked = self.summaries_asked.lock().unwrap();
        asked.push(request.user_message.clone());
        // Names every question it was given, and the summary it folds in.
        let questions: Vec<&str> = request
            .user_message
            .lines()
            .filter_map(|line| line.strip_prefix("Person: "))
            .collect();
        let earlier = request
            .user_message
            .strip_prefix("Summary so far:\n")
            .and_then(|rest| rest.split("\n\nThen:").next())
            .map(|earlier| format!("{earlier}; "))
            .unwrap_or_default();
        Ok(ModelAnswer {
            content:
                serde_json::json!({"summary": format!("{earlier}asked {}", questions.join(", "))})
                    .to_string(),
            usage: usage(),
            model: "gpt-4o-mini".into(),
        })
    }

    async fn converse(
        &self,
        request: &ModelRequest,
        session: &ToolSession,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<SessionAnswer, LlmError> {
        let mut turns = self.chat_turns.lock().unwrap();
        turns.push((request.system_instruction.clone(), session.turns.len() + 1));
        let sent_user = session
            .turns
            .iter()
            .filter(|turn| matches!(turn, SessionTurn::User { .. }))
            .count();
        Ok(SessionAnswer {
            content: format!(
                "Reply {} (saw {} earlier questions).",
                turns.len(),
                sent_user
            ),
            tool_calls: Vec::new(),
            usage: usage(),
            model: "gpt-4o-mini".into(),
        })
    }
}

const HISTORY_LIMIT: usize = 3;

fn summarising_services(model: Arc<SummarisingModel>) -> (Services, Arc<InMemoryStepQueue>) {
    let mut registry = (*repository_registry()).clone();
    let mut settings = registry.chat_settings().unwrap().clone();
    settings.summarize_dropped_history = true;
    settings.history_limit = HISTORY_LIMIT;
    registry.set_chat_settings(settings, "chat.json").unwrap();
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(model)
        .registry(Arc::new(registry))
        .queue(queue.clone())
        .threads(Arc::new(InMemoryThreadStore::new()))
        .build()
        .services;
    (services, queue)
}

async fn say(
    services: &Services,
    queue: &Arc<InMemoryStepQueue>,
    thread: Option<&str>,
    text: &str,
) -> (String, String) {
    let submitted = services
        .runs
        .submit_chat(
            "t",
            &ChatRequest {
                message: text.into(),
                thread_id: thread.map(str::to_string),
                ..ChatRequest::default()
            },
        )
        .await
        .unwrap();
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue: queue.clone(),
    };
    assert_eq!(
        runner
            .run_until_settled("t", &submitted.run_id)
            .await
            .unwrap(),
        RunStatus::Completed
    );
    (submitted.run_id, submitted.thread_id)
}

async fn trimmed_warnings(services: &Services, run_id: &str) -> Vec<serde_json::Value> {
    let frames = services
        .runs
        .read_all_events_after("t", run_id, 0)
        .await
        .unwrap();
    assert_frames_match_schemas(&frames);
    frames
        .iter()
        .filter(|frame| frame.event_type.as_str() == "warning")
        .filter(|frame| frame.payload.as_ref().unwrap()["code"] == "context_trimmed")
        .map(|frame| {
            let mut payload = frame.payload_value().unwrap();
            payload["message"] = frame.message.clone().unwrap_or_default().into();
            payload
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn what_each_message_leaves_out_is_summarised_and_folded_forward() {
    let model = Arc::new(SummarisingModel::default());
    let (services, queue) = summarising_services(model.clone());
    let (_, thread) = say(&services, &queue, None, "q1").await;
    for index in 2..=HISTORY_LIMIT + 1 {
        let (run, _) = say(&services, &queue, Some(&thread), &format!("q{index}")).await;
        assert!(trimmed_warnings(&services, &run).await.is_empty());
    }
    assert!(
        model.summaries_asked.lock().unwrap().is_empty(),
        "nothing left out yet: no summary"
    );
    // The fifth message: q1 falls out of the newest three and is summarised.
    let (fifth, _) = say(&services, &queue, Some(&thread), "q5").await;
    let asked = model.summaries_asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert!(asked[0].contains("Person: q1\n"), "{}", asked[0]);
    assert!(!asked[0].contains("Person: q2"), "{}", asked[0]);
    let (system, sent) = model.chat_turns.lock().unwrap().last().unwrap().clone();
    assert!(
        system.contains("summarised (1 earlier exchanges):\nasked q1"),
        "{system}"
    );
    assert_eq!(
        sent,
        HISTORY_LIMIT * 2 + 1,
        "the newest three and the message"
    );
    let warnings = trimmed_warnings(&services, &fifth).await;
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0]["context"]["droppedExchanges"], 1);
    assert!(
        warnings[0]["message"]
            .as_str()
            .unwrap()
            .contains("summarised"),
        "{}",
        warnings[0]["message"]
    );
    // The thread keeps the summary with the exchange.
    let threads = services
        .runs
        .thread_page("t", &thread, None, 1000)
        .await
        .unwrap()
        .exchanges;
    assert_eq!(
        threads.last().unwrap().summary.as_ref().unwrap().text,
        "asked q1"
    );

    // The sixth: only q2 is new to summarise; the summary folds in q1's.
    say(&services, &queue, Some(&thread), "q6").await;
    let asked = model.summaries_asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 2);
    assert!(
        asked[1].starts_with("Summary so far:\nasked q1\n"),
        "{}",
        asked[1]
    );
    assert!(asked[1].contains("Person: q2\n") && !asked[1].contains("Person: q1"));
    let (system, _) = model.chat_turns.lock().unwrap().last().unwrap().clone();
    assert!(
        system.contains("summarised (2 earlier exchanges):\nasked q1; asked q2"),
        "{system}"
    );
    // The summariser's tokens are the run's.
    let snapshot = services.runs.load("t", &fifth).await.unwrap().unwrap();
    assert_eq!(
        snapshot.state.total_usage().total(),
        30,
        "a chat turn and a summary"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_summary_leaves_the_exchanges_out_and_says_so() {
    let model = Arc::new(SummarisingModel::default());
    let (services, queue) = summarising_services(model.clone());
    let (_, thread) = say(&services, &queue, None, "q1").await;
    for index in 2..=HISTORY_LIMIT + 1 {
        say(&services, &queue, Some(&thread), &format!("q{index}")).await;
    }
    *model.fail_summaries.lock().unwrap() = true;
    let (run, _) = say(&services, &queue, Some(&thread), "q5").await;
    let warnings = trimmed_warnings(&services, &run).await;
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let message = warnings[0]["message"].as_str().unwrap();
    assert!(
        message.contains("unsummarised: the summariser failed"),
        "{message}"
    );
    let (system, sent) = model.chat_turns.lock().unwrap().last().unwrap().clone();
    assert!(!system.contains("summarised ("), "{system}");
    assert_eq!(sent, HISTORY_LIMIT * 2 + 1);
    // The next message, with the summariser back, summarises what is
    // uncovered and left out: q1 and q2.
    *model.fail_summaries.lock().unwrap() = false;
    say(&services, &queue, Some(&thread), "q6").await;
    let asked = model.summaries_asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0].contains("Person: q1\n") && asked[0].contains("Person: q2\n"),
        "{}",
        asked[0]
    );
    let (system, _) = model.chat_turns.lock().unwrap().last().unwrap().clone();
    assert!(
        system.contains("summarised (2 earlier exchanges):\nasked q1, q2"),
        "{system}"
    );
}
