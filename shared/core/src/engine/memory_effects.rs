//! The data of memory's effects (`Effect::RecallMemory`,
//! `Effect::Remember`) and what performing them produced: plain data,
//! shared by the effects and the steps that ask for them
//! (`memory_steps.rs`).

use baton_memory::item::Provenance;
use serde_json::Value;

use crate::contracts::memory_use::RecalledSnippet;
use crate::records::remembered::RefusedMemory;

/// A model node's search of the tenant's memory, before its model call.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryRecallCall {
    pub node_id: String,
    pub attempt: u32,
    pub namespaces: Vec<Vec<String>>,
    /// What the items are ranked for: the node's instructions and inputs.
    pub query: String,
    /// Items wanted at most (the envelope's `perNode`).
    pub limit: u32,
}

/// Why a recall's search could not be made (the memory store failed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecallFailure {
    pub message: String,
}

/// What the search found, best first, or why it could not be made.
pub type RecallOutcome = Result<Vec<RecalledSnippet>, RecallFailure>;

/// One facet a completed run remembers.
#[derive(Debug, Clone, PartialEq)]
pub struct RememberedFacet {
    /// The facet's name: the item's key.
    pub key: String,
    pub value: Value,
    pub provenance: Provenance,
}

/// One attempt at writing a completed run's remembered facets.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryRemembering {
    pub attempt: u32,
    pub namespace: Vec<String>,
    pub items: Vec<RememberedFacet>,
}

/// What writing them did: the keys written, the items refused (not to be
/// retried), and the store's failure (to be retried), if any.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RememberOutcome {
    pub written: Vec<String>,
    pub refused: Vec<RefusedMemory>,
    pub failure: Option<String>,
}
