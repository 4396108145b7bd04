//! How well each capability fits what a run asks for: the registry ranked
//! for the envelope's `objective` by the search memory uses
//! (`baton_memory::search::rank_texts`): BM25 over each capability's
//! [`capability_search_text`], always; fused with embeddings when the
//! shell has an embedding model and hands the fused order in. The planner
//! reads it to order candidates its harder criteria leave level (see
//! `planning_context`), and `GET /capabilities?q=` ranks by the same text.
//!
//! Sans-IO: lexical ranking is computed here, lazily, only when a facet
//! has more than one candidate; a fused ranking needs a model call, so the
//! shell makes it and passes the order in.

use std::cell::OnceCell;
use std::collections::BTreeMap;

use serde::Serialize;

use crate::catalog::registry::Registry;
pub use crate::catalog::registry_search::capability_search_text;
use crate::contracts::capability::CapabilityRegistration;
use crate::contracts::envelope::TaskEnvelope;

/// What the planner's relevance is searched for: the envelope's objective.
pub fn relevance_query(envelope: &TaskEnvelope) -> &str {
    envelope.objective.as_str()
}

/// The ids of `registry`'s capabilities that `query` finds by words, best
/// first (ties by id); those it does not find are left out.
pub fn lexical_relevance(registry: &Registry, query: &str) -> Vec<String> {
    let capabilities: Vec<&CapabilityRegistration> = registry.capabilities().collect();
    let texts: Vec<String> = capabilities
        .iter()
        .map(|capability| capability_search_text(capability))
        .collect();
    baton_memory::search::rank_texts(&texts, query, None, texts.len())
        .into_iter()
        .map(|found| capabilities[found.index].capability_id.clone())
        .collect()
}

/// How the relevance order was made (recorded in `metadata.relevance`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RankedBy {
    /// BM25 alone.
    Words,
    /// BM25 fused with the deployment's embeddings (the shell's order).
    WordsAndEmbeddings,
}

/// The relevance of each capability, made once per plan and only if asked.
pub(super) struct Relevance<'a> {
    given: Option<&'a [String]>,
    registry: &'a Registry,
    query: &'a str,
    ranks: OnceCell<BTreeMap<String, usize>>,
}

impl<'a> Relevance<'a> {
    /// `given`: the shell's fused order, best first; `None`: rank by words
    /// here when first asked.
    pub(super) fn new(registry: &'a Registry, query: &'a str, given: Option<&'a [String]>) -> Self {
        Relevance {
            given,
            registry,
            query,
            ranks: OnceCell::new(),
        }
    }

    /// `capability_id`'s place in the order (0 best); `usize::MAX` when
    /// the query does not find it.
    pub(super) fn rank_of(&self, capability_id: &str) -> usize {
        self.ranks
            .get_or_init(|| {
                let order = match self.given {
                    Some(given) => given.to_vec(),
                    None => lexical_relevance(self.registry, self.query),
                };
                order
                    .into_iter()
                    .enumerate()
                    .map(|(rank, capability_id)| (capability_id, rank))
                    .collect()
            })
            .get(capability_id)
            .copied()
            .unwrap_or(usize::MAX)
    }

    /// Whether any ordering asked for relevance (then the plan records it).
    pub(super) fn was_consulted(&self) -> bool {
        self.ranks.get().is_some()
    }

    pub(super) fn query(&self) -> &str {
        self.query
    }

    pub(super) fn ranked_by(&self) -> RankedBy {
        if self.given.is_some() {
            RankedBy::WordsAndEmbeddings
        } else {
            RankedBy::Words
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn camel_case_ids_and_facets_are_searched_as_words() {
        let capability: CapabilityRegistration = serde_json::from_value(serde_json::json!({
            "capabilityId": "ReportWriter.quarterlySummary",
            "agentType": "ai",
            "version": "1",
            "displayName": "Report writer",
            "summary": "Writes reports.",
            "inputContract": ["salesFigures"],
            "outputContract": ["summaryText"]
        }))
        .unwrap_or_else(|error| panic!("capability: {error}"));
        let text = capability_search_text(&capability);
        for word in ["quarterly", "summary", "sales", "figures", "text", "report"] {
            assert!(
                text.split(' ').any(|found| found == word),
                "`{word}` in {text}"
            );
        }
    }
}
