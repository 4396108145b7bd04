//! Compiled contracts: what the facet contract compiler (`compiler`)
//! produces (a merged schema with the provenance of each property), the
//! direction a contract is compiled for, and the cache of compiled contracts
//! a facet catalog keeps (`FacetCatalog::compiled_contracts`), with the
//! digests of its facets' schemas (`FacetSchemaKeys`). Types only, so the
//! catalog and the compiler both stand on them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::basics::schema::SchemaViolation;

/// Where one property of a compiled schema came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FacetProvenance {
    pub facet: String,
    /// JSON pointer of the property inside the compiled schema.
    pub schema_pointer: String,
    /// Whether the caller's contract tightened the facet's own schema here.
    pub tightened_by_caller_contract: bool,
}

/// A merged facet contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompiledContract {
    /// Shared: plans, requests and validators hand it around without copying.
    pub schema: Arc<Value>,
    /// Shared: frames and plans hand it around without copying.
    pub provenance: Arc<Vec<FacetProvenance>>,
    /// Digest of the schema text, computed once: the validator cache key.
    pub schema_key: Arc<str>,
}

impl CompiledContract {
    /// Attributes each violation to the facet owning the first segment of its
    /// instance pointer.
    pub fn attribute_violations(&self, violations: &mut [SchemaViolation]) {
        for violation in violations.iter_mut() {
            let first_segment = violation
                .instance_pointer
                .trim_start_matches('/')
                .split('/')
                .next()
                .unwrap_or_default();
            violation.facet = self
                .provenance
                .iter()
                .find(|provenance| provenance.facet == first_segment)
                .map(|provenance| provenance.facet.clone());
        }
    }
}

/// Which facets must be present in the merged object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContractDirection {
    /// Only facets that are `requiredByDefault` are required.
    Input,
    /// A producer must produce every selected facet.
    Output,
}

/// What a contract is compiled from, besides the catalog: the same recipe
/// on the same catalog compiles to the same contract.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct ContractRecipe {
    pub(crate) direction: ContractDirection,
    /// Each facet with the caller's tightening of it (its JSON text).
    pub(crate) facets: Vec<(String, Option<String>)>,
}

/// A catalog's compiled contracts by recipe. Planning compiled and
/// digested every node's contracts anew (a fifth of a five-node run's
/// time in memory); now a plan reuses what an earlier plan on the same
/// catalog compiled. Bounded: past `LIMIT` recipes (callers' tightenings
/// vary per envelope) it starts over.
#[derive(Debug, Default)]
pub(crate) struct CompiledContracts {
    by_recipe: Mutex<HashMap<ContractRecipe, CompiledContract>>,
}

impl CompiledContracts {
    const LIMIT: usize = 4096;

    pub(crate) fn get(&self, recipe: &ContractRecipe) -> Option<CompiledContract> {
        self.by_recipe.lock().ok()?.get(recipe).cloned()
    }

    pub(crate) fn put(&self, recipe: ContractRecipe, compiled: CompiledContract) {
        if let Ok(mut by_recipe) = self.by_recipe.lock() {
            if by_recipe.len() >= Self::LIMIT {
                by_recipe.clear();
            }
            by_recipe.insert(recipe, compiled);
        }
    }
}

/// The digest of each facet's schema text (`basics::schema::schema_key_of`),
/// computed at a facet's first use and kept with the catalog: a plan's
/// audit stamps and every contract key read them, and a registry's facet
/// schemas never change under it (a catalog that gains a facet starts a
/// new map).
#[derive(Debug, Default)]
pub(crate) struct FacetSchemaKeys {
    by_facet: Mutex<HashMap<String, Arc<str>>>,
}

impl FacetSchemaKeys {
    /// `facet`'s key, computed by `digest` the first time it is asked for.
    pub(crate) fn get_or_compute(
        &self,
        facet: &str,
        digest: impl FnOnce() -> Arc<str>,
    ) -> Arc<str> {
        if let Some(key) = self
            .by_facet
            .lock()
            .ok()
            .and_then(|keys| keys.get(facet).cloned())
        {
            return key;
        }
        let key = digest();
        if let Ok(mut keys) = self.by_facet.lock() {
            keys.insert(facet.to_string(), key.clone());
        }
        key
    }
}
