//! The run life cycle, live, for code that embeds the runtime: every frame
//! a write of this process stores (a run created, a step committed, a
//! model's deltas appended) is handed, as soon as the write succeeded, to
//! whoever subscribed ([`Services::subscribe_to_lifecycle`](super::Services::subscribe_to_lifecycle)).
//! A subscription reads [`LifecycleEvent`]s, or the same frames rendered as
//! hook events (`prompt:submit`, `provider:request`, `tool:pre`, …, the
//! table of `baton_core::wire::hooks`) with [`LifecycleSubscription::next_hooks`].
//!
//! Invariants:
//! - Only what was stored is published, and only after it was stored; a
//!   write that failed publishes nothing.
//! - A write never waits for a subscriber: the bus holds the last
//!   [`LIFECYCLE_BUS_CAPACITY`] writes, and a subscriber that falls
//!   further behind is told how many it missed (`Lagged`), then reads on.
//! - With no subscriber, a write costs one atomic read: nothing is copied.
//! - It is this process's writes only. Another process (another Lambda
//!   instance, another `baton serve`) has its own bus; the store's event log
//!   (`GET /runs/{id}/events`) is the whole story, with its sequence
//!   numbers, which a live event does not know (its frames' `id` is 0).

use std::collections::HashMap;
use std::sync::Arc;

use baton_core::wire::event::{EventDraft, EventFrame};
use baton_core::wire::hooks::{HookEvent, HookRenderer};
use tokio::sync::broadcast;

/// Writes the bus keeps for a subscriber that is behind.
pub const LIFECYCLE_BUS_CAPACITY: usize = 1_024;

/// One write's frames.
#[derive(Debug, Clone, PartialEq)]
pub struct LifecycleEvent {
    pub tenant_id: String,
    pub run_id: String,
    pub correlation_id: String,
    /// In the order they were stored.
    pub frames: Vec<EventDraft>,
}

/// Where a subscription stands.
#[derive(Debug, Clone, PartialEq)]
pub enum LifecycleReceived {
    Event(Arc<LifecycleEvent>),
    /// The subscriber fell behind: this many writes were dropped for it.
    Lagged(u64),
}

/// The process's bus: cheap to clone, one per [`Services`](super::Services).
#[derive(Clone)]
pub struct LifecycleBus {
    sender: broadcast::Sender<Arc<LifecycleEvent>>,
}

impl Default for LifecycleBus {
    fn default() -> Self {
        let (sender, _) = broadcast::channel(LIFECYCLE_BUS_CAPACITY);
        LifecycleBus { sender }
    }
}

impl LifecycleBus {
    /// Whether anyone listens (a write builds nothing when no one does).
    pub fn is_heard(&self) -> bool {
        self.sender.receiver_count() > 0
    }

    /// Hands `frames`, stored for a run, to every subscriber.
    pub fn publish(
        &self,
        tenant_id: &str,
        run_id: &str,
        correlation_id: &str,
        frames: Vec<EventDraft>,
    ) {
        if frames.is_empty() || !self.is_heard() {
            return;
        }
        // A send fails only when the last subscriber left meanwhile.
        let _ = self.sender.send(Arc::new(LifecycleEvent {
            tenant_id: tenant_id.to_string(),
            run_id: run_id.to_string(),
            correlation_id: correlation_id.to_string(),
            frames,
        }));
    }

    pub fn subscribe(&self) -> LifecycleSubscription {
        LifecycleSubscription {
            receiver: self.sender.subscribe(),
            renderers: HashMap::new(),
        }
    }
}

/// One subscriber's view of the bus, from the moment it subscribed.
pub struct LifecycleSubscription {
    receiver: broadcast::Receiver<Arc<LifecycleEvent>>,
    /// Hook rendering keeps a count per run (`turn_count`): one renderer a
    /// run until its `orchestrator:complete`.
    renderers: HashMap<(String, String), HookRenderer>,
}

impl LifecycleSubscription {
    /// The next write's frames; `None` once the bus is gone.
    pub async fn next(&mut self) -> Option<LifecycleReceived> {
        match self.receiver.recv().await {
            Ok(event) => Some(LifecycleReceived::Event(event)),
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                Some(LifecycleReceived::Lagged(missed))
            }
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }

    /// The next write's frames as hook events, with the run they are of
    /// (a write with no hook event, such as a `phase`, is skipped); `None`
    /// once the bus is gone. A run whose frames were missed (`Lagged`) is
    /// rendered on from where it picks up.
    pub async fn next_hooks(&mut self) -> Option<(Arc<LifecycleEvent>, Vec<HookEvent>)> {
        loop {
            let event = match self.next().await? {
                LifecycleReceived::Event(event) => event,
                LifecycleReceived::Lagged(_) => continue,
            };
            let key = (event.tenant_id.clone(), event.run_id.clone());
            let renderer = self.renderers.entry(key.clone()).or_default();
            let mut hooks = Vec::new();
            for draft in &event.frames {
                let frame = EventFrame {
                    draft: draft.clone(),
                    id: 0,
                    run_id: event.run_id.clone(),
                    correlation_id: event.correlation_id.clone(),
                    forwarded: false,
                };
                hooks.extend(renderer.render(&frame));
            }
            if hooks
                .iter()
                .any(|hook| hook.event == "orchestrator:complete")
            {
                self.renderers.remove(&key);
            }
            if !hooks.is_empty() {
                return Some((event, hooks));
            }
        }
    }
}
