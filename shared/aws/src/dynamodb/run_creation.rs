//! Creating a run on DynamoDB: one transaction writes the run, its first
//! frames and outbox, its listings, the live-run counter and its
//! idempotency key. A key whose run is gone but whose own item has no
//! expiry yet (the retention pass had not reached it) is released and the
//! creation tried once more, so a submission under it makes a new run.

use aws_sdk_dynamodb::types::AttributeValue;
use baton_core::basics::ids::RunKey;
use baton_core::state::run::{RunState, StepMessage};
use baton_core::wire::event::EventDraft;
use baton_runtime::error::StoreError;
use baton_runtime::ports::{CreateOutcome, RunLog};

use crate::dynamodb::keys::{idempotency_pk, run_pk, state_part_sk};
use crate::dynamodb::large_items;
use crate::dynamodb::state_codec::encode_state_parts;
use crate::dynamodb::store::{
    DynamoRunStore, Item, RUN_SK, cancellation_codes, n, put, read_text, s, sdk_failure,
    within_one_transaction,
};

impl DynamoRunStore {
    /// A key whose run is gone (past its retention, or deleted by TTL)
    /// while the key's own item has no expiry yet (the retention pass had
    /// not reached it): the item is deleted, if it still names that run,
    /// so that a submission under the key makes a new run. Whether it was.
    pub(crate) async fn release_stale_key(
        &self,
        tenant_id: &str,
        key: &str,
        run_id: &str,
    ) -> Result<bool, StoreError> {
        if self
            .load_run(RunKey::new(tenant_id, run_id))
            .await?
            .is_some()
        {
            return Ok(false);
        }
        let deleted = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key("pk", s(idempotency_pk(tenant_id, key)))
            .key("sk", s("IDEM"))
            .condition_expression("runId = :gone")
            .expression_attribute_values(":gone", s(run_id))
            .send()
            .await;
        match deleted {
            Ok(_) => Ok(true),
            // Another submission took the key over meanwhile: it names a
            // live run now, which the retry finds.
            Err(error)
                if error
                    .as_service_error()
                    .is_some_and(|error| error.is_conditional_check_failed_exception()) =>
            {
                Ok(true)
            }
            Err(error) => Err(sdk_failure(error)),
        }
    }
}

impl DynamoRunStore {
    /// One transaction creating the run (and its key, when it has one).
    pub(crate) async fn create_once(
        &self,
        state: &RunState,
        events: Vec<EventDraft>,
        outbox: Vec<StepMessage>,
        idempotency_key: Option<&str>,
        live_run_limit: Option<u64>,
    ) -> Result<CreateOutcome, StoreError> {
        let pk = run_pk(&state.tenant_id, &state.run_id);
        let mut items = Vec::new();
        if let Some(key) = idempotency_key {
            let item = Item::from([
                ("pk".to_string(), s(idempotency_pk(&state.tenant_id, key))),
                ("sk".to_string(), s("IDEM")),
                ("runId".to_string(), s(&state.run_id)),
            ]);
            // A key whose run expired (its item past `expiresAt`, which
            // DynamoDB deletes only within days) names no run: a new one
            // takes it.
            let now_seconds = self.clock.now().unix_millis() / 1000;
            let key_put = aws_sdk_dynamodb::types::Put::builder()
                .table_name(&self.table)
                .set_item(Some(item))
                .condition_expression("attribute_not_exists(pk) OR expiresAt <= :now")
                .expression_attribute_values(":now", n(now_seconds))
                .build()
                .map_err(crate::dynamodb::store::unavailable)?;
            items.push(
                aws_sdk_dynamodb::types::TransactWriteItem::builder()
                    .put(key_put)
                    .build(),
            );
        }
        // Second: its failed condition is the live-run limit.
        let counter_index = items.len();
        let counted =
            self.live_run_change(&state.tenant_id, None, state.status(), live_run_limit)?;
        let counts = counted.is_some();
        items.extend(counted);
        let state_parts = encode_state_parts(state)?;
        let run_item = Item::from([
            ("pk".to_string(), s(&pk)),
            ("sk".to_string(), s(RUN_SK)),
            (
                "state".to_string(),
                AttributeValue::B(state_parts[0].clone()),
            ),
            ("stateParts".to_string(), n(state_parts.len() as u64)),
            ("version".to_string(), n(1)),
            ("status".to_string(), s(state.status().as_str())),
            ("correlationId".to_string(), s(&state.correlation_id)),
        ]);
        items.push(put(
            &self.table,
            run_item,
            Some("attribute_not_exists(pk)"),
        )?);
        items.extend(large_items::part_items(
            &self.table,
            &pk,
            &state_parts,
            state_part_sk,
            Some(1),
            None,
        )?);
        items.push(self.new_sequence_item(
            &pk,
            events.len() as u64,
            &state.correlation_id,
            idempotency_key,
        )?);
        let open_items = crate::dynamodb::open_items::open_items(state);
        items.extend(self.open_item_writes(&pk, 0, &open_items, state, state.status(), None)?);
        items.extend(self.event_items(
            &pk,
            1,
            &state.run_id,
            &state.correlation_id,
            events,
            None,
        )?);
        items.extend(self.outbox_items(&outbox)?);
        within_one_transaction(&items, &state.run_id)?;
        large_items::within_transaction_bytes(&items, &state.run_id)?;
        match self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await
        {
            Ok(_) => {
                self.remember_open_items(&pk, 1, open_items);
                Ok(CreateOutcome::Created)
            }
            Err(error) => {
                let failed_at = |index: usize| {
                    cancellation_codes(&error).is_some_and(|codes| {
                        codes
                            .get(index)
                            .is_some_and(|code| code == "ConditionalCheckFailed")
                    })
                };
                let idempotency_clash = idempotency_key.is_some() && failed_at(0);
                if !idempotency_clash {
                    if counts && failed_at(counter_index) {
                        return Ok(CreateOutcome::LiveRunLimitReached {
                            live_runs: self.read_live_runs(&state.tenant_id).await?,
                        });
                    }
                    return Err(sdk_failure(error));
                }
                let key = idempotency_key.unwrap_or_default();
                let existing = self
                    .client
                    .get_item()
                    .table_name(&self.table)
                    .key("pk", s(idempotency_pk(&state.tenant_id, key)))
                    .key("sk", s("IDEM"))
                    .consistent_read(true)
                    .send()
                    .await
                    .map_err(sdk_failure)?;
                let item = existing
                    .item
                    .ok_or_else(|| StoreError::Corrupt("idempotency item vanished".into()))?;
                Ok(CreateOutcome::AlreadyExists {
                    run_id: read_text(&item, "runId")?.to_string(),
                })
            }
        }
    }
}
