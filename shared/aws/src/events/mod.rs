//! Announcing runs on an EventBridge bus: one `PutEvents` entry per
//! notification (source `baton`, `detail-type` the notification's type,
//! `detail` its JSON). The client is made on first use, so a process that
//! never announces never loads it.

use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use baton_runtime::error::DeliveryError;
use tokio::sync::OnceCell;

/// The events' `source`.
pub const EVENT_SOURCE: &str = "baton";

/// A bus runs are announced on.
pub struct EventBridgeBus {
    bus_name: String,
    client: OnceCell<aws_sdk_eventbridge::Client>,
}

impl EventBridgeBus {
    pub fn new(bus_name: impl Into<String>) -> Self {
        EventBridgeBus {
            bus_name: bus_name.into(),
            client: OnceCell::new(),
        }
    }

    /// Puts one event; `Err` says why it was not accepted.
    pub async fn put(
        &self,
        detail_type: &str,
        detail: &serde_json::Value,
    ) -> Result<(), DeliveryError> {
        let client = self
            .client
            .get_or_init(|| async {
                crate::AwsConnection::from_environment()
                    .await
                    .eventbridge_client()
            })
            .await;
        let entry = PutEventsRequestEntry::builder()
            .source(EVENT_SOURCE)
            .detail_type(detail_type)
            .detail(detail.to_string())
            .event_bus_name(&self.bus_name)
            .build();
        let output = client
            .put_events()
            .entries(entry)
            .send()
            .await
            .map_err(|error| {
                DeliveryError::EventBus(crate::sdk_errors::call_failure("EventBridge", &error).text)
            })?;
        if output.failed_entry_count() > 0 {
            let reason = output
                .entries()
                .iter()
                .find_map(|entry| {
                    entry.error_code().map(|code| {
                        format!(
                            "{code}: {}",
                            crate::sdk_errors::scrub(entry.error_message().unwrap_or_default())
                        )
                    })
                })
                .unwrap_or_else(|| "refused without a reason".into());
            return Err(DeliveryError::EventBus(format!(
                "EventBridge PutEvents refused the event: {reason}"
            )));
        }
        Ok(())
    }
}
