//! The `runs.state` column: a run's state as LZ4-compressed JSON (a BLOB).
//! A state is rewritten by every step commit and its plan is most of it
//! (a five-node run's state is about 9 KB of JSON, 7 KB of it the plan);
//! compressed it is about a quarter, so a commit writes one page to the WAL
//! instead of three overflow pages.
//!
//! Three forms are read:
//! - JSON text: written before states were compressed; rewritten at the
//!   run's next commit.
//! - One LZ4 block (size-prepended) of the whole state's JSON: a state
//!   with no plan, and every state written before plans were split off.
//! - Split: [`SPLIT_MARK`], the state's part's length (u32, little-endian),
//!   the state without its plan (one LZ4 block), then the plan (one LZ4
//!   block). A plan never changes once made (a replan makes a new one), so
//!   a commit reuses the plan's block compressed at the run's first commit
//!   with it instead of serialising and compressing the plan again: that
//!   was about two thirds of a SQLite node step's instructions.
//!
//! On reading, the plan's JSON is put back into the state's object and the
//! whole is decoded as one (`stored_format` migrates an older one).

use std::sync::Arc;

use baton_core::planning::plan::PlanGraph;
use baton_core::state::run::RunState;
use baton_runtime::error::StoreError;
use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ValueRef};

/// Begins a split value. A one-block value begins with its uncompressed
/// size, which is never 4 GiB (a state fits a 400 KB item).
const SPLIT_MARK: [u8; 4] = [0xFF; 4];

/// A `runs.state` value as read, not yet parsed.
pub(crate) enum StoredState {
    /// Written before states were compressed.
    JsonText(String),
    /// One LZ4 block, or split (see the module's doc).
    Compressed(Vec<u8>),
}

impl FromSql for StoredState {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        match value {
            ValueRef::Text(text) => std::str::from_utf8(text)
                .map(|text| StoredState::JsonText(text.to_string()))
                .map_err(|error| FromSqlError::Other(Box::new(error))),
            ValueRef::Blob(bytes) => Ok(StoredState::Compressed(bytes.to_vec())),
            _ => Err(FromSqlError::InvalidType),
        }
    }
}

fn corrupt(error: &dyn std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("a run's stored state: {error}"))
}

impl StoredState {
    pub(crate) fn parse(&self) -> Result<RunState, StoreError> {
        // In the current format (an older one migrated: `stored_format`).
        let decode = baton_core::state::stored_format::decode_stored_run_state;
        match self {
            StoredState::JsonText(text) => decode(text.as_bytes()).map_err(|error| corrupt(&error)),
            StoredState::Compressed(bytes) => {
                let json = match bytes.strip_prefix(&SPLIT_MARK) {
                    Some(split) => joined_json(split)?,
                    None => lz4_flex::decompress_size_prepended(bytes)
                        .map_err(|error| corrupt(&error))?,
                };
                decode(&json).map_err(|error| corrupt(&error))
            }
        }
    }
}

/// The state's JSON object with `"plan"` put back in, from a split value
/// (after its mark).
fn joined_json(split: &[u8]) -> Result<Vec<u8>, StoreError> {
    let (length, rest) = split
        .split_first_chunk::<4>()
        .ok_or_else(|| corrupt(&"a split state without its length"))?;
    let state_length =
        usize::try_from(u32::from_le_bytes(*length)).map_err(|error| corrupt(&error))?;
    if rest.len() < state_length {
        return Err(corrupt(&"a split state shorter than its length"));
    }
    let (state_part, plan_part) = rest.split_at(state_length);
    let mut json =
        lz4_flex::decompress_size_prepended(state_part).map_err(|error| corrupt(&error))?;
    let plan = lz4_flex::decompress_size_prepended(plan_part).map_err(|error| corrupt(&error))?;
    if json.pop() != Some(b'}') {
        return Err(corrupt(&"a split state that is not an object"));
    }
    if json.last() != Some(&b'{') {
        json.push(b',');
    }
    json.extend_from_slice(b"\"plan\":");
    json.extend_from_slice(&plan);
    json.push(b'}');
    Ok(json)
}

/// A run's plan as one LZ4 block of its JSON, kept with the plan it was
/// made from so that a commit of the same plan reuses it.
#[derive(Clone)]
pub(crate) struct CompressedPlan {
    pub(crate) plan: Arc<PlanGraph>,
    pub(crate) block: Arc<[u8]>,
}

/// The value a commit writes to `runs.state`, and the plan's block (made
/// now, or `reusable` when it holds this very plan). `state` is lent back
/// as it was.
pub(crate) fn encode_state(
    state: &mut RunState,
    reusable: Option<CompressedPlan>,
) -> Result<(Vec<u8>, Option<CompressedPlan>), StoreError> {
    let unreadable = |error: serde_json::Error| StoreError::Corrupt(error.to_string());
    let Some(plan) = state.plan.take() else {
        let json = serde_json::to_vec(state).map_err(unreadable)?;
        return Ok((lz4_flex::compress_prepend_size(&json), None));
    };
    let without_plan = serde_json::to_vec(state).map_err(unreadable);
    state.plan = Some(plan.clone());
    let state_block = lz4_flex::compress_prepend_size(&without_plan?);
    let compressed_plan = match reusable.filter(|kept| Arc::ptr_eq(&kept.plan, &plan)) {
        Some(kept) => kept,
        None => CompressedPlan {
            block: lz4_flex::compress_prepend_size(
                &serde_json::to_vec(plan.as_ref()).map_err(unreadable)?,
            )
            .into(),
            plan,
        },
    };
    let state_length = u32::try_from(state_block.len())
        .map_err(|_| StoreError::Corrupt("a state past 4 GiB".into()))?;
    let mut value = Vec::with_capacity(8 + state_block.len() + compressed_plan.block.len());
    value.extend_from_slice(&SPLIT_MARK);
    value.extend_from_slice(&state_length.to_le_bytes());
    value.extend_from_slice(&state_block);
    value.extend_from_slice(&compressed_plan.block);
    Ok((value, Some(compressed_plan)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split_value(state_json: &[u8], plan_json: &[u8], claimed_length: Option<u32>) -> Vec<u8> {
        let state_block = lz4_flex::compress_prepend_size(state_json);
        let plan_block = lz4_flex::compress_prepend_size(plan_json);
        let length = claimed_length.unwrap_or(state_block.len() as u32);
        let mut value = SPLIT_MARK.to_vec();
        value.extend_from_slice(&length.to_le_bytes());
        value.extend_from_slice(&state_block);
        value.extend_from_slice(&plan_block);
        value
    }

    #[test]
    fn a_split_value_joins_the_plan_back_into_the_state_object() {
        let value = split_value(br#"{"a":1}"#, br#"{"nodes":[]}"#, None);
        let joined = joined_json(&value[4..]).unwrap();
        assert_eq!(joined, br#"{"a":1,"plan":{"nodes":[]}}"#);
        let value = split_value(b"{}", b"{}", None);
        assert_eq!(joined_json(&value[4..]).unwrap(), br#"{"plan":{}}"#);
    }

    #[test]
    fn a_damaged_split_value_is_corrupt_naming_what_is_wrong() {
        let overrun = split_value(br#"{"a":1}"#, b"{}", Some(10_000));
        let damaged = StoredState::Compressed(overrun);
        match damaged.parse() {
            Err(StoreError::Corrupt(message)) => {
                assert!(message.contains("shorter than its length"), "{message}")
            }
            other => panic!("not Corrupt: {:?}", other.map(|_| ())),
        }
        let not_an_object = split_value(b"[1]", b"{}", None);
        match StoredState::Compressed(not_an_object).parse() {
            Err(StoreError::Corrupt(message)) => {
                assert!(message.contains("not an object"), "{message}")
            }
            other => panic!("not Corrupt: {:?}", other.map(|_| ())),
        }
    }
}
