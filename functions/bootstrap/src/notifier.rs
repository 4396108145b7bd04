//! The completion notifier from the configuration: `BATON_WEBHOOK_SECRET`
//! signs the webhooks, `BATON_OUTBOUND_HTTP_HOSTS` are the hosts plain
//! http may reach, `BATON_EVENT_BUS` the bus events go on. The adapter
//! itself is `baton-notify`.

use std::sync::Arc;

use baton_notify::WebhookNotifier;
use baton_outbound::SystemResolver;
use baton_outbound::webhook::WebhookSender;
use baton_runtime::ports::Clock;

use crate::config::Configuration;

/// The notifier `configuration` describes.
pub fn completion_notifier(
    configuration: &Configuration,
    clock: Arc<dyn Clock>,
) -> WebhookNotifier {
    let notifier = WebhookNotifier::new(
        WebhookSender::new(
            &configuration.outbound_http_hosts,
            Arc::new(SystemResolver),
            configuration.webhook_secret.clone(),
        ),
        clock,
    );
    match &configuration.event_bus {
        Some(bus) => notifier.with_event_bus(baton_aws::events::EventBridgeBus::new(bus)),
        None => notifier,
    }
}
