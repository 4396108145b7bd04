//! The frame of a node's recall from the tenant's memory
//! (`memory_recalled`): which items it was given, with their provenance.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{FrameStamp, to_payload};
use crate::contracts::memory_use::RecalledSnippet;
use crate::wire::event::{EventDraft, EventType};

/// One item a node was given (its text stays out of the frame: the frame
/// names it, the node's request quotes it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecalledItem {
    pub namespace: Vec<String>,
    pub key: String,
    pub provenance: baton_memory::item::Provenance,
    pub updated_at: String,
}

/// `memory_recalled`: what a node attempt was given from memory before it
/// ran, best first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemoryRecalledPayload {
    pub attempt: u32,
    /// The namespaces searched.
    pub namespaces: Vec<Vec<String>>,
    pub items: Vec<RecalledItem>,
    /// Items found but left out to keep the request inside the model's
    /// context budget (the lowest ranked first).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub trimmed: u32,
    /// The memory store could not be searched: the node ran without
    /// recalled items, and this says why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

fn is_zero(count: &u32) -> bool {
    *count == 0
}

impl MemoryRecalledPayload {
    /// The payload naming `given`.
    pub fn naming(
        attempt: u32,
        namespaces: Vec<Vec<String>>,
        given: &[RecalledSnippet],
        trimmed: u32,
        unavailable: Option<String>,
    ) -> Self {
        Self {
            attempt,
            namespaces,
            items: given
                .iter()
                .map(|snippet| RecalledItem {
                    namespace: snippet.namespace.clone(),
                    key: snippet.key.clone(),
                    provenance: snippet.provenance.clone(),
                    updated_at: snippet.updated_at.clone(),
                })
                .collect(),
            trimmed,
            unavailable,
        }
    }
}

pub fn memory_recalled(
    stamp: &FrameStamp,
    node_id: &str,
    payload: &MemoryRecalledPayload,
) -> EventDraft {
    stamp
        .draft(EventType::MemoryRecalled)
        .node(node_id)
        .payload(to_payload(payload))
}
