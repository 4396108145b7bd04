//! What a completed run remembered: the record of its `Remember` steps
//! (the facets its capabilities mark `remember`, written to the envelope's
//! `memory.rememberTo` namespace once the run has completed).
//!
//! Invariants: a run asks to remember once, in the commit that completes
//! it (never before: a failed or cancelled run remembers nothing); each
//! attempt writes every item again (a write is a put by key, so a repeat
//! changes nothing); a store that fails is retried on the notifications'
//! schedule, up to [`MAX_REMEMBER_ATTEMPTS`], then given up with the error
//! kept; an item the memory refuses (too large, its namespace full) is
//! named with why, and not retried.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Attempts at writing a run's remembered facets before giving up.
pub const MAX_REMEMBER_ATTEMPTS: u32 = 5;

/// The run's remembering, from the completing commit on.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RememberRecord {
    /// Where the items go.
    pub namespace: Vec<String>,
    /// Attempts made so far.
    #[serde(default)]
    pub attempts: u32,
    /// Every item was written or refused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub done: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gave_up: bool,
    /// The keys (facet names) written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub written: Vec<String>,
    /// The items the memory refused, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<RefusedMemory>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// An item the memory would not keep.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RefusedMemory {
    pub key: String,
    pub message: String,
}
