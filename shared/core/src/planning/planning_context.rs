//! What the deterministic planner works with: the facets the envelope
//! supplies and the goal facets it asks for, the planning context (the
//! envelope, the registry, the selection hints) and the draft being built
//! (the capabilities chosen, the facets they produce). `planner` chains
//! capabilities over them; `capability_needs` adds what the constraints and
//! the selection policy require.

use std::collections::{BTreeMap, BTreeSet};

use crate::catalog::registry::Registry;
use crate::contracts::capability::{AgentType, CapabilityRegistration, NodeKind};
use crate::contracts::envelope::TaskEnvelope;
use crate::contracts::policies::OptimisationObjective;
use crate::planning::relevance::Relevance;
use crate::planning::selection::{SelectionHints, trait_fit};

/// Facets the envelope's inputs supply (input keys that name catalog facets).
pub fn supplied_facets(envelope: &TaskEnvelope, registry: &Registry) -> BTreeSet<String> {
    envelope
        .inputs
        .keys()
        .filter(|key| registry.facets.contains(key))
        .cloned()
        .collect()
}

/// Goal facets: the contract's top-level properties that name catalog facets.
pub fn goal_facets(envelope: &TaskEnvelope, registry: &Registry) -> Vec<String> {
    envelope
        .output_contract
        .top_level_properties()
        .into_iter()
        .filter(|property| registry.facets.contains(property))
        .collect()
}

/// Whether `capability_id` matches a selection entry: the exact id, or an
/// agent prefix (`Agent` matches `Agent.capability`).
pub fn selection_matches(entry: &str, capability_id: &str) -> bool {
    capability_id == entry
        || capability_id
            .strip_prefix(entry)
            .is_some_and(|rest| rest.starts_with('.'))
}

pub(super) struct PlanningContext<'a> {
    pub(super) envelope: &'a TaskEnvelope,
    pub(super) registry: &'a Registry,
    pub(super) supplied: BTreeSet<String>,
    pub(super) hints: SelectionHints,
    /// An escalation's candidates by recent health and price, best first
    /// (empty when planning afresh).
    pub(super) health_order: &'a [String],
    /// The registry ranked for the envelope's objective.
    pub(super) relevance: Relevance<'a>,
}

#[derive(Clone, Default)]
pub(super) struct Draft {
    pub(super) chosen_capability_ids: Vec<String>,
    pub(super) produced: BTreeSet<String>,
    /// Capabilities used as derived (§5.6): the input facets chosen for them.
    pub(super) derived_inputs: BTreeMap<String, Vec<String>>,
}

impl Draft {
    /// Adds `capability` to the plan; its outputs become available.
    pub(super) fn choose(&mut self, capability: &CapabilityRegistration) {
        self.chosen_capability_ids
            .push(capability.capability_id.clone());
        self.produced
            .extend(capability.output_contract.iter().cloned());
    }
}

/// The agent a capability belongs to: its id up to the first `.`
/// (`writer.summary` → `writer`), as selection entries match.
fn agent_of(capability_id: &str) -> &str {
    capability_id
        .split_once('.')
        .map_or(capability_id, |(agent, _)| agent)
}

impl<'a> PlanningContext<'a> {
    pub(super) fn is_listed(
        &self,
        list: fn(&crate::contracts::policies::SelectionPolicy) -> &Vec<String>,
        capability_id: &str,
    ) -> bool {
        self.envelope
            .policies
            .planner_selection()
            .is_some_and(|selection| {
                list(selection)
                    .iter()
                    .any(|entry| selection_matches(entry, capability_id))
            })
    }

    /// Whether the envelope's `optimisation.objective` is `objective`.
    pub(super) fn objective_is(&self, objective: OptimisationObjective) -> bool {
        self.envelope
            .policies
            .planner_optimisation()
            .and_then(|optimisation| optimisation.objective)
            == Some(objective)
    }

    /// Cheaper first, unless `optimisation.objective` is `quality`, which
    /// prefers the higher tiers; unknown tiers last either way.
    /// `tokenEfficiency` ranks by the declared token estimate, fewest first
    /// (none declared: last).
    pub(super) fn cost_order(&self, capability: &CapabilityRegistration) -> i64 {
        let rank = i64::from(capability.cost_rank());
        let objective = self
            .envelope
            .policies
            .planner_optimisation()
            .and_then(|optimisation| optimisation.objective);
        match objective {
            Some(OptimisationObjective::Quality) if rank <= 2 => 2 - rank,
            Some(OptimisationObjective::TokenEfficiency) => capability
                .cost
                .as_ref()
                .and_then(|cost| cost.estimated_tokens)
                .map_or(i64::MAX, |tokens| i64::try_from(tokens).unwrap_or(i64::MAX)),
            _ => rank,
        }
    }

    /// The inputs the planner must wire: those required by default, and
    /// every facet the capability's guard reads (it cannot be decided
    /// without them).
    pub(super) fn required_inputs<'c>(
        &self,
        capability: &'c CapabilityRegistration,
    ) -> impl Iterator<Item = &'c String> + use<'c, '_> {
        let guard_reads: Vec<String> = capability
            .guard
            .as_ref()
            .map(|guard| {
                crate::basics::logic::variables_read(guard)
                    .iter()
                    .map(|read| read.root().to_string())
                    .collect()
            })
            .unwrap_or_default();
        capability.input_contract.iter().filter(move |facet| {
            guard_reads.contains(facet)
                || self
                    .registry
                    .facets
                    .get(facet)
                    .is_some_and(|facet| facet.required_by_default)
        })
    }

    fn candidates_for(&self, facet: &str, draft: &Draft) -> Vec<&'a CapabilityRegistration> {
        let cutoff = self
            .envelope
            .policies
            .planner_selection()
            .and_then(|selection| selection.cutoff)
            .unwrap_or_default();
        let mut candidates: Vec<&CapabilityRegistration> = self
            .registry
            .producers_of(facet)
            .into_iter()
            .filter(|capability| !self.is_listed(|s| &s.forbid, &capability.capability_id))
            .filter(|capability| !trait_fit(capability, &self.hints).is_below(cutoff))
            .collect();
        // Under `speed`, a capability making more of the goal facets not
        // made yet ranks first: fewer nodes.
        let speed_goals: BTreeSet<String> = if self.objective_is(OptimisationObjective::Speed) {
            self.envelope
                .output_contract
                .top_level_properties()
                .into_iter()
                .filter(|goal| !draft.produced.contains(goal) && !self.supplied.contains(goal))
                .collect()
        } else {
            BTreeSet::new()
        };
        // Keys read policies and traits: computed once per candidate.
        candidates.sort_by_cached_key(|capability| {
            let goals_made = capability
                .output_contract
                .iter()
                .filter(|facet| speed_goals.contains(*facet))
                .count();
            let missing_inputs = self
                .required_inputs(capability)
                .filter(|input| !self.supplied.contains(*input) && !draft.produced.contains(*input))
                .count();
            (
                !self.is_listed(|s| &s.require, &capability.capability_id),
                !self.is_listed(|s| &s.prefer, &capability.capability_id),
                self.is_listed(|s| &s.avoid, &capability.capability_id),
                capability.kind == NodeKind::Fallback,
                capability.agent_type == AgentType::Human,
                self.health_order
                    .iter()
                    .position(|ranked| *ranked == capability.capability_id)
                    .unwrap_or(usize::MAX),
                missing_inputs,
                std::cmp::Reverse(goals_made),
                -trait_fit(capability, &self.hints).score(),
                self.cost_order(capability),
                // Among equals on all of the above (a cost tier is coarse),
                // the capability whose text fits the objective best.
                self.relevance.rank_of(&capability.capability_id),
                capability.capability_id.clone(),
            )
        });
        candidates
    }

    /// Makes `facet` available in `draft`, adding producers; restores the
    /// draft on failure.
    pub(super) fn resolve_facet(
        &self,
        facet: &str,
        draft: &mut Draft,
        stack: &mut Vec<String>,
    ) -> bool {
        if self.supplied.contains(facet) || draft.produced.contains(facet) {
            return true;
        }
        if stack.iter().any(|pending| pending == facet) {
            return false;
        }
        stack.push(facet.to_string());
        for capability in self.candidates_for(facet, draft) {
            let snapshot = draft.clone();
            let inputs_resolved = self
                .required_inputs(capability)
                .all(|input| self.resolve_facet(input, draft, stack));
            if inputs_resolved {
                draft.choose(capability);
                stack.pop();
                return true;
            }
            *draft = snapshot;
        }
        let derived = self.derive_producer(facet, draft);
        stack.pop();
        derived
    }

    /// No declared capability can produce `facet` with the facets at hand:
    /// derive one (§5.6, §5.7 step 1). A producer of `facet` is run on the
    /// facets its agent supports (the input contracts of all the agent's
    /// capabilities) that are available now; at least one must be. The node
    /// is flagged derived and the validator notes which declared inputs it
    /// runs without.
    fn derive_producer(&self, facet: &str, draft: &mut Draft) -> bool {
        for capability in self.candidates_for(facet, draft) {
            let agent = agent_of(&capability.capability_id);
            let supported_inputs: BTreeSet<&String> = self
                .registry
                .capabilities()
                .filter(|other| agent_of(&other.capability_id) == agent)
                .flat_map(|other| other.input_contract.iter())
                .collect();
            let available: Vec<String> = supported_inputs
                .into_iter()
                .filter(|input| self.supplied.contains(*input) || draft.produced.contains(*input))
                .cloned()
                .collect();
            if available.is_empty() {
                continue;
            }
            draft.choose(capability);
            draft
                .derived_inputs
                .insert(capability.capability_id.clone(), available);
            return true;
        }
        false
    }
}
