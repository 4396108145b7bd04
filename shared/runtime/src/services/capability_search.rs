//! The registry search by meaning (`GET /capabilities?q=`): a tenant's
//! capabilities (the registry files' and its registrations) ranked for a
//! query by the same search as memory (`baton_memory::search::rank_texts`):
//! BM25 over each capability's id, name, summary, strengths and facets
//! (`baton_core::planning::relevance::capability_search_text`, the text the
//! planner ranks by too), always; fused with the cosine similarity of their
//! embeddings when the deployment has an embedding model
//! (`BATON_EMBEDDINGS_MODEL`). A capability's vector is made once per
//! process and text; a failing embedder leaves the search lexical, and the
//! answer says so. Before a plan step, [`CapabilityService::relevance_for_planning`]
//! hands the planner the fused order for the run's objective.

use std::sync::Arc;

use baton_core::catalog::registry::Registry;
use baton_core::contracts::capability::CapabilityRegistration;
use baton_core::planning::relevance::capability_search_text;
use baton_memory::search::{FoundBy, rank_texts};

use super::capabilities::{CapabilityListing, CapabilityService};

/// Vectors a process keeps at most (then it starts over).
const MOST_KEPT_VECTORS: usize = 10_000;

/// One capability the search found.
#[derive(Debug, Clone, PartialEq)]
pub struct CapabilityMatch {
    pub capability_id: String,
    /// The fused score (higher first).
    pub score: f64,
    pub found_by: FoundBy,
}

/// What a search found, best first, and why it was by words alone when
/// the deployment's embedding model failed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CapabilitySearchAnswer {
    pub matches: Vec<CapabilityMatch>,
    pub embeddings_unavailable: Option<String>,
}

impl CapabilityService {
    /// The capabilities of `listing` that `query` finds, best first, at
    /// most `limit`.
    pub async fn search(
        &self,
        listing: &CapabilityListing,
        query: &str,
        limit: usize,
    ) -> CapabilitySearchAnswer {
        let capabilities: Vec<&CapabilityRegistration> = listing
            .registry
            .capabilities()
            .chain(
                listing
                    .registrations
                    .iter()
                    .map(|(record, _)| &record.registration),
            )
            .collect();
        self.rank_capabilities(&capabilities, query, limit).await
    }

    /// The registry's capabilities ranked for `query` (a run's objective)
    /// by words fused with embeddings, best first, for the planner to
    /// order candidates by. `None` when the deployment has no embedding
    /// model, or it failed: the planner then ranks by words itself, the
    /// same way.
    pub async fn relevance_for_planning(
        &self,
        registry: &Registry,
        query: &str,
    ) -> Option<Vec<String>> {
        self.embedder.as_ref()?;
        let capabilities: Vec<&CapabilityRegistration> = registry.capabilities().collect();
        let answer = self
            .rank_capabilities(&capabilities, query, capabilities.len())
            .await;
        if answer.embeddings_unavailable.is_some() {
            return None;
        }
        Some(
            answer
                .matches
                .into_iter()
                .map(|found| found.capability_id)
                .collect(),
        )
    }

    async fn rank_capabilities(
        &self,
        capabilities: &[&CapabilityRegistration],
        query: &str,
        limit: usize,
    ) -> CapabilitySearchAnswer {
        let texts: Vec<String> = capabilities
            .iter()
            .map(|capability| capability_search_text(capability))
            .collect();
        let mut answer = CapabilitySearchAnswer::default();
        let vectors = match self.vectors_for(&texts, query).await {
            Ok(vectors) => vectors,
            Err(EmbeddingsUnavailable(why)) => {
                tracing::warn!(%why, "the capability search ranks by words alone");
                answer.embeddings_unavailable = Some(why);
                None
            }
        };
        let ranked = match &vectors {
            Some((query_vector, text_vectors)) => {
                let views: Vec<Option<&[f32]>> = text_vectors
                    .iter()
                    .map(|vector| Some(vector.as_slice()))
                    .collect();
                rank_texts(&texts, query, Some((query_vector, &views)), limit)
            }
            None => rank_texts(&texts, query, None, limit),
        };
        answer.matches = ranked
            .into_iter()
            .map(|found| CapabilityMatch {
                capability_id: capabilities[found.index].capability_id.clone(),
                score: found.score,
                found_by: found.found_by,
            })
            .collect();
        answer
    }

    /// The query's vector and each text's (made once per text), when the
    /// deployment embeds; why not, when its model failed.
    async fn vectors_for(
        &self,
        texts: &[String],
        query: &str,
    ) -> Result<Option<(Vec<f32>, Vec<Arc<Vec<f32>>>)>, EmbeddingsUnavailable> {
        let Some(embedder) = &self.embedder else {
            return Ok(None);
        };
        let missing: Vec<String> = {
            let kept = self
                .search_vectors
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            texts
                .iter()
                .filter(|text| !kept.contains_key(*text))
                .cloned()
                .collect()
        };
        let mut asked = missing.clone();
        asked.push(query.to_string());
        let mut made = embedder.embed(&asked).await.map_err(|error| {
            EmbeddingsUnavailable(format!(
                "{} could not embed: {error}",
                embedder.model_name()
            ))
        })?;
        if made.len() != asked.len() {
            return Err(EmbeddingsUnavailable(format!(
                "{} answered {} vectors for {} texts",
                embedder.model_name(),
                made.len(),
                asked.len()
            )));
        }
        let query_vector = made.pop().unwrap_or_default();
        let mut kept = self
            .search_vectors
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if kept.len() + missing.len() > MOST_KEPT_VECTORS {
            kept.clear();
        }
        for (text, vector) in missing.into_iter().zip(made) {
            kept.insert(text, Arc::new(vector));
        }
        let vectors = texts
            .iter()
            .map(|text| kept.get(text).cloned().unwrap_or_default())
            .collect();
        Ok(Some((query_vector, vectors)))
    }
}

/// Why a search ranked by words alone: the embedding model failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddingsUnavailable(pub String);
