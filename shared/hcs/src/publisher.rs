//! The transcript publisher on the consensus service: a topic per
//! concluded panel, every message of its transcript submitted in chain
//! order as a `jurybox.message`, every receipt awaited, and the receipt
//! (topic, each message's transaction id) handed back to be written into
//! the transcript the step commits.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use baton_core::contracts::panels::{LedgerReceipt, TranscriptPublication};
use baton_judge::transcript::ConversationMessage;
use baton_runtime::error::PublishError;
use baton_runtime::ports::{SecretStore, TranscriptPublisher};
use tokio::sync::OnceCell;

use crate::messages::TransactionId;
use crate::node_client::{ConsensusNode, NodeError};
use crate::operator::{Operator, topic_text, transaction_text};
use crate::settings::{HcsSettings, OPERATOR_KEY};

/// How many receipts are awaited at once.
const RECEIPTS_AT_ONCE: usize = 8;

/// A message as the specification's payload: `type` `jurybox.message`,
/// its phase, round, author, content and time, and its place in the hash
/// chain (`messageId`, `hash`), so the ledger's copy can be checked
/// against the run's.
pub fn jurybox_message(message: &ConversationMessage) -> serde_json::Value {
    let mut payload = serde_json::json!({
        "type": "jurybox.message",
        "phase": message.phase,
        "round": message.round,
        "content": message.content,
        "timestamp": message.timestamp,
        "messageId": message.id,
        "hash": message.hash,
    });
    if let (Some(agent), serde_json::Value::Object(fields)) = (&message.agent_id, &mut payload) {
        fields.insert("agentId".into(), serde_json::Value::String(agent.clone()));
    }
    payload
}

/// Publishes transcripts through one consensus node; the operator's key
/// is read from the secret store on first use.
pub struct HcsTranscripts {
    settings: HcsSettings,
    secrets: Arc<dyn SecretStore>,
    node: OnceCell<ConsensusNode>,
}

fn publish_error(error: NodeError) -> PublishError {
    match error {
        NodeError::Unavailable(reason) => PublishError::Unavailable(reason),
        refused => PublishError::Refused(refused.to_string()),
    }
}

impl HcsTranscripts {
    pub fn new(settings: HcsSettings, secrets: Arc<dyn SecretStore>) -> Self {
        HcsTranscripts {
            settings,
            secrets,
            node: OnceCell::new(),
        }
    }

    async fn node(&self) -> Result<&ConsensusNode, PublishError> {
        self.node
            .get_or_try_init(|| async {
                let key = self
                    .secrets
                    .reveal(&self.settings.operator_key)
                    .await
                    .map_err(|error| {
                        if error.retryable {
                            PublishError::Unavailable(format!("{OPERATOR_KEY}: {error}"))
                        } else {
                            PublishError::Refused(format!("{OPERATOR_KEY}: {error}"))
                        }
                    })?;
                let operator =
                    Operator::new(self.settings.operator_account, key.expose(), OPERATOR_KEY)
                        .map_err(|error| PublishError::Refused(error.to_string()))?;
                ConsensusNode::new(
                    &self.settings.node_url,
                    self.settings.node_account,
                    operator,
                    self.settings.receipt_timeout,
                )
                .map_err(|error| PublishError::Refused(error.to_string()))
            })
            .await
    }
}

#[async_trait]
impl TranscriptPublisher for HcsTranscripts {
    async fn publish(
        &self,
        tenant_id: &str,
        run_id: &str,
        publication: &TranscriptPublication,
    ) -> Result<Option<LedgerReceipt>, PublishError> {
        let node = self.node().await?;
        // The memo names the panel (the service keeps 100 bytes of it).
        let memo: String = format!("baton panel {}", publication.idempotency_key)
            .chars()
            .take(100)
            .collect();
        let topic = node
            .create_topic(&memo, self.settings.max_fee_tinybars)
            .await
            .map_err(publish_error)?;
        let mut sent: Vec<(String, Vec<TransactionId>)> = Vec::new();
        for (_, _, message) in publication.transcript.messages() {
            let payload = jurybox_message(message).to_string();
            let ids = node
                .submit_message(topic, payload.as_bytes(), self.settings.max_fee_tinybars)
                .await
                .map_err(publish_error)?;
            sent.push((message.id.clone(), ids));
        }
        // Every chunk reached consensus, a few receipts awaited at once.
        let every_chunk: Vec<TransactionId> = sent
            .iter()
            .flat_map(|(_, ids)| ids.iter().copied())
            .collect();
        for batch in every_chunk.chunks(RECEIPTS_AT_ONCE) {
            let awaited = batch.iter().map(|id| node.receipt(*id, "a message"));
            for outcome in futures_util::future::join_all(awaited).await {
                outcome.map_err(publish_error)?;
            }
        }
        let message_transactions: BTreeMap<String, String> = sent
            .into_iter()
            .filter_map(|(message_id, ids)| {
                ids.first()
                    .map(|first| (message_id, transaction_text(first)))
            })
            .collect();
        tracing::info!(
            tenant_id,
            run_id,
            node_id = %publication.node_id,
            topic = %topic_text(&topic),
            messages = message_transactions.len(),
            "judge transcript published to the consensus service"
        );
        Ok(Some(LedgerReceipt {
            topic_id: topic_text(&topic),
            message_transactions,
            explorer_url: self.settings.explorer_url.clone(),
        }))
    }
}
