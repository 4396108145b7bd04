//! `baton-notify`: the `CompletionNotifier` adapter of the processes that
//! perform steps (the step function, the CLI). A delivery goes on the
//! EventBridge bus when one is given, and to the envelope's `callbackUrl`
//! POSTed and signed through the outbound guard (`baton-outbound`). Both in
//! one attempt: when the webhook fails after the bus took the event, the
//! retry announces it again (same `deliveryId`).
//!
//! Invariant: one attempt per call, its failure named (`DeliveryError`);
//! retries and giving up are the engine's, through the queue.

use std::sync::Arc;

use baton_aws::events::EventBridgeBus;
use baton_core::engine::NotificationDelivery;
use baton_outbound::webhook::WebhookSender;
use baton_runtime::error::DeliveryError;
use baton_runtime::ports::{Clock, CompletionNotifier};

/// Sends a delivery's webhook, and announces it on the bus when one is set.
pub struct WebhookNotifier {
    sender: WebhookSender,
    clock: Arc<dyn Clock>,
    event_bus: Option<EventBridgeBus>,
}

impl WebhookNotifier {
    pub fn new(sender: WebhookSender, clock: Arc<dyn Clock>) -> Self {
        WebhookNotifier {
            sender,
            clock,
            event_bus: None,
        }
    }

    /// Also announces on `bus`.
    pub fn with_event_bus(mut self, bus: EventBridgeBus) -> Self {
        self.event_bus = Some(bus);
        self
    }
}

#[async_trait::async_trait]
impl CompletionNotifier for WebhookNotifier {
    async fn deliver(&self, delivery: &NotificationDelivery) -> Result<(), DeliveryError> {
        let detail = serde_json::to_value(&delivery.notification)
            .map_err(|error| DeliveryError::Encoding(error.to_string()))?;
        if delivery.to_event_bus {
            let Some(bus) = &self.event_bus else {
                return Err(DeliveryError::NotConfigured(
                    "no event bus is configured in this process (BATON_EVENT_BUS)".into(),
                ));
            };
            bus.put(&delivery.notification.event_type, &detail).await?;
        }
        let Some(url) = &delivery.callback_url else {
            return Ok(());
        };
        let body = detail.to_string().into_bytes();
        self.sender
            .post(
                url,
                &delivery.notification.event_type,
                &delivery.notification.delivery_id,
                &body,
                self.clock.now().unix_millis() / 1000,
            )
            .await
            .map(|_| ())
            .map_err(|failure| DeliveryError::Webhook(failure.to_string()))
    }
}
