//! Which facets a caller's words ask for, and which inputs a plan for
//! them needs: the builder's reading of the registry.
//!
//! A facet is asked for when every word of its name appears in the
//! objective (a word of five letters or more also matches its longer or
//! shorter forms: "recommend" and "recommendation"), or its exact name
//! does; a facet whose name words are all inside another asked-for facet's
//! is dropped for the more specific one. Only facets some capability
//! produces and a caller may ask for are candidates.

use std::collections::BTreeSet;

use baton_core::catalog::registry::Registry;
use baton_core::catalog::registry_search::words;
use baton_core::contracts::capability::{AgentType, CapabilityRegistration};
use baton_core::contracts::facet::Facet;

/// Words that carry no meaning for matching (articles, pronouns, the
/// verbs of asking).
const IGNORED_WORDS: &[&str] = &[
    "a", "an", "and", "the", "for", "of", "to", "in", "on", "with", "that", "it", "its", "our",
    "we", "i", "me", "my", "you", "your", "is", "are", "be", "this", "these", "those", "by", "as",
    "at", "from", "or", "want", "need", "please", "would", "like", "some", "any", "into", "about",
    "which", "what", "how", "make", "create", "give", "get", "do", "us",
];

/// The shortest word matched by its longer or shorter forms.
const STEM_MATCH_MIN_LETTERS: usize = 5;

fn meaningful_words(text: &str) -> Vec<String> {
    words(text)
        .into_iter()
        .filter(|word| !IGNORED_WORDS.contains(&word.as_str()))
        .collect()
}

fn word_matches(said: &str, facet_word: &str) -> bool {
    said == facet_word
        || (said.len().min(facet_word.len()) >= STEM_MATCH_MIN_LETTERS
            && (said.starts_with(facet_word) || facet_word.starts_with(said)))
}

/// A facet a caller may ask for as an output: some capability produces it.
pub fn producible(registry: &Registry, facet: &Facet) -> bool {
    facet.direction.allows_output() && !registry.producers_of(&facet.name).is_empty()
}

/// The facets `objective` asks for, in the registry's order.
pub fn goals_in_words(registry: &Registry, objective: &str) -> Vec<String> {
    let said = meaningful_words(objective);
    let named: BTreeSet<&str> = objective
        .split(|character: char| !(character.is_alphanumeric() || character == '_'))
        .collect();
    let matched: Vec<(&Facet, Vec<String>)> = registry
        .facets
        .list()
        .filter(|facet| producible(registry, facet))
        .filter_map(|facet| {
            let name_words = meaningful_words(&facet.name);
            let all_said = !name_words.is_empty()
                && name_words
                    .iter()
                    .all(|word| said.iter().any(|s| word_matches(s, word)));
            (all_said || named.contains(facet.name.as_str())).then_some((facet, name_words))
        })
        .collect();
    matched
        .iter()
        .filter(|(facet, name_words)| {
            !matched.iter().any(|(other, other_words)| {
                other.name != facet.name
                    && other_words.len() > name_words.len()
                    && name_words.iter().all(|word| other_words.contains(word))
            })
        })
        .map(|(facet, _)| facet.name.clone())
        .collect()
}

/// The inputs a plan for `goals` needs that `supplied` does not give:
/// `required` (a capability on the way cannot run without them and
/// nothing produces them) and `optional` (read if given, produced by
/// nothing).
#[derive(Debug, Default, PartialEq)]
pub struct InputsToAsk {
    pub required: Vec<String>,
    pub optional: Vec<String>,
}

/// Walks from each goal to a producer (a model's before a person's, then
/// by id) and from its required inputs on, as the deterministic planner
/// resolves facets. The plan check has the last word.
pub fn inputs_to_ask(
    registry: &Registry,
    goals: &[String],
    supplied: &BTreeSet<String>,
) -> InputsToAsk {
    let mut walk = InputWalk {
        registry,
        supplied,
        visited: BTreeSet::new(),
        asked: InputsToAsk::default(),
    };
    for goal in goals {
        walk.visit(goal);
    }
    let required = walk.asked.required.clone();
    walk.asked
        .optional
        .retain(|facet| !required.contains(facet) && !supplied.contains(facet));
    walk.asked
}

struct InputWalk<'r> {
    registry: &'r Registry,
    supplied: &'r BTreeSet<String>,
    visited: BTreeSet<String>,
    asked: InputsToAsk,
}

impl InputWalk<'_> {
    fn visit(&mut self, facet_name: &str) {
        if self.supplied.contains(facet_name) || !self.visited.insert(facet_name.to_string()) {
            return;
        }
        let registry = self.registry;
        let Some(producer) = first_producer(registry, facet_name) else {
            let givable = self
                .registry
                .facets
                .get(facet_name)
                .is_some_and(|facet| facet.direction.allows_input());
            if givable && !self.asked.required.iter().any(|name| name == facet_name) {
                self.asked.required.push(facet_name.to_string());
            }
            return;
        };
        for input in &producer.input_contract {
            let Some(facet) = registry.facets.get(input) else {
                continue;
            };
            if facet.required_by_default || guard_reads(producer, input) {
                self.visit(input);
            } else if facet.direction.allows_input()
                && registry.producers_of(input).is_empty()
                && !self.asked.optional.contains(input)
            {
                self.asked.optional.push(input.clone());
            }
        }
    }
}

/// A model's producer before a person's, then by id.
fn first_producer<'r>(
    registry: &'r Registry,
    facet_name: &str,
) -> Option<&'r CapabilityRegistration> {
    let mut producers = registry.producers_of(facet_name);
    producers.sort_by_key(|capability| {
        (
            capability.agent_type != AgentType::Ai,
            capability.capability_id.clone(),
        )
    });
    producers.into_iter().next()
}

fn guard_reads(capability: &CapabilityRegistration, facet_name: &str) -> bool {
    capability.guard.as_ref().is_some_and(|guard| {
        baton_core::basics::logic::variables_read(guard)
            .iter()
            .any(|read| read.root() == facet_name)
    })
}
