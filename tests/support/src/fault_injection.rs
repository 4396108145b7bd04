//! Test support: decorators that inject the faults a durable step loop
//! must survive: step-queue ones (duplicate delivery, a send lost after a
//! commit), which wrap any `StepQueue` so the same fault tests run on the
//! in-memory queue and on SQS, and a store that throttles (its next calls
//! fail retryably), which wraps any `RunStore`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use baton_core::basics::ids::RunKey;
use baton_core::state::run::StepMessage;

use baton_runtime::error::QueueError;
use baton_runtime::ports::{ReceivedStep, StepQueue};

/// Delivers out of order: each batch of messages is sent in reverse order,
/// a second apart (the last sent visible first), and every message is sent
/// again `late_by` after, when its run has moved on (a standard queue
/// promises no order; this is its worst case).
pub struct ReorderingQueue {
    pub inner: Arc<dyn StepQueue>,
    pub late_by: Duration,
}

#[async_trait]
impl StepQueue for ReorderingQueue {
    async fn send(&self, messages: &[StepMessage]) -> Result<(), QueueError> {
        for (index, message) in messages.iter().rev().enumerate() {
            let apart = Duration::from_secs(index as u64);
            self.inner.send_delayed(message, apart).await?;
            self.inner
                .send_delayed(message, apart + self.late_by)
                .await?;
        }
        Ok(())
    }
    async fn receive(
        &self,
        max_messages: usize,
        wait: Duration,
    ) -> Result<Vec<ReceivedStep>, QueueError> {
        self.inner.receive(max_messages, wait).await
    }
    async fn acknowledge(&self, receipt: &str) -> Result<(), QueueError> {
        self.inner.acknowledge(receipt).await
    }
    async fn release(&self, receipt: &str, delay: Duration) -> Result<(), QueueError> {
        self.inner.release(receipt, delay).await
    }
    async fn send_delayed(&self, message: &StepMessage, delay: Duration) -> Result<(), QueueError> {
        self.inner.send_delayed(message, delay).await
    }
    async fn hold(&self, receipt: &str, hold: Duration) -> Result<(), QueueError> {
        self.inner.hold(receipt, hold).await
    }
}

/// A process's clock, off the true time by a fixed amount (the clock skew
/// between machines).
pub struct SkewedClock {
    /// How far ahead (or, when `behind`, behind) it runs.
    pub off_by: Duration,
    pub behind: bool,
}

impl baton_runtime::ports::Clock for SkewedClock {
    fn now(&self) -> baton_core::basics::instant::Instant {
        let now = baton_runtime::ports::Clock::now(&baton_runtime::clock::SystemClock);
        if self.behind {
            now.minus(self.off_by)
        } else {
            now.plus(self.off_by)
        }
    }
}

/// Sends every message twice (at-least-once delivery, worst case).
pub struct DuplicatingQueue(pub Arc<dyn StepQueue>);

#[async_trait]
impl StepQueue for DuplicatingQueue {
    async fn send(&self, messages: &[StepMessage]) -> Result<(), QueueError> {
        self.0.send(messages).await?;
        self.0.send(messages).await
    }
    async fn receive(
        &self,
        max_messages: usize,
        wait: Duration,
    ) -> Result<Vec<ReceivedStep>, QueueError> {
        self.0.receive(max_messages, wait).await
    }
    async fn acknowledge(&self, receipt: &str) -> Result<(), QueueError> {
        self.0.acknowledge(receipt).await
    }
    async fn release(&self, receipt: &str, delay: Duration) -> Result<(), QueueError> {
        self.0.release(receipt, delay).await
    }
    async fn send_delayed(&self, message: &StepMessage, delay: Duration) -> Result<(), QueueError> {
        self.0.send_delayed(message, delay).await
    }
    async fn hold(&self, receipt: &str, hold: Duration) -> Result<(), QueueError> {
        self.0.hold(receipt, hold).await
    }
}

/// Fails the first `failures` sends that carry a step of one kind (node
/// steps unless told otherwise): the process "died" after committing and
/// before sending its outbox.
pub struct FailingSendQueue {
    inner: Arc<dyn StepQueue>,
    failures_left: AtomicUsize,
    /// The `StepCommand::kind_name` whose sends fail.
    kind: &'static str,
}

impl FailingSendQueue {
    pub fn new(inner: Arc<dyn StepQueue>, failures: usize) -> Self {
        Self::of_kind(inner, "execute_node", failures)
    }

    /// Fails the first `failures` sends carrying a step of `kind`.
    pub fn of_kind(inner: Arc<dyn StepQueue>, kind: &'static str, failures: usize) -> Self {
        FailingSendQueue {
            inner,
            failures_left: AtomicUsize::new(failures),
            kind,
        }
    }

    /// How many of the injected failures have not happened yet.
    pub fn failures_left(&self) -> usize {
        self.failures_left.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl StepQueue for FailingSendQueue {
    async fn send(&self, messages: &[StepMessage]) -> Result<(), QueueError> {
        let carries_the_kind = messages
            .iter()
            .any(|message| message.command.kind_name() == self.kind);
        if carries_the_kind
            && self
                .failures_left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                    left.checked_sub(1)
                })
                .is_ok()
        {
            return Err(QueueError::Unavailable(
                "injected: lost between commit and send".into(),
            ));
        }
        self.inner.send(messages).await
    }
    async fn receive(
        &self,
        max_messages: usize,
        wait: Duration,
    ) -> Result<Vec<ReceivedStep>, QueueError> {
        self.inner.receive(max_messages, wait).await
    }
    async fn acknowledge(&self, receipt: &str) -> Result<(), QueueError> {
        self.inner.acknowledge(receipt).await
    }
    async fn release(&self, receipt: &str, delay: Duration) -> Result<(), QueueError> {
        self.inner.release(receipt, delay).await
    }
    async fn send_delayed(&self, message: &StepMessage, delay: Duration) -> Result<(), QueueError> {
        self.inner.send_delayed(message, delay).await
    }
    async fn hold(&self, receipt: &str, hold: Duration) -> Result<(), QueueError> {
        self.inner.hold(receipt, hold).await
    }
}

/// A store that throttles: once armed, its next `n` calls fail with a
/// retryable `StoreError::Unavailable` (what DynamoDB's throttling and a
/// timed-out call become) before reaching the wrapped store; then it passes
/// everything through. Counts the calls it failed, and every call it saw
/// (the store calls a use case makes: the tenant history bench). Armed with
/// [`ThrottlingStore::corrupt_next`] instead, the calls fail for good
/// (`StoreError::Corrupt`, not retryable).
pub struct ThrottlingStore {
    inner: Arc<dyn baton_runtime::ports::RunStore>,
    failures_left: AtomicUsize,
    failed: AtomicUsize,
    seen: AtomicUsize,
    failing_for_good: std::sync::atomic::AtomicBool,
}

impl ThrottlingStore {
    pub fn new(inner: Arc<dyn baton_runtime::ports::RunStore>) -> Self {
        ThrottlingStore {
            inner,
            failures_left: AtomicUsize::new(0),
            failed: AtomicUsize::new(0),
            seen: AtomicUsize::new(0),
            failing_for_good: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The next `calls` calls fail retryably (replacing what was armed before).
    pub fn throttle_next(&self, calls: usize) {
        self.failing_for_good.store(false, Ordering::SeqCst);
        self.failures_left.store(calls, Ordering::SeqCst);
    }

    /// The next `calls` calls fail for good (replacing what was armed before).
    pub fn corrupt_next(&self, calls: usize) {
        self.failing_for_good.store(true, Ordering::SeqCst);
        self.failures_left.store(calls, Ordering::SeqCst);
    }

    /// How many calls it failed so far.
    pub fn calls_failed(&self) -> usize {
        self.failed.load(Ordering::SeqCst)
    }

    /// How many calls reached it so far (failed or passed on).
    pub fn calls_seen(&self) -> usize {
        self.seen.load(Ordering::SeqCst)
    }

    fn throttled(&self) -> Result<(), baton_runtime::error::StoreError> {
        self.seen.fetch_add(1, Ordering::SeqCst);
        let fail = self
            .failures_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                left.checked_sub(1)
            })
            .is_ok();
        if fail {
            self.failed.fetch_add(1, Ordering::SeqCst);
            if self.failing_for_good.load(Ordering::SeqCst) {
                return Err(baton_runtime::error::StoreError::Corrupt(
                    "an unreadable item (injected)".into(),
                ));
            }
            return Err(baton_runtime::error::StoreError::Unavailable(
                "ThrottlingException (injected)".into(),
            ));
        }
        Ok(())
    }
}

#[async_trait]
impl baton_runtime::ports::RunLog for ThrottlingStore {
    async fn create_run_within(
        &self,
        state: &baton_core::state::run::RunState,
        events: Vec<baton_core::wire::event::EventDraft>,
        outbox: Vec<StepMessage>,
        idempotency_key: Option<&str>,
        live_run_limit: Option<u64>,
    ) -> Result<baton_runtime::ports::CreateOutcome, baton_runtime::error::StoreError> {
        self.throttled()?;
        self.inner
            .create_run_within(state, events, outbox, idempotency_key, live_run_limit)
            .await
    }

    async fn load_run(
        &self,
        key: RunKey<'_>,
    ) -> Result<Option<baton_runtime::ports::StoredRun>, baton_runtime::error::StoreError> {
        self.throttled()?;
        self.inner.load_run(key).await
    }

    async fn commit_step(
        &self,
        key: RunKey<'_>,
        commit: baton_runtime::ports::StepCommit,
    ) -> Result<u64, baton_runtime::error::StoreError> {
        self.throttled()?;
        self.inner.commit_step(key, commit).await
    }

    async fn read_entries(
        &self,
        key: RunKey<'_>,
        prefix: &str,
    ) -> Result<Vec<baton_core::records::entries::RunEntry>, baton_runtime::error::StoreError> {
        self.throttled()?;
        self.inner.read_entries(key, prefix).await
    }

    async fn append_events(
        &self,
        key: RunKey<'_>,
        events: Vec<baton_core::wire::event::EventDraft>,
    ) -> Result<u64, baton_runtime::error::StoreError> {
        self.throttled()?;
        self.inner.append_events(key, events).await
    }

    async fn read_events(
        &self,
        key: RunKey<'_>,
        after_sequence: u64,
        limit: usize,
    ) -> Result<Vec<baton_core::wire::event::EventFrame>, baton_runtime::error::StoreError> {
        self.throttled()?;
        self.inner.read_events(key, after_sequence, limit).await
    }
}

#[async_trait]
impl baton_runtime::ports::NodeLeases for ThrottlingStore {
    async fn claim_node(
        &self,
        key: RunKey<'_>,
        claim: baton_runtime::ports::NodeClaim<'_>,
        events_on_claim: Vec<baton_core::wire::event::EventDraft>,
    ) -> Result<baton_runtime::ports::ClaimOutcome, baton_runtime::error::StoreError> {
        self.throttled()?;
        self.inner.claim_node(key, claim, events_on_claim).await
    }

    async fn release_claim(
        &self,
        key: RunKey<'_>,
        node_id: &str,
        attempt: u32,
        claimant: &str,
    ) -> Result<(), baton_runtime::error::StoreError> {
        self.throttled()?;
        self.inner
            .release_claim(key, node_id, attempt, claimant)
            .await
    }

    async fn renew_claim(
        &self,
        key: RunKey<'_>,
        claim: baton_runtime::ports::NodeClaim<'_>,
    ) -> Result<bool, baton_runtime::error::StoreError> {
        self.throttled()?;
        self.inner.renew_claim(key, claim).await
    }

    async fn run_holds_live_lease(
        &self,
        key: RunKey<'_>,
        now: baton_core::basics::instant::Instant,
    ) -> Result<bool, baton_runtime::error::StoreError> {
        self.throttled()?;
        self.inner.run_holds_live_lease(key, now).await
    }
}

#[async_trait]
impl baton_runtime::ports::OutboxStore for ThrottlingStore {
    async fn pending_outbox(
        &self,
        key: RunKey<'_>,
    ) -> Result<Vec<StepMessage>, baton_runtime::error::StoreError> {
        self.throttled()?;
        self.inner.pending_outbox(key).await
    }

    async fn mark_outbox_quiet(
        &self,
        key: RunKey<'_>,
        message_ids: &[String],
        quiet: baton_runtime::ports::OutboxQuiet,
    ) -> Result<(), baton_runtime::error::StoreError> {
        self.throttled()?;
        self.inner.mark_outbox_quiet(key, message_ids, quiet).await
    }

    async fn quiet_outbox(
        &self,
        quiet_before: baton_core::basics::instant::Instant,
        limit: usize,
    ) -> Result<Vec<baton_runtime::ports::QuietOutboxEntry>, baton_runtime::error::StoreError> {
        self.throttled()?;
        self.inner.quiet_outbox(quiet_before, limit).await
    }
}

#[async_trait]
impl baton_runtime::ports::RunQueries for ThrottlingStore {
    async fn live_runs(&self, tenant_id: &str) -> Result<u64, baton_runtime::error::StoreError> {
        self.throttled()?;
        self.inner.live_runs(tenant_id).await
    }

    async fn list_runs(
        &self,
        tenant_id: &str,
        query: &baton_core::state::listing::RunListQuery,
    ) -> Result<baton_core::state::listing::RunListPage, baton_runtime::error::StoreError> {
        self.throttled()?;
        self.inner.list_runs(tenant_id, query).await
    }

    async fn runs_awaiting_human(
        &self,
        tenant_id: &str,
    ) -> Result<Vec<baton_core::state::run::RunState>, baton_runtime::error::StoreError> {
        self.throttled()?;
        self.inner.runs_awaiting_human(tenant_id).await
    }
}
