//! Payloads larger than one DynamoDB item (400 KB): a run's state, a frame
//! carrying a large output (`node_complete`, `complete`, a person's
//! answer). They are deflated and, when still too large, split into parts
//! of [`PART_BYTES`]: the first part stays in the main item (the run item,
//! the event item) with the number of parts, the others are items of their
//! own whose sort keys follow the main item's (`RUN#PART#001`,
//! `EV#…#P001`), written in the same transaction. So what SQLite and memory
//! accept DynamoDB accepts, up to [`MAX_PARTS`] parts (3.5 MB deflated),
//! inside a transaction's 4 MB; beyond that the write is refused with
//! `StoreError::TooLarge` naming the size and the limit.
//!
//! Every state part carries the run's version: a `Query` is not isolated
//! from a transaction, so a load that meets parts of another version (a
//! commit landing meanwhile) reads again. Parts a smaller state no longer
//! uses are left to expire with the run's other items (TTL).

use std::io::{Read, Write};

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem};
use baton_runtime::error::StoreError;
use flate2::Compression;
use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;

use crate::dynamodb::attributes::{Item, n, put, read_number, s};

/// Payload bytes one part holds: the item's keys and other attributes fit
/// in what is left of DynamoDB's 400 KB.
pub const PART_BYTES: usize = 350 * 1024;

/// The most parts one payload takes (3.5 MB deflated): a commit's state
/// and its frames stay inside one transaction's 4 MB only together, which
/// [`within_transaction_bytes`] checks.
pub const MAX_PARTS: usize = 10;

/// DynamoDB's limit on one transaction's items, together.
pub const MAX_TRANSACTION_BYTES: usize = 4 * 1024 * 1024;

/// Whether `sort_key` names a part item rather than a main item.
pub(crate) fn is_part_sk(sort_key: &str) -> bool {
    sort_key.starts_with("RUN#PART#") || (sort_key.starts_with("EV#") && sort_key.contains("#P"))
}

/// `bytes` deflated.
pub(crate) fn deflate(bytes: &[u8], what: &str) -> Result<Vec<u8>, StoreError> {
    let mut encoder = DeflateEncoder::new(Vec::with_capacity(bytes.len() / 4), Compression::fast());
    encoder
        .write_all(bytes)
        .map_err(|error| StoreError::Corrupt(format!("compressing {what}: {error}")))?;
    encoder
        .finish()
        .map_err(|error| StoreError::Corrupt(format!("compressing {what}: {error}")))
}

/// What [`deflate`] wrote.
pub(crate) fn inflate(bytes: &[u8], what: &str) -> Result<Vec<u8>, StoreError> {
    let mut plain = Vec::new();
    DeflateDecoder::new(bytes)
        .read_to_end(&mut plain)
        .map_err(|error| StoreError::Corrupt(format!("{what}: {error}")))?;
    Ok(plain)
}

/// `deflated` in parts of [`PART_BYTES`] (one part at least), refused when
/// it would take more than [`MAX_PARTS`] (`what` and `plain_bytes` name it).
pub(crate) fn into_parts(
    deflated: Vec<u8>,
    what: &str,
    plain_bytes: usize,
) -> Result<Vec<Blob>, StoreError> {
    if deflated.len() > PART_BYTES * MAX_PARTS {
        return Err(StoreError::TooLarge(format!(
            "{what} is {} bytes deflated ({plain_bytes} as JSON), over the {} bytes DynamoDB can hold for it ({MAX_PARTS} items of {PART_BYTES} bytes)",
            deflated.len(),
            PART_BYTES * MAX_PARTS
        )));
    }
    if deflated.len() <= PART_BYTES {
        return Ok(vec![Blob::new(deflated)]);
    }
    Ok(deflated.chunks(PART_BYTES).map(Blob::new).collect())
}

/// The part items (parts 1 and up of `parts`) under `pk`, named by
/// `sort_key_of(index)`, each stamped with `version` when given.
pub(crate) fn part_items(
    table: &str,
    pk: &str,
    parts: &[Blob],
    sort_key_of: impl Fn(usize) -> String,
    version: Option<u64>,
    expires_at: Option<&AttributeValue>,
) -> Result<Vec<TransactWriteItem>, StoreError> {
    parts
        .iter()
        .enumerate()
        .skip(1)
        .map(|(index, part)| {
            let mut item = Item::from([
                ("pk".to_string(), s(pk)),
                ("sk".to_string(), s(sort_key_of(index))),
                ("part".to_string(), AttributeValue::B(part.clone())),
            ]);
            if let Some(expires_at) = expires_at {
                item.insert("expiresAt".to_string(), expires_at.clone());
            }
            if let Some(version) = version {
                item.insert("version".to_string(), n(version));
            }
            put(table, item, None)
        })
        .collect()
}

/// How many parts a main item says its payload has (1 when it says none).
pub(crate) fn parts_of(item: &Item, attribute: &str) -> Result<usize, StoreError> {
    if !item.contains_key(attribute) {
        return Ok(1);
    }
    usize::try_from(read_number(item, attribute)?)
        .map_err(|_| StoreError::Corrupt(format!("`{attribute}` is out of range")))
}

/// The bytes of a part item.
pub(crate) fn part_bytes<'a>(item: &'a Item, what: &str) -> Result<&'a [u8], StoreError> {
    match item.get("part") {
        Some(AttributeValue::B(blob)) => Ok(blob.as_ref()),
        _ => Err(StoreError::Corrupt(format!(
            "{what}: a part item without its bytes"
        ))),
    }
}

/// The payload a main item holds in parts, inflated: its first part
/// (`first_attribute`) and the part items that follow it in `items` from
/// `next` (`count_attribute` says how many parts in all). `None` when they
/// are not all there (a read that ended mid-payload); with the payload, how
/// many part items it took.
pub(crate) fn joined_payload(
    item: &Item,
    items: &[Item],
    next: usize,
    (first_attribute, count_attribute): (&str, &str),
    what: &str,
) -> Result<Option<(Vec<u8>, usize)>, StoreError> {
    let parts = parts_of(item, count_attribute)?;
    let Some(AttributeValue::B(first)) = item.get(first_attribute) else {
        return Err(StoreError::Corrupt(format!("{what} has no payload")));
    };
    let Some(rest) = items.get(next..next + parts - 1) else {
        return Ok(None);
    };
    let mut deflated = first.as_ref().to_vec();
    for part in rest {
        deflated.extend_from_slice(part_bytes(part, what)?);
    }
    Ok(Some((inflate(&deflated, what)?, parts - 1)))
}

/// About how many bytes DynamoDB counts for `items` (attribute names and
/// values of puts, keys and values of updates and deletes).
pub(crate) fn approximate_bytes(items: &[TransactWriteItem]) -> usize {
    fn value_bytes(value: &AttributeValue) -> usize {
        match value {
            AttributeValue::S(text) | AttributeValue::N(text) => text.len(),
            AttributeValue::B(blob) => blob.as_ref().len(),
            AttributeValue::L(list) => list.iter().map(value_bytes).sum::<usize>() + 3,
            AttributeValue::M(map) => {
                map.iter()
                    .map(|(name, value)| name.len() + value_bytes(value))
                    .sum::<usize>()
                    + 3
            }
            _ => 1,
        }
    }
    let attributes = |map: &std::collections::HashMap<String, AttributeValue>| -> usize {
        map.iter()
            .map(|(name, value)| name.len() + value_bytes(value))
            .sum()
    };
    items
        .iter()
        .map(|item| {
            item.put().map(|put| attributes(put.item())).unwrap_or(0)
                + item
                    .update()
                    .map(|update| {
                        attributes(update.key())
                            + update
                                .expression_attribute_values()
                                .map(attributes)
                                .unwrap_or(0)
                    })
                    .unwrap_or(0)
                + item
                    .delete()
                    .map(|delete| attributes(delete.key()))
                    .unwrap_or(0)
                + item
                    .condition_check()
                    .map(|check| attributes(check.key()))
                    .unwrap_or(0)
        })
        .sum()
}

/// Refuses, before anything is sent, a transaction over DynamoDB's 4 MB.
pub(crate) fn within_transaction_bytes(
    items: &[TransactWriteItem],
    run_id: &str,
) -> Result<(), StoreError> {
    let bytes = approximate_bytes(items);
    if bytes > MAX_TRANSACTION_BYTES {
        return Err(StoreError::TooLarge(format!(
            "run {run_id}: one write is about {bytes} bytes (state, frames, outbox), over the {MAX_TRANSACTION_BYTES} bytes one DynamoDB transaction takes"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dynamodb::keys::{event_sk, frame_part_sk, state_part_sk};

    #[test]
    fn parts_split_at_the_part_size_and_refuse_past_the_bound() {
        assert_eq!(into_parts(vec![1; 10], "x", 10).unwrap().len(), 1);
        assert_eq!(
            into_parts(vec![1; PART_BYTES + 1], "x", 0).unwrap().len(),
            2
        );
        let refused = into_parts(vec![0; PART_BYTES * MAX_PARTS + 1], "run r state", 9)
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("run r state") && refused.contains("3584000"),
            "{refused}"
        );
    }

    #[test]
    fn part_keys_sort_after_their_main_item_and_before_the_next() {
        let main = event_sk(7);
        let part = frame_part_sk(7, 1);
        assert!(main < part && part < event_sk(8));
        assert!(*"RUN" < *state_part_sk(1) && *state_part_sk(999) < *"SEQ");
        assert!(is_part_sk(&part) && is_part_sk(&state_part_sk(2)));
        assert!(!is_part_sk(&main) && !is_part_sk("RUN"));
    }

    #[test]
    fn what_is_deflated_inflates_back() {
        let text = b"a frame a frame a frame".repeat(100);
        let deflated = deflate(&text, "x").unwrap();
        assert!(deflated.len() < text.len());
        assert_eq!(inflate(&deflated, "x").unwrap(), text);
    }
}
