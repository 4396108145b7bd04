//! The builtin `registry_search` tool: what the registry offers (its
//! capabilities and facets), searched by words (BM25, the search memory
//! and `GET /capabilities?q=` use, over the same capability text the
//! planner ranks by: [`capability_search_text`]), or by meaning with
//! vectors an embedding model made (the tool runner asks the model; this
//! file only ranks). Every result says which (`searchedBy`). Read-only.

use serde_json::{Value, json};

use crate::catalog::registry::Registry;
use crate::contracts::capability::CapabilityRegistration;
use crate::contracts::facet::Facet;

/// One thing the registry search can find: a capability or a facet, the
/// text it is searched by, and what a match shows.
#[derive(Debug, Clone)]
pub struct SearchEntry {
    /// `capability` or `facet`.
    pub kind: &'static str,
    pub id: String,
    /// Names, title and description (and a capability's facets).
    pub text: String,
    pub shown: Value,
}

/// Every capability, then every facet, of `registry` as search entries
/// (the order the embedding search's vectors follow).
pub fn search_entries(registry: &Registry) -> Vec<SearchEntry> {
    let capabilities = registry.capabilities().map(|capability| SearchEntry {
        kind: "capability",
        id: capability.capability_id.clone(),
        text: capability_search_text(capability),
        shown: json!({"kind": "capability", "id": capability.capability_id,
                      "title": capability.display_name, "summary": capability.summary,
                      "agentType": capability.agent_type, "consumes": capability.input_contract,
                      "produces": capability.output_contract}),
    });
    let facets = registry.facets.list().map(|facet| SearchEntry {
        kind: "facet",
        id: facet.name.clone(),
        text: format!("{} {} {}", facet.name, facet.title, facet.description),
        shown: json!({"kind": "facet", "id": facet.name, "title": facet.title,
                      "summary": facet.description}),
    });
    capabilities.chain(facets).collect()
}

/// The `registry_search` tool: the capabilities and facets `query` finds
/// by words, ranked by BM25 over their texts (a rare word of the query
/// counts for more than a common one; a long text's many words count for
/// less), best first (ties: capabilities before facets, each by id). `kind` narrows to `capability` or
/// `facet`. Read-only.
pub fn search_registry(
    registry: &Registry,
    query: &str,
    kind: Option<&str>,
    limit: usize,
) -> Value {
    let entries: Vec<SearchEntry> = search_entries(registry)
        .into_iter()
        .filter(|entry| kind.is_none_or(|kind| kind == entry.kind))
        .collect();
    let texts: Vec<String> = entries
        .iter()
        .map(|entry| words(&entry.text).join(" "))
        .collect();
    let mut matches: Vec<(f64, SearchEntry)> =
        baton_memory::search::rank_texts(&texts, query, None, texts.len())
            .into_iter()
            .map(|found| (found.score, entries[found.index].clone()))
            .collect();
    let result = best_first(&mut matches, query, limit);
    with_method(result, "words")
}

/// The same search ranked by meaning: `entries` (from [`search_entries`])
/// by the cosine similarity of their `entry_vectors` (in the same order)
/// to `query_vector`, best first (ties by id), those above 0 only.
pub fn search_registry_by_vectors(
    entries: &[SearchEntry],
    entry_vectors: &[Vec<f32>],
    query: &str,
    query_vector: &[f32],
    kind: Option<&str>,
    limit: usize,
) -> Value {
    let mut matches: Vec<(f64, SearchEntry)> = entries
        .iter()
        .zip(entry_vectors)
        .filter(|(entry, _)| kind.is_none_or(|kind| kind == entry.kind))
        .map(|(entry, vector)| (cosine_similarity(query_vector, vector), entry.clone()))
        .filter(|(similarity, _)| *similarity > 0.0)
        .collect();
    let result = best_first(&mut matches, query, limit);
    with_method(result, "embeddings")
}

fn with_method(mut result: Value, method: &str) -> Value {
    result["searchedBy"] = json!(method);
    result
}

/// `{query, total, matches}`: the best `limit` (1 to 25) of `matches`.
fn best_first(matches: &mut [(f64, SearchEntry)], query: &str, limit: usize) -> Value {
    matches.sort_by(|left, right| {
        right
            .0
            .total_cmp(&left.0)
            .then_with(|| left.1.id.cmp(&right.1.id))
    });
    let total = matches.len();
    let shown: Vec<Value> = matches
        .iter()
        .take(limit.clamp(1, 25))
        .map(|(_, entry)| entry.shown.clone())
        .collect();
    json!({"query": query, "total": total, "matches": shown})
}

/// The text a capability is searched by: its id, name, summary,
/// strengths and facets, split into lower-case words (`copyVariants` →
/// `copy variants`), so ids and facet names match the words of a query.
pub fn capability_search_text(capability: &CapabilityRegistration) -> String {
    let strengths = capability
        .input_traits
        .as_ref()
        .map(|traits| traits.strengths.join(" "))
        .unwrap_or_default();
    let text = format!(
        "{} {} {} {} {} {}",
        capability.capability_id,
        capability.display_name,
        capability.summary,
        strengths,
        capability.input_contract.join(" "),
        capability.output_contract.join(" ")
    );
    words(&text).join(" ")
}

/// The cosine of the angle between `left` and `right` (0 when either is
/// all zeros or their lengths differ).
pub fn cosine_similarity(left: &[f32], right: &[f32]) -> f64 {
    if left.len() != right.len() {
        return 0.0;
    }
    let (mut dot, mut left_norm, mut right_norm) = (0.0f64, 0.0f64, 0.0f64);
    for (a, b) in left.iter().zip(right) {
        let (a, b) = (f64::from(*a), f64::from(*b));
        dot += a * b;
        left_norm += a * a;
        right_norm += b * b;
    }
    if left_norm == 0.0 || right_norm == 0.0 {
        return 0.0;
    }
    dot / (left_norm.sqrt() * right_norm.sqrt())
}

/// The facets whose names, titles and descriptions share words with
/// `query`, with how many, most first (ties by name).
pub fn facets_by_words<'r>(registry: &'r Registry, query: &str) -> Vec<(usize, &'r Facet)> {
    let terms = words(query);
    let mut found: Vec<(usize, &Facet)> = registry
        .facets
        .list()
        .map(|facet| {
            let text = words(&format!(
                "{} {} {}",
                facet.name, facet.title, facet.description
            ));
            let points = terms.iter().filter(|term| text.contains(term)).count();
            (points, facet)
        })
        .filter(|(points, _)| *points > 0)
        .collect();
    found.sort_by(|left, right| {
        right
            .0
            .cmp(&left.0)
            .then_with(|| left.1.name.cmp(&right.1.name))
    });
    found
}

/// Lower-case words of `text`, split on anything but letters and digits
/// (camelCase split too), so `copyVariants` matches "copy variants".
pub fn words(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for character in text.chars() {
        if character.is_alphanumeric() {
            if character.is_uppercase() && previous_lower && !current.is_empty() {
                found.push(std::mem::take(&mut current));
            }
            previous_lower = character.is_lowercase() || character.is_ascii_digit();
            current.extend(character.to_lowercase());
        } else {
            previous_lower = false;
            if !current.is_empty() {
                found.push(std::mem::take(&mut current));
            }
        }
    }
    if !current.is_empty() {
        found.push(current);
    }
    found
}
