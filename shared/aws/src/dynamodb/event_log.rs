//! The event log of the DynamoDB run store: event items with contiguous
//! sequence numbers, appended in one transaction with a conditional bump of
//! the sequence item's `nextSeq`, and the remembered sequence that spares
//! the hot path a re-read.
//!
//! A commit that leaves the run terminal (its status, as SQLite and memory
//! judge it) marks the sequence item `settled`, and a commit that takes it
//! up again clears it; an append outside a commit is
//! conditional on its absence, so no streamed delta or warning of a twin
//! attempt still running lands after the run's `complete` or `error`.
//!
//! The sequence lives in its own small item (`SEQ`), not in the run item:
//! DynamoDB charges an update on the whole item, so bumping a counter on
//! the run item (which holds the state) cost a claim or a delta batch as
//! much as a commit (`cargo bench -p baton-aws --bench cost_per_run`).

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use baton_core::wire::event::{EventDraft, EventFrame};
use baton_runtime::error::StoreError;

use super::keys::{event_sk, frame_part_sk, run_pk};
use crate::dynamodb::large_items;
use crate::dynamodb::store::{
    DynamoRunStore, Item, KnownSequence, SEQUENCE_RETRY_ROUNDS, cancellation_codes, n, put,
    read_number, read_text, s, sdk_failure, unavailable,
};

/// The sort key of a run's sequence item.
pub(crate) const SEQUENCE_SK: &str = "SEQ";

/// How a write moves the sequence item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SequenceWrite {
    /// A step's commit: `settles` when its frames end the run.
    Commit { settles: bool },
    /// Claims, streamed deltas and warnings: refused once the run has settled.
    OutsideCommit,
}

/// The sequence an item read from the table says.
pub(crate) fn sequence_of(item: &Item) -> Result<KnownSequence, StoreError> {
    Ok(KnownSequence {
        last_sequence: read_number(item, "nextSeq")?,
        correlation_id: read_text(item, "correlationId")?.to_string(),
        settled: item.contains_key("settled"),
    })
}

impl DynamoRunStore {
    pub(crate) fn known_sequence(&self, pk: &str) -> Option<KnownSequence> {
        self.known_sequences.get(pk)
    }

    pub(crate) fn remember_sequence(&self, pk: &str, last_sequence: u64, correlation_id: &str) {
        self.remember_sequence_settled(pk, last_sequence, correlation_id, false);
    }

    pub(crate) fn remember_sequence_settled(
        &self,
        pk: &str,
        last_sequence: u64,
        correlation_id: &str,
        settled: bool,
    ) {
        self.known_sequences.insert(
            pk.to_string(),
            KnownSequence {
                last_sequence,
                correlation_id: correlation_id.to_string(),
                settled,
            },
        );
    }

    /// The run's event sequence read again (the small sequence item; only
    /// when a conditional write found the remembered one stale).
    pub(crate) async fn reread_sequence(&self, pk: &str) -> Result<KnownSequence, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(SEQUENCE_SK))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_failure)?;
        let item = output.item.ok_or(StoreError::RunNotFound)?;
        let known = sequence_of(&item)?;
        self.remember_sequence_settled(
            pk,
            known.last_sequence,
            &known.correlation_id,
            known.settled,
        );
        Ok(known)
    }

    /// The remembered sequence, or a re-read when there is none or `stale`.
    pub(crate) async fn sequence_for_write(
        &self,
        pk: &str,
        stale: bool,
    ) -> Result<KnownSequence, StoreError> {
        match self.known_sequence(pk) {
            Some(known) if !stale => Ok(known),
            _ => self.reread_sequence(pk).await,
        }
    }

    /// The sequence item of a new run (its first `last_sequence` events written with it).
    pub(crate) fn new_sequence_item(
        &self,
        pk: &str,
        last_sequence: u64,
        correlation_id: &str,
        idempotency_key: Option<&str>,
    ) -> Result<TransactWriteItem, StoreError> {
        let mut item = Item::from([
            ("pk".to_string(), s(pk)),
            ("sk".to_string(), s(SEQUENCE_SK)),
            ("nextSeq".to_string(), n(last_sequence)),
            ("correlationId".to_string(), s(correlation_id)),
        ]);
        // Kept for retention's pass, which stamps the key's item with the
        // run's expiry (`retention_stamps`).
        if let Some(key) = idempotency_key {
            item.insert("idempotencyKey".to_string(), s(key));
        }
        put(&self.table, item, Some("attribute_not_exists(pk)"))
    }

    /// Moves the sequence from `seen` to `seen + count`, on condition it is
    /// still `seen` and, for `write`s outside a commit, that the run has not
    /// settled; a commit marks it settled or not by the frames it writes,
    /// and the commit that ends the run stamps it with the run's `expires`.
    pub(crate) fn sequence_bump(
        &self,
        pk: &str,
        seen: u64,
        count: u64,
        write: SequenceWrite,
        expires: Option<&AttributeValue>,
    ) -> Result<TransactWriteItem, StoreError> {
        let (update, condition) = match write {
            SequenceWrite::OutsideCommit => (
                "SET nextSeq = :next",
                "nextSeq = :seen AND attribute_not_exists(settled)",
            ),
            SequenceWrite::Commit { settles: true } => match expires {
                Some(_) => (
                    "SET nextSeq = :next, settled = :next, expiresAt = :expires",
                    "nextSeq = :seen",
                ),
                None => ("SET nextSeq = :next, settled = :next", "nextSeq = :seen"),
            },
            // A run taken up again after it ended no longer expires.
            SequenceWrite::Commit { settles: false } => (
                "SET nextSeq = :next REMOVE settled, expiresAt",
                "nextSeq = :seen",
            ),
        };
        let mut bump = Update::builder()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(SEQUENCE_SK))
            .update_expression(update)
            .condition_expression(condition)
            .expression_attribute_values(":next", n(seen + count))
            .expression_attribute_values(":seen", n(seen));
        if let (SequenceWrite::Commit { settles: true }, Some(expires)) = (write, expires) {
            bump = bump.expression_attribute_values(":expires", expires.clone());
        }
        Ok(TransactWriteItem::builder()
            .update(bump.build().map_err(unavailable)?)
            .build())
    }

    pub(crate) fn event_items(
        &self,
        pk: &str,
        first_sequence: u64,
        run_id: &str,
        correlation_id: &str,
        drafts: Vec<EventDraft>,
        expires: Option<&AttributeValue>,
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        let mut items = Vec::with_capacity(drafts.len());
        for (offset, draft) in drafts.into_iter().enumerate() {
            let sequence = first_sequence + offset as u64;
            let frame = draft.into_frame(sequence, run_id, correlation_id);
            let text = serde_json::to_string(&frame)
                .map_err(|error| StoreError::Corrupt(error.to_string()))?;
            let mut item = Item::from([
                ("pk".to_string(), s(pk)),
                ("sk".to_string(), s(event_sk(sequence))),
            ]);
            if let Some(expires) = expires {
                item.insert("expiresAt".to_string(), expires.clone());
            }
            if text.len() <= large_items::PART_BYTES {
                item.insert("frame".to_string(), s(text));
                items.push(put(&self.table, item, Some("attribute_not_exists(pk)"))?);
                continue;
            }
            // A frame carrying a large output: deflated, in parts.
            let what = format!("run {run_id} frame {sequence}");
            let deflated = large_items::deflate(text.as_bytes(), &what)?;
            let parts = large_items::into_parts(deflated, &what, text.len())?;
            item.insert(
                "frameDeflated".to_string(),
                AttributeValue::B(parts[0].clone()),
            );
            item.insert("frameParts".to_string(), n(parts.len() as u64));
            items.push(put(&self.table, item, Some("attribute_not_exists(pk)"))?);
            items.extend(large_items::part_items(
                &self.table,
                pk,
                &parts,
                |index| frame_part_sk(sequence, index),
                None,
                expires,
            )?);
        }
        Ok(items)
    }

    /// The frames of `items` (event items and their parts, in sort-key
    /// order), and whether the last frame's parts were all there: a read
    /// that ends mid-frame pages on.
    pub(crate) fn frames_of_items(items: &[Item]) -> Result<(Vec<EventFrame>, bool), StoreError> {
        let mut frames = Vec::new();
        let mut index = 0;
        while index < items.len() {
            let item = &items[index];
            index += 1;
            let sort_key = read_text(item, "sk")?;
            if large_items::is_part_sk(sort_key) {
                continue; // a part whose main item an earlier page held
            }
            if let Ok(text) = read_text(item, "frame") {
                frames.push(
                    serde_json::from_str(text)
                        .map_err(|error| StoreError::Corrupt(error.to_string()))?,
                );
                continue;
            }
            let Some((text, used)) = large_items::joined_payload(
                item,
                items,
                index,
                ("frameDeflated", "frameParts"),
                sort_key,
            )?
            else {
                return Ok((frames, false));
            };
            index += used;
            frames.push(
                serde_json::from_slice(&text)
                    .map_err(|error| StoreError::Corrupt(error.to_string()))?,
            );
        }
        Ok((frames, true))
    }

    /// Appends events (and optional leading writes) atomically with a bump
    /// of `nextSeq`. `None` when a leading write's condition failed or a
    /// claim (leading writes) met a settled run; a plain append to a
    /// settled run appends nothing and answers the last sequence.
    pub(crate) async fn append_with(
        &self,
        tenant_id: &str,
        run_id: &str,
        events: Vec<EventDraft>,
        leading: Vec<TransactWriteItem>,
    ) -> Result<Option<u64>, StoreError> {
        let pk = run_pk(tenant_id, run_id);
        let leading_count = leading.len();
        let mut stale = false;
        for _ in 0..SEQUENCE_RETRY_ROUNDS {
            let known = self.sequence_for_write(&pk, stale).await?;
            let seen = known.last_sequence;
            if known.settled {
                // Nothing lands after the terminal frame: a plain append is
                // dropped, a claim (a node_start) refused.
                return Ok((leading_count == 0).then_some(seen));
            }
            let count = events.len() as u64;
            let sequence_bump =
                self.sequence_bump(&pk, seen, count, SequenceWrite::OutsideCommit, None)?;
            let mut items = leading.clone();
            items.extend(self.event_items(
                &pk,
                seen + 1,
                run_id,
                &known.correlation_id,
                events.clone(),
                None,
            )?);
            items.push(sequence_bump);
            crate::dynamodb::store::within_one_transaction(&items, run_id)?;
            match self
                .client
                .transact_write_items()
                .set_transact_items(Some(items))
                .send()
                .await
            {
                Ok(_) => {
                    self.remember_sequence(&pk, seen + count, &known.correlation_id);
                    return Ok(Some(seen + count));
                }
                Err(error) => match cancellation_codes(&error) {
                    Some(codes)
                        if codes
                            .iter()
                            .take(leading_count)
                            .any(|code| code == "ConditionalCheckFailed") =>
                    {
                        return Ok(None);
                    }
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
        Err(StoreError::Unavailable(
            "event sequence kept moving; gave up appending".into(),
        ))
    }
}
