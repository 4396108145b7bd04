//! The completion notifier of the processes that perform steps (the step
//! function, the CLI): the notification goes on the EventBridge bus
//! `BATON_EVENT_BUS` when one is set, and to the envelope's `callbackUrl`
//! POSTed, signed with `BATON_WEBHOOK_SECRET`, through the outbound guard.
//! Both in one attempt: when the webhook fails after the bus took the
//! event, the retry announces it again (same `deliveryId`).

use std::sync::Arc;

use baton_core::engine::NotificationDelivery;
use baton_outbound::SystemResolver;
use baton_outbound::webhook::WebhookSender;
use baton_runtime::error::DeliveryError;
use baton_runtime::ports::{Clock, CompletionNotifier};

use crate::config::Configuration;

/// Sends a delivery's webhook.
pub struct WebhookNotifier {
    sender: WebhookSender,
    clock: Arc<dyn Clock>,
    event_bus: Option<baton_aws::event_bus::EventBridgeBus>,
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
    pub fn with_event_bus(mut self, bus: baton_aws::event_bus::EventBridgeBus) -> Self {
        self.event_bus = Some(bus);
        self
    }

    /// From the configuration: the secret and the hosts plain http may reach.
    pub fn from_configuration(configuration: &Configuration, clock: Arc<dyn Clock>) -> Self {
        let notifier = WebhookNotifier::new(
            WebhookSender::new(
                &configuration.outbound_http_hosts,
                Arc::new(SystemResolver),
                configuration.webhook_secret.clone(),
            ),
            clock,
        );
        match &configuration.event_bus {
            Some(bus) => notifier.with_event_bus(baton_aws::event_bus::EventBridgeBus::new(bus)),
            None => notifier,
        }
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
            bus.put(&delivery.notification.event_type, &detail)
                .await
                .map_err(DeliveryError::EventBus)?;
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
            .map_err(DeliveryError::Webhook)
    }
}
