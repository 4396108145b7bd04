//! Test support: step-queue decorators that inject the faults a durable
//! step loop must survive (duplicate delivery, a send lost after a commit).
//! They wrap any `StepQueue`, so the same fault tests run on the in-memory
//! queue and on SQS.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use baton_core::run::{StepCommand, StepMessage};

use crate::error::QueueError;
use crate::ports::{ReceivedStep, StepQueue};

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
}

/// Fails the first `failures` sends of node steps: the process "died"
/// after committing and before sending its outbox.
pub struct FailingSendQueue {
    inner: Arc<dyn StepQueue>,
    failures_left: AtomicUsize,
}

impl FailingSendQueue {
    pub fn new(inner: Arc<dyn StepQueue>, failures: usize) -> Self {
        FailingSendQueue {
            inner,
            failures_left: AtomicUsize::new(failures),
        }
    }
}

#[async_trait]
impl StepQueue for FailingSendQueue {
    async fn send(&self, messages: &[StepMessage]) -> Result<(), QueueError> {
        let carries_node_step = messages
            .iter()
            .any(|message| matches!(message.command, StepCommand::ExecuteNode { .. }));
        if carries_node_step
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
}
