//! The run item's `state` attribute: the run state as JSON, deflated.
//!
//! DynamoDB caps an item at 400 KB. Run state (envelope, plan with compiled
//! contracts, node outputs) is JSON that deflates several times over, so it
//! is stored compressed (binary `state`); a state that is still too large
//! after compression is refused with a clear error instead of DynamoDB's
//! validation failure. Runs written before compression (a string `state`)
//! still read.

use std::io::{Read, Write};

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use baton_core::state::run::RunState;
use baton_runtime::error::StoreError;
use flate2::Compression;
use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;

/// The largest compressed state stored: the item's other attributes and
/// key fit in what is left of DynamoDB's 400 KB.
pub const MAX_STORED_STATE_BYTES: usize = 380 * 1024;

/// `state` as the run item stores it (a state that fits one item).
pub fn encode_state(state: &RunState) -> Result<AttributeValue, StoreError> {
    encode_compressed(state, &format!("run {} state", state.run_id))
}

/// `state` as JSON, deflated, in parts (`large_items`): the first for the
/// run item, the others for part items of their own.
pub(crate) fn encode_state_parts(
    state: &RunState,
) -> Result<Vec<aws_sdk_dynamodb::primitives::Blob>, StoreError> {
    let what = format!("run {} state", state.run_id);
    let json = serde_json::to_vec(state).map_err(|error| StoreError::Corrupt(error.to_string()))?;
    let deflated = crate::dynamodb::large_items::deflate(&json, &what)?;
    crate::dynamodb::large_items::into_parts(deflated, &what, json.len())
}

/// `value` as JSON, deflated, refused when it would not fit in an item
/// (`what` names it in the error).
pub(crate) fn encode_compressed(
    value: &impl serde::Serialize,
    what: &str,
) -> Result<AttributeValue, StoreError> {
    let json = serde_json::to_vec(value).map_err(|error| StoreError::Corrupt(error.to_string()))?;
    let mut encoder = DeflateEncoder::new(Vec::with_capacity(json.len() / 4), Compression::fast());
    encoder
        .write_all(&json)
        .map_err(|error| StoreError::Corrupt(format!("compressing {what}: {error}")))?;
    let compressed = encoder
        .finish()
        .map_err(|error| StoreError::Corrupt(format!("compressing {what}: {error}")))?;
    if compressed.len() > MAX_STORED_STATE_BYTES {
        return Err(StoreError::TooLarge(format!(
            "{what} is {} bytes compressed ({} as JSON), over the {} bytes one DynamoDB item can hold",
            compressed.len(),
            json.len(),
            MAX_STORED_STATE_BYTES
        )));
    }
    Ok(AttributeValue::B(Blob::new(compressed)))
}

/// What `encode_compressed` wrote (`what` names it in the error).
pub(crate) fn decode_compressed<T: serde::de::DeserializeOwned>(
    attribute: Option<&AttributeValue>,
    what: &str,
) -> Result<T, StoreError> {
    let json = inflate(attribute, what)?;
    serde_json::from_slice(&json).map_err(|error| StoreError::Corrupt(format!("{what}: {error}")))
}

/// The JSON a deflated binary attribute holds.
fn inflate(attribute: Option<&AttributeValue>, what: &str) -> Result<Vec<u8>, StoreError> {
    let corrupt = |why: String| StoreError::Corrupt(format!("{what}: {why}"));
    let Some(AttributeValue::B(blob)) = attribute else {
        return Err(corrupt("missing, or not binary".into()));
    };
    let mut json = Vec::new();
    DeflateDecoder::new(blob.as_ref())
        .read_to_end(&mut json)
        .map_err(|error| corrupt(error.to_string()))?;
    Ok(json)
}

/// The run state from the run item's `state` attribute (deflated binary, or
/// JSON text in items written before states were compressed), in the
/// current format (an older one migrated: `stored_format`).
pub fn decode_state(attribute: Option<&AttributeValue>) -> Result<RunState, StoreError> {
    decode_state_json(&stored_state_json(attribute)?)
}

/// The JSON the run item's `state` attribute holds (inflated).
pub(crate) fn stored_state_json(attribute: Option<&AttributeValue>) -> Result<Vec<u8>, StoreError> {
    match attribute {
        Some(AttributeValue::B(_)) => inflate(attribute, "run state"),
        Some(AttributeValue::S(text)) => Ok(text.as_bytes().to_vec()),
        _ => Err(StoreError::Corrupt(
            "run state: attribute `state` missing or of another type".into(),
        )),
    }
}

/// The run state from its stored JSON, in the current format (an older
/// one migrated: `stored_format`).
pub(crate) fn decode_state_json(json: &[u8]) -> Result<RunState, StoreError> {
    baton_core::state::stored_format::decode_stored_run_state(json)
        .map_err(|error| StoreError::Corrupt(format!("run state: {error}")))
}
