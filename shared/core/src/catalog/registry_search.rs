//! The builtin `registry_search` tool: what the registry offers (its
//! capabilities and facets), searched by words. Read-only.

use serde_json::{Value, json};

use crate::catalog::registry::Registry;
use crate::contracts::facet::Facet;

/// The `registry_search` tool: capabilities and facets whose names, titles
/// and descriptions share the most words with `query`, best first (ties by
/// id). `kind` narrows to `capability` or `facet`. Read-only.
pub fn search_registry(
    registry: &Registry,
    query: &str,
    kind: Option<&str>,
    limit: usize,
) -> Value {
    let terms: Vec<String> = words(query);
    let score = |text: &str| {
        let found = words(text);
        terms.iter().filter(|term| found.contains(term)).count()
    };
    let mut matches: Vec<(usize, String, Value)> = Vec::new();
    if kind != Some("facet") {
        for capability in registry.capabilities() {
            let text = format!(
                "{} {} {} {} {}",
                capability.capability_id,
                capability.display_name,
                capability.summary,
                capability.input_contract.join(" "),
                capability.output_contract.join(" ")
            );
            let points = score(&text);
            if points > 0 {
                matches.push((
                    points,
                    capability.capability_id.clone(),
                    json!({"kind": "capability", "id": capability.capability_id,
                           "title": capability.display_name, "summary": capability.summary,
                           "agentType": capability.agent_type, "consumes": capability.input_contract,
                           "produces": capability.output_contract}),
                ));
            }
        }
    }
    if kind != Some("capability") {
        for (points, facet) in facets_by_words(registry, query) {
            matches.push((
                points,
                facet.name.clone(),
                json!({"kind": "facet", "id": facet.name, "title": facet.title,
                       "summary": facet.description}),
            ));
        }
    }
    matches.sort_by(|left, right| right.0.cmp(&left.0).then_with(|| left.1.cmp(&right.1)));
    let total = matches.len();
    let shown: Vec<Value> = matches
        .into_iter()
        .take(limit.clamp(1, 25))
        .map(|(_, _, found)| found)
        .collect();
    json!({"query": query, "total": total, "matches": shown})
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
