//! The DynamoDB run store: its parts put together as the `RunStore` (the
//! node leases are `lease_items`).

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use baton_core::basics::ids::RunKey;
use baton_core::basics::instant::Instant;
use baton_core::state::run::{RunState, StepMessage};
use baton_core::wire::event::{EventDraft, EventFrame};
use baton_runtime::error::StoreError;

use super::keys::{PLAN_SK, awaiting_human_pk, created_sk, event_sk, run_pk, state_part_sk};
use crate::dynamodb::event_log::{SEQUENCE_SK, sequence_of};
use crate::dynamodb::large_items;
use crate::dynamodb::plan_items::{PLAN_VERSION_ATTRIBUTE, with_plan_joined};
use crate::dynamodb::state_codec::{decode_state_json, stored_state_json};
use crate::dynamodb::store::DynamoRunStore;
pub(crate) use crate::dynamodb::store::{
    Item, RUN_SK, SEQUENCE_RETRY_ROUNDS, cancellation_codes, n, read_number, s, sdk_failure,
    unavailable, within_one_transaction,
};
use baton_runtime::ports::{CreateOutcome, OutboxStore, RunLog, RunQueries, StepCommit, StoredRun};

#[async_trait]
impl RunLog for DynamoRunStore {
    async fn create_run_within(
        &self,
        state: &RunState,
        events: Vec<EventDraft>,
        outbox: Vec<StepMessage>,
        idempotency_key: Option<&str>,
        live_run_limit: Option<u64>,
    ) -> Result<CreateOutcome, StoreError> {
        let Some(key) = idempotency_key else {
            return self
                .create_once(state, events, outbox, None, live_run_limit)
                .await;
        };
        let again = (events.clone(), outbox.clone());
        let outcome = self
            .create_once(state, events, outbox, Some(key), live_run_limit)
            .await?;
        match &outcome {
            CreateOutcome::AlreadyExists { run_id }
                if self
                    .release_stale_key(&state.tenant_id, key, run_id)
                    .await? =>
            {
                self.create_once(state, again.0, again.1, Some(key), live_run_limit)
                    .await
            }
            _ => Ok(outcome),
        }
    }

    async fn load_run(&self, key: RunKey<'_>) -> Result<Option<StoredRun>, StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        let pk = run_pk(tenant_id, run_id);
        // A `Query` is not isolated from a transaction: a load that meets
        // state parts of another version than the run item's (a commit
        // landing meanwhile) reads again.
        for _ in 0..LOAD_ROUNDS {
            let items = self.run_and_sequence_items(&pk).await?;
            let item_with = |sort_key: &str| {
                items.iter().find(|item| {
                    item.get("sk")
                        .and_then(|value| value.as_s().ok())
                        .map(String::as_str)
                        == Some(sort_key)
                })
            };
            let Some(run_item) = item_with(RUN_SK) else {
                return Ok(None);
            };
            // Past its retention, the run is gone (DynamoDB deletes it soon).
            if self.has_expired(run_item) {
                return Ok(None);
            }
            let sequence_item = item_with(SEQUENCE_SK).ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "run {run_id} has no sequence item (`{SEQUENCE_SK}`)"
                ))
            })?;
            let version = read_number(run_item, "version")?;
            let parts = large_items::parts_of(run_item, "stateParts")?;
            let state_json = if parts <= 1 {
                stored_state_json(run_item.get("state"))?
            } else {
                let Some(AttributeValue::B(first)) = run_item.get("state") else {
                    return Err(StoreError::Corrupt(format!(
                        "run {run_id}: its state's first part is missing"
                    )));
                };
                let mut deflated = first.as_ref().to_vec();
                let mut torn = false;
                for index in 1..parts {
                    match item_with(&state_part_sk(index)) {
                        Some(part) if read_number(part, "version").ok() == Some(version) => {
                            deflated.extend_from_slice(large_items::part_bytes(part, "run state")?);
                        }
                        _ => torn = true,
                    }
                }
                if torn {
                    continue;
                }
                stored_state_json(Some(&AttributeValue::B(
                    aws_sdk_dynamodb::primitives::Blob::new(deflated),
                )))?
            };
            let state_json =
                match with_plan_joined(run_item, item_with(PLAN_SK), state_json, run_id) {
                    Ok(json) => json,
                    Err(None) => continue,
                    Err(Some(error)) => return Err(error),
                };
            let state = decode_state_json(&state_json)?;
            let known = sequence_of(sequence_item)?;
            self.remember_sequence_settled(
                &pk,
                known.last_sequence,
                &known.correlation_id,
                known.settled,
            );
            self.remember_open_items(
                &pk,
                version,
                crate::dynamodb::open_items::open_items(&state),
            );
            // Only a split state's plan is in the plan item: a run item
            // written whole (before plans were split off, a fork's first
            // item) leaves the next commit to write it.
            if run_item.contains_key(PLAN_VERSION_ATTRIBUTE) {
                self.remember_plan(&pk, version, &state);
            } else {
                self.forget_plan(&pk);
            }
            return Ok(Some(StoredRun { state, version }));
        }
        Err(StoreError::Unavailable(format!(
            "run {run_id}: its state's parts kept changing while it was read"
        )))
    }

    async fn commit_step(
        &self,
        key: RunKey<'_>,
        mut commit: StepCommit,
    ) -> Result<u64, StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        let pk = run_pk(tenant_id, run_id);
        let expected_version = commit.expected_version;
        // The commit that ends the run stamps what it writes with the
        // run's expiry, and marks the run for the pass that stamps the rest
        // (`retention_stamps`).
        let expires = commit.retain_until.map(crate::dynamodb::store::ttl_seconds);
        let state_write =
            self.state_write(&pk, expected_version, &mut commit.state, expires.as_ref())?;
        let state_parts = state_write.parts;
        let encoded_state = AttributeValue::B(state_parts[0].clone());
        let part_writes = large_items::part_items(
            &self.table,
            &pk,
            &state_parts,
            state_part_sk,
            Some(expected_version + 1),
            expires.as_ref(),
        )?;
        let count = commit.events.len() as u64;
        let entry_items = self.entry_items(&pk, &commit.entries)?;
        let next_open_items = crate::dynamodb::open_items::open_items(&commit.state);
        let open_item_writes = self.open_item_writes(
            &pk,
            expected_version,
            &next_open_items,
            &commit.state,
            commit.previous_status,
            expires.as_ref(),
        )?;
        let counter_move = self.live_run_change(
            tenant_id,
            Some(commit.previous_status),
            commit.state.status(),
            None,
        )?;
        // Ended: the pass stamps the rest. Taken up again after it ended (a
        // revision): the pass lifts what it stamped.
        let retention_mark =
            if commit.retain_until.is_some() || commit.previous_status.is_terminal() {
                Some(self.retention_mark(tenant_id, &pk, commit.retain_until)?)
            } else {
                None
            };
        let mut stale = false;
        for _ in 0..SEQUENCE_RETRY_ROUNDS {
            let seen = self.sequence_for_write(&pk, stale).await?.last_sequence;
            // Events, outbox and sequence first, the run item last: a reader that sees the
            // new status (on emulators that apply transactions item by item) sees its frames.
            // The run item is written whole (a conditional put, not an
            // update): DynamoDB bills either as the whole item, and an
            // update of a large `state` is judged (by moto) on the old and
            // the new value together.
            let mut run_item = Item::from([
                ("pk".to_string(), s(&pk)),
                ("sk".to_string(), s(RUN_SK)),
                ("state".to_string(), encoded_state.clone()),
                ("stateParts".to_string(), n(state_parts.len() as u64)),
                ("version".to_string(), n(expected_version + 1)),
                ("status".to_string(), s(commit.state.status().as_str())),
                ("correlationId".to_string(), s(&commit.state.correlation_id)),
            ]);
            if let Some(expires) = &expires {
                run_item.insert("expiresAt".to_string(), expires.clone());
            }
            if let Some(plan_version) = state_write.plan_version {
                run_item.insert(
                    PLAN_VERSION_ATTRIBUTE.to_string(),
                    n(u64::from(plan_version)),
                );
            }
            // A run waiting for a person is listed in the sparse index under its tenant.
            if commit.state.status().awaits_people() {
                run_item.insert("gsi1pk".to_string(), s(awaiting_human_pk(tenant_id)));
                run_item.insert(
                    "gsi1sk".to_string(),
                    s(created_sk(&commit.state.created_at.rfc3339(), run_id)),
                );
            }
            let run_update = TransactWriteItem::builder()
                .put(
                    Put::builder()
                        .table_name(&self.table)
                        .set_item(Some(run_item))
                        // On the status read too: the live-run counter
                        // moves by it.
                        .condition_expression("version = :version AND #status = :previous")
                        .expression_attribute_names("#status", "status")
                        .expression_attribute_values(":version", n(expected_version))
                        .expression_attribute_values(
                            ":previous",
                            s(commit.previous_status.as_str()),
                        )
                        .build()
                        .map_err(unavailable)?,
                )
                .build();
            let mut items = self.event_items(
                &pk,
                seen + 1,
                run_id,
                &commit.state.correlation_id,
                commit.events.clone(),
                expires.as_ref(),
            )?;
            items.extend(self.outbox_items(&commit.outbox)?);
            items.extend(counter_move.iter().cloned());
            items.extend(retention_mark.iter().cloned());
            items.extend(entry_items.iter().cloned());
            if let Some(message_id) = &commit.consumed_message_id {
                items.push(self.consume_outbox_entry(&pk, message_id)?);
            }
            items.extend(open_item_writes.iter().cloned());
            items.extend(part_writes.iter().cloned());
            items.extend(state_write.plan_write.iter().cloned());
            // Settled by the run's status, as SQLite and memory judge it:
            // a commit after the terminal frame (a notification's delivery,
            // with no frame of its own) keeps the run settled.
            let settles = commit.state.status().is_terminal();
            items.push(self.sequence_bump(
                &pk,
                seen,
                count,
                crate::dynamodb::event_log::SequenceWrite::Commit { settles },
                expires.as_ref(),
            )?);
            items.push(run_update);
            within_one_transaction(&items, run_id)?;
            large_items::within_transaction_bytes(&items, run_id)?;
            match self
                .client
                .transact_write_items()
                .set_transact_items(Some(items))
                .send()
                .await
            {
                Ok(_) => {
                    self.remember_sequence_settled(
                        &pk,
                        seen + count,
                        &commit.state.correlation_id,
                        settles,
                    );
                    self.remember_open_items(&pk, expected_version + 1, next_open_items);
                    if state_write.plan_version.is_some() {
                        self.remember_plan(&pk, expected_version + 1, &commit.state);
                    } else {
                        self.forget_plan(&pk);
                    }
                    return Ok(expected_version + 1);
                }
                Err(error) => match cancellation_codes(&error) {
                    // The run item (last) moved: another step committed first.
                    Some(codes)
                        if codes
                            .last()
                            .is_some_and(|code| code == "ConditionalCheckFailed") =>
                    {
                        return Err(StoreError::VersionConflict {
                            expected: expected_version,
                        });
                    }
                    // Only the sequence moved (an append), or a concurrent transaction.
                    Some(codes)
                        if codes.iter().any(|code| {
                            code == "ConditionalCheckFailed" || code == "TransactionConflict"
                        }) =>
                    {
                        stale = true;
                    }
                    _ => {
                        return Err(sdk_failure(error));
                    }
                },
            }
        }
        Err(StoreError::VersionConflict {
            expected: expected_version,
        })
    }

    async fn append_events(
        &self,
        key: RunKey<'_>,
        events: Vec<EventDraft>,
    ) -> Result<u64, StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        self.append_with(tenant_id, run_id, events, Vec::new())
            .await?
            .ok_or_else(|| StoreError::Unavailable("append refused".into()))
    }

    /// The small sequence item, read consistently.
    async fn last_sequence(&self, key: RunKey<'_>) -> Result<Option<u64>, StoreError> {
        match self
            .reread_sequence(&run_pk(key.tenant_id(), key.run_id()))
            .await
        {
            Ok(known) => Ok(Some(known.last_sequence)),
            Err(StoreError::RunNotFound) => Ok(None),
            Err(error) => Err(error),
        }
    }

    async fn read_events(
        &self,
        key: RunKey<'_>,
        after_sequence: u64,
        limit: usize,
    ) -> Result<Vec<EventFrame>, StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        let limit = limit.clamp(1, 1000);
        let mut items: Vec<Item> = Vec::new();
        let mut start = None;
        // Pages until `limit` frames are whole (a large frame's parts are
        // items of their own, and a page holds 1 MB at most).
        loop {
            let output = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :pk AND sk BETWEEN :from AND :to")
                .expression_attribute_values(":pk", s(run_pk(tenant_id, run_id)))
                .expression_attribute_values(":from", s(event_sk(after_sequence + 1)))
                .expression_attribute_values(":to", s(event_sk(u64::MAX / 2)))
                .consistent_read(true)
                .limit(i32::try_from(limit).unwrap_or(1000))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(sdk_failure)?;
            items.extend(output.items.unwrap_or_default());
            let (frames, whole) = Self::frames_of_items(&items)?;
            match output.last_evaluated_key {
                Some(key) if !key.is_empty() && (frames.len() < limit || !whole) => {
                    start = Some(key);
                }
                _ => return Ok(frames.into_iter().take(limit).collect()),
            }
        }
    }

    async fn read_entries(
        &self,
        key: RunKey<'_>,
        prefix: &str,
    ) -> Result<Vec<baton_core::records::entries::RunEntry>, StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        self.query_entries(tenant_id, run_id, prefix).await
    }
}

#[async_trait]
impl OutboxStore for DynamoRunStore {
    async fn pending_outbox(&self, key: RunKey<'_>) -> Result<Vec<StepMessage>, StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        self.query_pending_outbox(tenant_id, run_id).await
    }

    async fn quiet_outbox(
        &self,
        quiet_before: Instant,
        limit: usize,
    ) -> Result<Vec<baton_runtime::ports::QuietOutboxEntry>, StoreError> {
        self.query_quiet_outbox(quiet_before, limit).await
    }

    async fn mark_outbox_quiet(
        &self,
        key: RunKey<'_>,
        message_ids: &[String],
        quiet: baton_runtime::ports::OutboxQuiet,
    ) -> Result<(), StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        self.update_outbox_quiet(tenant_id, run_id, message_ids, quiet)
            .await
    }
}

#[async_trait]
impl RunQueries for DynamoRunStore {
    async fn live_runs(&self, tenant_id: &str) -> Result<u64, StoreError> {
        self.read_live_runs(tenant_id).await
    }

    async fn runs_awaiting_human(&self, tenant_id: &str) -> Result<Vec<RunState>, StoreError> {
        self.query_runs_awaiting_human(tenant_id).await
    }

    async fn list_runs(
        &self,
        tenant_id: &str,
        query: &baton_core::state::listing::RunListQuery,
    ) -> Result<baton_core::state::listing::RunListPage, StoreError> {
        self.query_run_page(tenant_id, query).await
    }

    async fn pending_tasks(
        &self,
        tenant_id: &str,
        capability_id: Option<&str>,
    ) -> Result<Vec<baton_core::state::tasks::HumanTask>, StoreError> {
        self.query_pending_tasks(tenant_id, capability_id).await
    }

    async fn pending_requests(
        &self,
        tenant_id: &str,
    ) -> Result<Vec<baton_core::state::tasks::PendingRequest>, StoreError> {
        self.query_pending_requests(tenant_id).await
    }
}

/// Reads of a run whose state parts keep changing before the load gives up.
const LOAD_ROUNDS: usize = 5;

impl DynamoRunStore {
    /// The run item, its state's part items and its sequence item: the only
    /// keys between `RUN` and `SEQ` (every page: parts can pass a page's 1 MB).
    async fn run_and_sequence_items(&self, pk: &str) -> Result<Vec<Item>, StoreError> {
        self.all_pages(
            self.client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :pk AND sk BETWEEN :run AND :sequence")
                .expression_attribute_values(":pk", s(pk))
                .expression_attribute_values(":run", s(RUN_SK))
                .expression_attribute_values(":sequence", s(SEQUENCE_SK))
                .consistent_read(true),
        )
        .await
    }
}
