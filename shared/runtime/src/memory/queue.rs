//! The embedded default's step queue: at-least-once delivery in process
//! memory, with delayed release and delayed sends (timers) that wait in
//! the queue, never in the caller, as on SQS. Visible messages are handed
//! out fairly across tenants (round robin over each tenant's own FIFO
//! lane, `FairLanes`): a tenant with a thousand steps waiting delays
//! another tenant's next step by at most one step of each busy tenant,
//! not by its whole backlog.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use baton_core::state::run::StepMessage;
use tokio::sync::Notify;

use crate::error::QueueError;
use crate::ports::{ReceivedStep, StepQueue};

/// Visible messages, one FIFO lane per tenant, handed out round robin.
#[derive(Default)]
struct FairLanes {
    lanes: HashMap<String, VecDeque<(StepMessage, u32)>, foldhash::fast::RandomState>,
    /// Tenants with a visible message, in the order they are served next.
    turn: VecDeque<String>,
    len: usize,
}

impl FairLanes {
    fn push_back(&mut self, entry: (StepMessage, u32)) {
        let lane = self.lanes.entry(entry.0.tenant_id.clone()).or_default();
        if lane.is_empty() {
            self.turn.push_back(entry.0.tenant_id.clone());
        }
        lane.push_back(entry);
        self.len += 1;
    }

    /// The next message of the tenant whose turn it is; that tenant goes to
    /// the back of the turn while it has more.
    fn pop_front(&mut self) -> Option<(StepMessage, u32)> {
        let tenant = self.turn.pop_front()?;
        let lane = self.lanes.get_mut(&tenant)?;
        let entry = lane.pop_front();
        if lane.is_empty() {
            self.lanes.remove(&tenant);
        } else {
            self.turn.push_back(tenant);
        }
        if entry.is_some() {
            self.len -= 1;
        }
        entry
    }

    fn len(&self) -> usize {
        self.len
    }
}

impl Extend<(StepMessage, u32)> for FairLanes {
    fn extend<Entries: IntoIterator<Item = (StepMessage, u32)>>(&mut self, entries: Entries) {
        for entry in entries {
            self.push_back(entry);
        }
    }
}

#[derive(Default)]
struct QueueState {
    visible: FairLanes,
    /// Released with a delay: visible again from their instant on.
    delayed: Vec<(tokio::time::Instant, StepMessage, u32)>,
    /// Timers sent with a delay (`send_delayed`): due at their instant.
    timers: Vec<(tokio::time::Instant, StepMessage)>,
    in_flight: HashMap<String, (StepMessage, u32), foldhash::fast::RandomState>,
    next_receipt: u64,
}

impl QueueState {
    /// Makes the delayed messages whose time has come visible, in order.
    fn promote_due(&mut self) {
        if self.delayed.is_empty() && self.timers.is_empty() {
            return;
        }
        let now = tokio::time::Instant::now();
        self.delayed.sort_by_key(|(visible_at, _, _)| *visible_at);
        let due = self
            .delayed
            .iter()
            .take_while(|(visible_at, _, _)| *visible_at <= now)
            .count();
        for (_, message, count) in self.delayed.drain(..due) {
            self.visible.push_back((message, count));
        }
        let (due_timers, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.timers)
            .into_iter()
            .partition(|(due_at, _)| *due_at <= now);
        self.timers = waiting;
        self.visible
            .extend(due_timers.into_iter().map(|(_, message)| (message, 0)));
    }

    fn next_visible_at(&self) -> Option<tokio::time::Instant> {
        self.delayed
            .iter()
            .map(|(visible_at, _, _)| *visible_at)
            .chain(self.timers.iter().map(|(due_at, _)| *due_at))
            .min()
    }
}

/// At-least-once queue in process memory. A message released with a delay
/// waits in the queue (no caller sleeps through it), as on SQS.
#[derive(Default)]
pub struct InMemoryStepQueue {
    state: Mutex<QueueState>,
    message_arrived: Notify,
}

fn queue_poisoned() -> QueueError {
    QueueError::Unavailable("in-memory queue lock poisoned".into())
}

impl InMemoryStepQueue {
    pub fn new() -> Self {
        Self::default()
    }

    /// Messages visible, released with a delay, or in flight: work to do
    /// now or soon. Timers waiting for their due time are not counted.
    pub fn outstanding(&self) -> usize {
        self.state
            .lock()
            .map(|state| state.visible.len() + state.delayed.len() + state.in_flight.len())
            .unwrap_or(0)
    }

    /// Timers waiting for their due time.
    pub fn waiting_timers(&self) -> usize {
        self.state
            .lock()
            .map(|state| state.timers.len())
            .unwrap_or(0)
    }
}

#[async_trait]
impl StepQueue for InMemoryStepQueue {
    async fn send(&self, messages: &[StepMessage]) -> Result<(), QueueError> {
        let mut state = self.state.lock().map_err(|_| queue_poisoned())?;
        state
            .visible
            .extend(messages.iter().cloned().map(|message| (message, 0)));
        drop(state);
        self.message_arrived.notify_waiters();
        Ok(())
    }

    async fn receive(
        &self,
        max_messages: usize,
        wait: Duration,
    ) -> Result<Vec<ReceivedStep>, QueueError> {
        let notified = self.message_arrived.notified();
        tokio::pin!(notified);
        for round in 0..2 {
            let next_visible_at = {
                let mut state = self.state.lock().map_err(|_| queue_poisoned())?;
                state.promote_due();
                let mut received = Vec::with_capacity(max_messages.min(state.visible.len()));
                while received.len() < max_messages {
                    let Some((message, count)) = state.visible.pop_front() else {
                        break;
                    };
                    state.next_receipt += 1;
                    let receipt =
                        ["receipt-", itoa::Buffer::new().format(state.next_receipt)].concat();
                    state
                        .in_flight
                        .insert(receipt.clone(), (message.clone(), count + 1));
                    received.push(ReceivedStep {
                        message,
                        receipt,
                        receive_count: count + 1,
                    });
                }
                if !received.is_empty() || round == 1 || wait.is_zero() {
                    return Ok(received);
                }
                state.next_visible_at()
            };
            // Until a message arrives, a delayed one comes due, or the wait ends.
            let wait = next_visible_at.map_or(wait, |at| {
                wait.min(at.saturating_duration_since(tokio::time::Instant::now()))
            });
            let _ = tokio::time::timeout(wait, notified.as_mut()).await;
        }
        Ok(Vec::new())
    }

    async fn acknowledge(&self, receipt: &str) -> Result<(), QueueError> {
        let mut state = self.state.lock().map_err(|_| queue_poisoned())?;
        state.in_flight.remove(receipt);
        Ok(())
    }

    async fn release(&self, receipt: &str, delay: Duration) -> Result<(), QueueError> {
        let mut state = self.state.lock().map_err(|_| queue_poisoned())?;
        if let Some((message, count)) = state.in_flight.remove(receipt) {
            if delay.is_zero() {
                state.visible.push_back((message, count));
            } else {
                let visible_at = tokio::time::Instant::now() + delay;
                state.delayed.push((visible_at, message, count));
            }
        }
        drop(state);
        self.message_arrived.notify_waiters();
        Ok(())
    }

    async fn send_delayed(&self, message: &StepMessage, delay: Duration) -> Result<(), QueueError> {
        let mut state = self.state.lock().map_err(|_| queue_poisoned())?;
        let due_at = tokio::time::Instant::now() + delay;
        state.timers.push((due_at, message.clone()));
        drop(state);
        self.message_arrived.notify_waiters();
        Ok(())
    }
}

#[cfg(test)]
mod tests {

    /// A delayed release returns at once and the message waits in the queue
    /// until its time (paused clock: nothing sleeps).
    #[tokio::test(start_paused = true)]
    async fn a_delayed_release_waits_in_the_queue_not_in_the_caller() {
        use std::time::Duration;

        use baton_core::state::run::{StepCommand, StepMessage};

        use super::InMemoryStepQueue;
        use crate::ports::StepQueue;

        let queue = InMemoryStepQueue::new();
        let message = StepMessage::new("t", "run", StepCommand::Plan);
        queue.send(std::slice::from_ref(&message)).await.unwrap();
        let received = queue.receive(1, Duration::ZERO).await.unwrap().remove(0);
        let before = tokio::time::Instant::now();
        queue
            .release(&received.receipt, Duration::from_secs(60))
            .await
            .unwrap();
        assert_eq!(
            tokio::time::Instant::now(),
            before,
            "the caller did not wait"
        );
        assert_eq!(queue.outstanding(), 1);
        assert!(queue.receive(1, Duration::ZERO).await.unwrap().is_empty());
        tokio::time::advance(Duration::from_secs(59)).await;
        assert!(queue.receive(1, Duration::ZERO).await.unwrap().is_empty());
        // A receive that waits longer than the delay gets it when it comes due.
        let again = queue.receive(1, Duration::from_secs(5)).await.unwrap();
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].message, message);
        assert_eq!(again[0].receive_count, 2);
    }

    /// A tenant with a backlog does not hold another back: lanes are served
    /// round robin, each in its own order.
    #[tokio::test]
    async fn tenants_are_served_in_turn_each_in_its_own_order() {
        use std::time::Duration;

        use baton_core::state::run::{StepCommand, StepMessage};

        use super::InMemoryStepQueue;
        use crate::ports::StepQueue;

        let queue = InMemoryStepQueue::new();
        let flood: Vec<StepMessage> = (0..1_000)
            .map(|index| StepMessage::new("flooder", &format!("run-{index}"), StepCommand::Plan))
            .collect();
        queue.send(&flood).await.unwrap();
        queue
            .send(&[
                StepMessage::new("quiet", "q-1", StepCommand::Plan),
                StepMessage::new("quiet", "q-2", StepCommand::Plan),
            ])
            .await
            .unwrap();
        let received = queue.receive(4, Duration::ZERO).await.unwrap();
        let order: Vec<(&str, &str)> = received
            .iter()
            .map(|step| {
                (
                    step.message.tenant_id.as_str(),
                    step.message.run_id.as_str(),
                )
            })
            .collect();
        assert_eq!(
            order,
            [
                ("flooder", "run-0"),
                ("quiet", "q-1"),
                ("flooder", "run-1"),
                ("quiet", "q-2")
            ]
        );
        let rest = queue.receive(2_000, Duration::ZERO).await.unwrap();
        assert_eq!(rest.len(), 998);
        assert!(
            rest.iter()
                .enumerate()
                .all(|(index, step)| step.message.run_id == format!("run-{}", index + 2)),
            "one tenant's messages keep their order"
        );
        assert_eq!(queue.outstanding(), 1_000 + 2, "all in flight");
    }
}
