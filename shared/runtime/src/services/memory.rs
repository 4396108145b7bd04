//! A tenant's memory across runs (`baton_memory`): items written by
//! people (the API), by runs (remembered facets, agents' tools), read,
//! listed, searched and forgotten. Search reads each namespace named (at
//! most its cap of items) and ranks them in the process: BM25 always,
//! fused with embedding similarity when the deployment has an embedding
//! model (each item is embedded when it is written).
//!
//! Invariants:
//! - A namespace holds at most the cap's items
//!   ([`DEFAULT_NAMESPACE_CAP`], `BATON_MEMORY_NAMESPACE_CAP`): a new key
//!   past it is refused, never another dropped.
//! - An expired item is answered by nothing (get, list, search) from the
//!   moment it expires; retention removes it later.
//! - A write whose embedding fails is kept without one (lexical search
//!   still finds it), and says so in a warning log.

use std::sync::Arc;

use baton_core::basics::instant::Instant;
use baton_core::contracts::memory_use::RecalledSnippet;
use baton_core::engine::{MemoryRecallCall, MemoryRemembering, RecallFailure, RememberOutcome};
use baton_core::records::remembered::RefusedMemory;
use baton_memory::item::{
    InvalidItem, MemoryItem, Provenance, check_item, check_namespace, text_of,
};
use baton_memory::search::{QueryEmbedding, RankedItem, rank};
use serde_json::Value;

use crate::error::StoreError;
use crate::ports::{Clock, MemoryPut, MemoryStore, TextEmbedder};

/// Items a namespace holds at most unless the deployment says otherwise:
/// search reads a namespace whole, so this bounds a search's cost.
pub const DEFAULT_NAMESPACE_CAP: usize = 10_000;

/// Items a list answers at most.
pub const MAX_LISTED: usize = 1_000;

/// Items a search answers at most.
pub const MAX_FOUND: usize = 50;

/// Namespaces one search reads at most.
pub const MAX_SEARCHED_NAMESPACES: usize = 10;

/// Why a memory call did not do what it was asked.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MemoryError {
    /// The request does not fit: the JSON path and what is wrong.
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
    /// The namespace holds its cap of items and the key is new.
    #[error("the namespace holds {cap} items, its cap; delete some or use another namespace")]
    NamespaceFull { cap: usize },
    /// The store failed; a retry may succeed.
    #[error("the memory store failed: {0}")]
    Unavailable(String),
}

impl From<StoreError> for MemoryError {
    fn from(error: StoreError) -> Self {
        MemoryError::Unavailable(error.to_string())
    }
}

impl From<InvalidItem> for MemoryError {
    fn from(error: InvalidItem) -> Self {
        MemoryError::Invalid {
            path: error.path,
            message: error.message,
        }
    }
}

/// What a writer gives of an item.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryWrite {
    pub namespace: Vec<String>,
    pub key: String,
    pub value: Value,
    /// What search reads; the value's text when not given.
    pub text: Option<String>,
    /// RFC 3339, in the future.
    pub expires_at: Option<String>,
    pub provenance: Provenance,
}

/// Whether an expiry (RFC 3339) is at or before `now` (RFC 3339); an
/// expiry that is not a time never passes.
pub fn expired(expires_at: &str, now_rfc3339: &str) -> bool {
    match (
        Instant::parse_rfc3339(expires_at),
        Instant::parse_rfc3339(now_rfc3339),
    ) {
        (Some(expiry), Some(now)) => expiry.unix_millis() <= now.unix_millis(),
        _ => false,
    }
}

/// A tenant's memory.
pub struct MemoryService {
    store: Arc<dyn MemoryStore>,
    embedder: Option<Arc<dyn TextEmbedder>>,
    clock: Arc<dyn Clock>,
    namespace_cap: usize,
}

impl MemoryService {
    pub fn new(
        store: Arc<dyn MemoryStore>,
        embedder: Option<Arc<dyn TextEmbedder>>,
        clock: Arc<dyn Clock>,
        namespace_cap: usize,
    ) -> Self {
        Self {
            store,
            embedder,
            clock,
            namespace_cap,
        }
    }

    /// The cap of items per namespace.
    pub fn namespace_cap(&self) -> usize {
        self.namespace_cap
    }

    fn live(&self, item: &MemoryItem) -> bool {
        let now = self.clock.now().rfc3339();
        !item
            .expires_at
            .as_deref()
            .is_some_and(|expiry| expired(expiry, &now))
    }

    /// Checks and keeps an item (a new version replaces the old, keeping
    /// its creation time); answers it as kept.
    pub async fn put(
        &self,
        tenant_id: &str,
        write: MemoryWrite,
    ) -> Result<MemoryItem, MemoryError> {
        let text = write.text.clone().unwrap_or_else(|| text_of(&write.value));
        check_item(&write.namespace, &write.key, &write.value, &text)?;
        let now = self.clock.now();
        if let Some(expiry) = &write.expires_at {
            let Some(at) = Instant::parse_rfc3339(expiry) else {
                return Err(MemoryError::Invalid {
                    path: "$.expiresAt".into(),
                    message: format!("`{expiry}` is not an RFC 3339 time"),
                });
            };
            if at.unix_millis() <= now.unix_millis() {
                return Err(MemoryError::Invalid {
                    path: "$.expiresAt".into(),
                    message: format!("`{expiry}` is not in the future"),
                });
            }
        }
        let created_at = match self
            .store
            .get_memory(tenant_id, &write.namespace, &write.key)
            .await?
        {
            Some(existing) if self.live(&existing) => existing.created_at,
            _ => now.rfc3339(),
        };
        let (embedding, embedding_model) = self.embedding_of(&text).await;
        let item = MemoryItem {
            namespace: write.namespace,
            key: write.key,
            value: write.value,
            text,
            provenance: write.provenance,
            created_at,
            updated_at: now.rfc3339(),
            expires_at: write.expires_at,
            embedding,
            embedding_model,
        };
        match self
            .store
            .put_memory(tenant_id, &item, self.namespace_cap)
            .await?
        {
            MemoryPut::Kept => Ok(item),
            MemoryPut::NamespaceFull { cap } => Err(MemoryError::NamespaceFull { cap }),
        }
    }

    async fn embedding_of(&self, text: &str) -> (Option<Vec<f32>>, Option<String>) {
        let Some(embedder) = &self.embedder else {
            return (None, None);
        };
        match embedder.embed(&[text.to_string()]).await {
            Ok(mut vectors) if vectors.len() == 1 => (vectors.pop(), Some(embedder.model_name())),
            Ok(vectors) => {
                tracing::warn!(
                    answered = vectors.len(),
                    "the embedding model answered not one vector for one text; the item is kept without one"
                );
                (None, None)
            }
            Err(error) => {
                tracing::warn!(%error, "the item's embedding failed; it is kept without one (lexical search still finds it)");
                (None, None)
            }
        }
    }

    /// The item, unless absent or expired.
    pub async fn get(
        &self,
        tenant_id: &str,
        namespace: &[String],
        key: &str,
    ) -> Result<Option<MemoryItem>, MemoryError> {
        check_namespace("namespace", namespace, false)?;
        Ok(self
            .store
            .get_memory(tenant_id, namespace, key)
            .await?
            .filter(|item| self.live(item)))
    }

    /// Deletes the item; whether it was there.
    pub async fn delete(
        &self,
        tenant_id: &str,
        namespace: &[String],
        key: &str,
    ) -> Result<bool, MemoryError> {
        check_namespace("namespace", namespace, false)?;
        Ok(self.store.delete_memory(tenant_id, namespace, key).await?)
    }

    /// The live items of `prefix` and under it, by namespace then key, at
    /// most `limit` (1 to [`MAX_LISTED`]).
    pub async fn list(
        &self,
        tenant_id: &str,
        prefix: &[String],
        limit: usize,
    ) -> Result<Vec<MemoryItem>, MemoryError> {
        check_namespace("prefix", prefix, true)?;
        let items = self
            .store
            .list_memory(tenant_id, prefix, limit.clamp(1, MAX_LISTED))
            .await?;
        Ok(items.into_iter().filter(|item| self.live(item)).collect())
    }

    /// The best `limit` live items of `namespaces` for `query` (each
    /// namespace read whole, up to its cap).
    pub async fn search(
        &self,
        tenant_id: &str,
        namespaces: &[Vec<String>],
        query: &str,
        limit: usize,
    ) -> Result<Vec<RankedItem>, MemoryError> {
        let items = self.gather(tenant_id, namespaces).await?;
        Ok(self.ranked(items, query, limit).await)
    }

    /// The live items of `namespaces` (1 to [`MAX_SEARCHED_NAMESPACES`]).
    async fn gather(
        &self,
        tenant_id: &str,
        namespaces: &[Vec<String>],
    ) -> Result<Vec<MemoryItem>, MemoryError> {
        if namespaces.is_empty() || namespaces.len() > MAX_SEARCHED_NAMESPACES {
            return Err(MemoryError::Invalid {
                path: "$.namespaces".into(),
                message: format!("1 to {MAX_SEARCHED_NAMESPACES} namespaces"),
            });
        }
        let mut items = Vec::new();
        for (index, namespace) in namespaces.iter().enumerate() {
            check_namespace(&format!("$.namespaces[{index}]"), namespace, false)?;
            items.extend(
                self.store
                    .namespace_memory(tenant_id, namespace, self.namespace_cap)
                    .await?
                    .into_iter()
                    .filter(|item| self.live(item)),
            );
        }
        Ok(items)
    }

    /// `items` ranked for `query`: lexically, fused with embedding
    /// similarity when the deployment embeds.
    async fn ranked(&self, items: Vec<MemoryItem>, query: &str, limit: usize) -> Vec<RankedItem> {
        let embedding = match &self.embedder {
            Some(embedder) if !items.is_empty() => {
                match embedder.embed(&[query.to_string()]).await {
                    Ok(mut vectors) if vectors.len() == 1 => {
                        vectors.pop().map(|vector| QueryEmbedding {
                            model: embedder.model_name(),
                            vector,
                        })
                    }
                    Ok(_) => None,
                    Err(error) => {
                        tracing::warn!(%error, "the query's embedding failed; the search is lexical only");
                        None
                    }
                }
            }
            _ => None,
        };
        rank(items, query, embedding.as_ref(), limit.clamp(1, MAX_FOUND))
    }

    /// What a run's node recalls: the best `limit` items of the namespaces
    /// for its query, then (the namespaces being the ones its envelope
    /// names) the most recently written of the rest, until `limit`; an
    /// error's text when the memory cannot be read.
    pub async fn recall(
        &self,
        tenant_id: &str,
        call: &MemoryRecallCall,
    ) -> Result<Vec<RecalledSnippet>, RecallFailure> {
        let items = self
            .gather(tenant_id, &call.namespaces)
            .await
            .map_err(|error| RecallFailure {
                message: error.to_string(),
            })?;
        let limit = call.limit as usize;
        let mut rest = items.clone();
        let mut chosen: Vec<MemoryItem> = self
            .ranked(items, &call.query, limit)
            .await
            .into_iter()
            .map(|ranked| ranked.item)
            .collect();
        if chosen.len() < limit {
            rest.retain(|item| {
                !chosen
                    .iter()
                    .any(|kept| kept.namespace == item.namespace && kept.key == item.key)
            });
            rest.sort_by(|left, right| right.updated_at.cmp(&left.updated_at));
            chosen.extend(rest.into_iter().take(limit - chosen.len()));
        }
        Ok(chosen
            .into_iter()
            .map(|item| {
                RecalledSnippet::new(
                    item.namespace,
                    item.key,
                    &item.text,
                    item.provenance,
                    item.updated_at,
                )
            })
            .collect())
    }

    /// Writes a completed run's remembered facets (each keyed by its
    /// facet): what was written, what the memory refused and why, and the
    /// store's failure (the step retries every item) if it failed.
    pub async fn remember(
        &self,
        tenant_id: &str,
        remembering: &MemoryRemembering,
    ) -> RememberOutcome {
        let mut outcome = RememberOutcome::default();
        for facet in &remembering.items {
            let write = MemoryWrite {
                namespace: remembering.namespace.clone(),
                key: facet.key.clone(),
                text: Some(format!("{}: {}", facet.key, text_of(&facet.value))),
                value: facet.value.clone(),
                expires_at: None,
                provenance: facet.provenance.clone(),
            };
            match self.put(tenant_id, write).await {
                Ok(_) => outcome.written.push(facet.key.clone()),
                Err(error @ (MemoryError::Invalid { .. } | MemoryError::NamespaceFull { .. })) => {
                    outcome.refused.push(RefusedMemory {
                        key: facet.key.clone(),
                        message: error.to_string(),
                    })
                }
                Err(error @ MemoryError::Unavailable(_)) => {
                    outcome.failure = Some(error.to_string());
                    return outcome;
                }
            }
        }
        outcome
    }

    /// Deletes every item of `prefix` and under it; how many.
    pub async fn forget_under(
        &self,
        tenant_id: &str,
        prefix: &[String],
    ) -> Result<usize, MemoryError> {
        check_namespace("prefix", prefix, true)?;
        Ok(self.store.delete_memory_under(tenant_id, prefix).await?)
    }

    /// Deletes every item `person` wrote; how many.
    pub async fn forget_person(&self, tenant_id: &str, person: &str) -> Result<usize, MemoryError> {
        if person.trim().is_empty() {
            return Err(MemoryError::Invalid {
                path: "person".into(),
                message: "a person's name".into(),
            });
        }
        Ok(self
            .store
            .delete_memory_of_person(tenant_id, person)
            .await?)
    }

    /// Removes up to `limit` expired items (retention's pass); how many.
    pub async fn remove_expired(&self, limit: usize) -> Result<usize, MemoryError> {
        Ok(self
            .store
            .remove_expired_memory(&self.clock.now().rfc3339(), limit)
            .await?)
    }
}
