//! The completion notifier of the processes that perform steps (the step
//! function, the CLI): the envelope's `callbackUrl` gets the notification
//! POSTed, signed with `BATON_WEBHOOK_SECRET`, through the outbound guard.
//! The event bus is not wired yet: `announce_to_event_bus` stays false, so
//! no delivery asks for it; one that does is refused by name.

use std::sync::Arc;

use baton_core::engine::NotificationDelivery;
use baton_outbound::SystemResolver;
use baton_outbound::webhook::WebhookSender;
use baton_runtime::ports::{Clock, CompletionNotifier};

use crate::config::Configuration;

/// Sends a delivery's webhook.
pub struct WebhookNotifier {
    sender: WebhookSender,
    clock: Arc<dyn Clock>,
}

impl WebhookNotifier {
    pub fn new(sender: WebhookSender, clock: Arc<dyn Clock>) -> Self {
        WebhookNotifier { sender, clock }
    }

    /// From the configuration: the secret and the hosts plain http may reach.
    pub fn from_configuration(configuration: &Configuration, clock: Arc<dyn Clock>) -> Self {
        WebhookNotifier::new(
            WebhookSender::new(
                &configuration.outbound_http_hosts,
                Arc::new(SystemResolver),
                configuration.webhook_secret.clone(),
            ),
            clock,
        )
    }
}

#[async_trait::async_trait]
impl CompletionNotifier for WebhookNotifier {
    async fn deliver(&self, delivery: &NotificationDelivery) -> Result<(), String> {
        if delivery.to_event_bus {
            return Err("no event bus is wired in this process".into());
        }
        let Some(url) = &delivery.callback_url else {
            return Ok(());
        };
        let body = serde_json::to_vec(&delivery.notification)
            .map_err(|error| format!("the notification cannot be encoded: {error}"))?;
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
    }
}
