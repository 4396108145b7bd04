//! A chat turn reads its thread by page from the newest end, so its cost
//! does not grow with the thread: on a thread of 2,000 exchanges, a turn
//! reads at most two pages (100 exchanges) and its model is given the
//! newest ones, oldest first. The thread store is the real in-memory one
//! behind a counting decorator; the model is a test double answering each
//! turn.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use baton_core::basics::ids::ThreadKey;
use baton_core::records::chat::ChatExchange;
use baton_core::records::conversation::{SessionAnswer, ToolSession};
use baton_core::records::thread_lane::ThreadLane;
use baton_core::records::thread_listing::{ThreadListPage, ThreadListQuery};
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunStatus, TokenUsage};
use baton_runtime::error::{LlmError, StoreError};
use baton_runtime::memory::{InMemoryStepQueue, InMemoryThreadStore};
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta, ThreadPage, ThreadStore};
use baton_runtime::services::ChatRequest;
use baton_runtime::workers::LocalRunner;
use baton_test_support::TestServices;
use tokio::sync::mpsc::UnboundedSender;

const EXCHANGES: usize = 2_000;

/// The in-memory thread store, counting the exchanges each read returns.
struct Counting {
    inner: InMemoryThreadStore,
    exchanges_read: AtomicUsize,
}

#[async_trait]
impl ThreadStore for Counting {
    async fn thread_exchanges(
        &self,
        key: ThreadKey<'_>,
    ) -> Result<Option<Vec<ChatExchange>>, StoreError> {
        let read = self.inner.thread_exchanges(key).await?;
        let count = read.as_ref().map_or(0, Vec::len);
        self.exchanges_read.fetch_add(count, Ordering::SeqCst);
        Ok(read)
    }
    async fn thread_exchanges_before(
        &self,
        key: ThreadKey<'_>,
        before: Option<&(u64, String)>,
        limit: usize,
    ) -> Result<Option<ThreadPage>, StoreError> {
        let page = self
            .inner
            .thread_exchanges_before(key, before, limit)
            .await?;
        let count = page.as_ref().map_or(0, |page| page.exchanges.len());
        self.exchanges_read.fetch_add(count, Ordering::SeqCst);
        Ok(page)
    }
    async fn record_exchange(
        &self,
        key: ThreadKey<'_>,
        exchange: &ChatExchange,
    ) -> Result<(), StoreError> {
        self.inner.record_exchange(key, exchange).await
    }
    async fn list_threads(
        &self,
        tenant_id: &str,
        query: &ThreadListQuery,
    ) -> Result<ThreadListPage, StoreError> {
        self.inner.list_threads(tenant_id, query).await
    }
    async fn thread_lane(&self, key: ThreadKey<'_>) -> Result<(ThreadLane, u64), StoreError> {
        self.inner.thread_lane(key).await
    }
    async fn put_thread_lane(
        &self,
        key: ThreadKey<'_>,
        lane: &ThreadLane,
        expected_version: u64,
    ) -> Result<bool, StoreError> {
        self.inner
            .put_thread_lane(key, lane, expected_version)
            .await
    }
}

/// Test double for the model endpoint: records each turn's session.
#[derive(Default)]
struct Replies {
    sessions: Mutex<Vec<ToolSession>>,
}

#[async_trait]
impl LlmProvider for Replies {
    fn model_name(&self) -> String {
        "replies".into()
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
        _request: &ModelRequest,
        session: &ToolSession,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<SessionAnswer, LlmError> {
        self.sessions.lock().unwrap().push(session.clone());
        Ok(SessionAnswer {
            content: "Noted.".into(),
            tool_calls: Vec::new(),
            usage: TokenUsage::default(),
            model: "gpt-4o-mini".into(),
        })
    }
}

#[tokio::test]
async fn a_turn_on_a_long_thread_reads_its_newest_pages_only() {
    let threads = Arc::new(Counting {
        inner: InMemoryThreadStore::new(),
        exchanges_read: AtomicUsize::new(0),
    });
    let key = ThreadKey::new("t", "long-thread");
    for index in 0..EXCHANGES {
        let exchange = ChatExchange {
            run_id: format!("run-{index:05}"),
            at_millis: 1_000 + index as u64,
            user: format!("message {index}"),
            assistant: format!("answer {index}"),
            agent: None,
            drafts: Vec::new(),
            interrupted: false,
            summary: None,
        };
        threads.record_exchange(key, &exchange).await.unwrap();
    }
    let model = Arc::new(Replies::default());
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(model.clone())
        .queue(queue.clone())
        .threads(threads.clone())
        .build()
        .services;
    let request = ChatRequest {
        message: "And now?".into(),
        thread_id: Some("long-thread".into()),
        ..ChatRequest::default()
    };
    let submitted = services.runs.submit_chat("t", &request).await.unwrap();
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
    let read = threads.exchanges_read.load(Ordering::SeqCst);
    assert!(
        read <= 100,
        "a turn on a thread of {EXCHANGES} read {read} exchanges"
    );
    let sessions = model.sessions.lock().unwrap();
    let shown = format!("{:?}", sessions[0]);
    assert!(
        shown.contains(&format!("message {}", EXCHANGES - 1)),
        "the newest exchange is in the turn's history"
    );
    assert!(
        !shown.contains("message 0\""),
        "the oldest is not: {}",
        &shown[..shown.len().min(400)]
    );
}
