//! The outbox items of the DynamoDB run store: a run's entries never
//! re-sent, the sweeper's sparse-index view across runs (every unconsumed
//! entry, by the time it has been quiet since: `gsi1sk`), and marking
//! entries quiet again after a re-send.

use aws_sdk_dynamodb::types::{AttributeValue, Delete, TransactWriteItem};
use baton_core::basics::ids::RunKey;
use baton_core::basics::instant::Instant;
use baton_core::state::run::StepMessage;
use baton_runtime::error::StoreError;
use baton_runtime::ports::{OutboxQuiet, QuietOutboxEntry};

use super::keys::{awaiting_human_pk, outbox_sk, pending_outbox_pk, run_pk};
use crate::dynamodb::store::{
    DynamoRunStore, Item, PENDING_OUTBOX_INDEX, PENDING_OUTBOX_SHARDS, put, read_text, s,
    sdk_failure, shard_of, unavailable,
};

fn pending_outbox_shard(run_id: &str) -> String {
    pending_outbox_pk(shard_of(run_id, PENDING_OUTBOX_SHARDS))
}

/// An entry's place in its shard of the sweeper's index: quiet since, then
/// its message id.
fn quiet_order(quiet_since: Instant, message_id: &str) -> String {
    format!("{:020}#{message_id}", quiet_since.unix_millis())
}

impl DynamoRunStore {
    /// The items of a commit's (or a new run's) outbox, each under the run
    /// that consumes it (its message's run: a child's end is addressed to
    /// its parent), so that run's commit removes it, its pending outbox
    /// lists it, and marking it sent finds it.
    pub(crate) fn outbox_items(
        &self,
        outbox: &[StepMessage],
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        outbox
            .iter()
            .map(|message| {
                let text = serde_json::to_string(message)
                    .map_err(|error| StoreError::Corrupt(error.to_string()))?;
                let item = Item::from([
                    (
                        "pk".to_string(),
                        s(run_pk(&message.tenant_id, &message.run_id)),
                    ),
                    ("sk".to_string(), s(outbox_sk(&message.message_id))),
                    ("message".to_string(), s(text)),
                    ("sent".to_string(), AttributeValue::Bool(false)),
                    ("resends".to_string(), AttributeValue::N("0".to_string())),
                    (
                        "gsi1pk".to_string(),
                        s(pending_outbox_shard(&message.run_id)),
                    ),
                    (
                        "gsi1sk".to_string(),
                        s(quiet_order(self.clock.now(), &message.message_id)),
                    ),
                ]);
                put(&self.table, item, None)
            })
            .collect()
    }

    /// Removes the handled message's outbox entry (a no-op when it is gone).
    pub(crate) fn consume_outbox_entry(
        &self,
        pk: &str,
        message_id: &str,
    ) -> Result<TransactWriteItem, StoreError> {
        Ok(TransactWriteItem::builder()
            .delete(
                Delete::builder()
                    .table_name(&self.table)
                    .key("pk", s(pk))
                    .key("sk", s(outbox_sk(message_id)))
                    .build()
                    .map_err(unavailable)?,
            )
            .build())
    }
    pub(crate) async fn query_pending_outbox(
        &self,
        tenant_id: &str,
        run_id: &str,
    ) -> Result<Vec<StepMessage>, StoreError> {
        let output = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
            .filter_expression("sent = :false")
            .expression_attribute_values(":pk", s(run_pk(tenant_id, run_id)))
            .expression_attribute_values(":prefix", s("OUT#"))
            .expression_attribute_values(":false", AttributeValue::Bool(false))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_failure)?;
        output
            .items()
            .iter()
            .map(|item| {
                serde_json::from_str(read_text(item, "message")?)
                    .map_err(|error| StoreError::Corrupt(error.to_string()))
            })
            .collect()
    }

    /// The tenant's runs waiting for a person, from the sparse index
    /// (every page), oldest first.
    pub(crate) async fn query_runs_awaiting_human(
        &self,
        tenant_id: &str,
    ) -> Result<Vec<baton_core::state::run::RunState>, StoreError> {
        let mut states = Vec::new();
        let mut start = None;
        loop {
            let output = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(PENDING_OUTBOX_INDEX)
                .key_condition_expression("gsi1pk = :awaiting")
                .expression_attribute_values(":awaiting", s(awaiting_human_pk(tenant_id)))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(sdk_failure)?;
            for item in output.items() {
                // A state in parts, or without its plan, is read whole
                // through the run's load.
                if crate::dynamodb::large_items::parts_of(item, "stateParts")? > 1
                    || item.contains_key(crate::dynamodb::plan_items::PLAN_VERSION_ATTRIBUTE)
                {
                    let run_id = read_text(item, "pk")?
                        .rsplit("#R#")
                        .next()
                        .unwrap_or_default()
                        .to_string();
                    if let Some(stored) = baton_runtime::ports::RunLog::load_run(
                        self,
                        RunKey::new(tenant_id, &run_id),
                    )
                    .await?
                    {
                        states.push(stored.state);
                    }
                    continue;
                }
                states.push(crate::dynamodb::state_codec::decode_state(
                    item.get("state"),
                )?);
            }
            match output.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(states),
            }
        }
    }

    pub(crate) async fn query_quiet_outbox(
        &self,
        quiet_before: Instant,
        limit: usize,
    ) -> Result<Vec<QuietOutboxEntry>, StoreError> {
        let mut quiet: Vec<(String, QuietOutboxEntry)> = Vec::new();
        for shard in 0..PENDING_OUTBOX_SHARDS {
            let output = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(PENDING_OUTBOX_INDEX)
                .key_condition_expression("gsi1pk = :shard AND gsi1sk < :cutoff")
                .expression_attribute_values(":shard", s(pending_outbox_pk(shard)))
                .expression_attribute_values(
                    ":cutoff",
                    s(format!("{:020}", quiet_before.unix_millis())),
                )
                .limit(i32::try_from(limit.clamp(1, 1000)).unwrap_or(1000))
                .send()
                .await
                .map_err(sdk_failure)?;
            for item in output.items() {
                let order = read_text(item, "gsi1sk")?.to_string();
                let message = serde_json::from_str(read_text(item, "message")?)
                    .map_err(|error| StoreError::Corrupt(error.to_string()))?;
                quiet.push((
                    order,
                    QuietOutboxEntry {
                        message,
                        resends: resends_of(item),
                    },
                ));
            }
        }
        quiet.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(quiet
            .into_iter()
            .take(limit)
            .map(|(_, entry)| entry)
            .collect())
    }

    pub(crate) async fn update_outbox_quiet(
        &self,
        tenant_id: &str,
        run_id: &str,
        message_ids: &[String],
        quiet: OutboxQuiet,
    ) -> Result<(), StoreError> {
        let pk = run_pk(tenant_id, run_id);
        for message_id in message_ids {
            let marked = self
                .client
                .update_item()
                .table_name(&self.table)
                .key("pk", s(&pk))
                .key("sk", s(outbox_sk(message_id)))
                .update_expression(
                    "SET sent = :sent, resends = :resends, gsi1pk = :shard, gsi1sk = :order",
                )
                // Never creates an item: an entry already consumed (its
                // step committed meanwhile) is gone, which is success.
                .condition_expression("attribute_exists(pk)")
                .expression_attribute_values(":sent", AttributeValue::Bool(quiet.resends > 0))
                .expression_attribute_values(
                    ":resends",
                    AttributeValue::N(quiet.resends.to_string()),
                )
                .expression_attribute_values(":shard", s(pending_outbox_shard(run_id)))
                .expression_attribute_values(":order", s(quiet_order(quiet.since, message_id)))
                .send()
                .await;
            match marked {
                Ok(_) => {}
                Err(error)
                    if error
                        .as_service_error()
                        .is_some_and(|service| service.is_conditional_check_failed_exception()) => {
                }
                Err(error) => {
                    return Err(sdk_failure(error));
                }
            }
        }
        Ok(())
    }
}

/// How many times an entry was re-sent: `resends`, or for an entry written
/// before the count existed, 1 when it was marked `sent`.
fn resends_of(item: &Item) -> u32 {
    match item.get("resends") {
        Some(AttributeValue::N(count)) => count.parse().unwrap_or(0),
        _ => u32::from(matches!(item.get("sent"), Some(AttributeValue::Bool(true)))),
    }
}
