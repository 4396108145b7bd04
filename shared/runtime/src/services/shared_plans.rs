//! Plans shared across runs. Runs planned over the same registry for the
//! same kind of envelope get equal plans (the plan names no run), and a
//! plan is most of a run's state: a process holding ten thousand runs of
//! one workflow would hold ten thousand copies. The committer hands every
//! plan a step has just made to [`SharedPlans::share`], which answers an
//! equal plan another run already holds, so they hold one.
//!
//! A plan is found by a fingerprint of its shape (node ids, capabilities,
//! output facets, edges) and confirmed equal whole; the map holds weak
//! references, so a plan no run holds any more is freed, and its entry
//! swept when the map has doubled since the last sweep.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, Weak};

use baton_core::planning::plan::PlanGraph;

#[derive(Default)]
pub(crate) struct SharedPlans {
    held: Mutex<HeldPlans>,
}

#[derive(Default)]
struct HeldPlans {
    by_fingerprint: HashMap<u64, Vec<Weak<PlanGraph>>>,
    /// Entries after the last sweep (the next is due at twice as many).
    entries_after_sweep: usize,
    entries: usize,
}

fn fingerprint(plan: &PlanGraph) -> u64 {
    let mut hasher = foldhash::fast::FixedState::default().build_hasher();
    plan.planner_runtime.hash(&mut hasher);
    plan.nodes.len().hash(&mut hasher);
    for node in &plan.nodes {
        node.node_id.hash(&mut hasher);
        node.capability_id.hash(&mut hasher);
        node.output_facets.hash(&mut hasher);
    }
    for edge in &plan.edges {
        edge.from.hash(&mut hasher);
        edge.to.hash(&mut hasher);
        edge.facet.hash(&mut hasher);
    }
    hasher.finish()
}

impl SharedPlans {
    /// An equal plan already held by another run, or `plan` itself (then
    /// held for the next).
    pub(crate) fn share(&self, plan: &Arc<PlanGraph>) -> Arc<PlanGraph> {
        let key = fingerprint(plan);
        let mut held = self
            .held
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let bucket = held.by_fingerprint.entry(key).or_default();
        for weak in bucket.iter() {
            if let Some(existing) = weak.upgrade()
                && (Arc::ptr_eq(&existing, plan) || *existing == **plan)
            {
                return existing;
            }
        }
        bucket.push(Arc::downgrade(plan));
        held.entries += 1;
        if held.entries > 2 * held.entries_after_sweep.max(512) {
            held.by_fingerprint.retain(|_, bucket| {
                bucket.retain(|weak| weak.strong_count() > 0);
                !bucket.is_empty()
            });
            held.entries = held.by_fingerprint.values().map(Vec::len).sum();
            held.entries_after_sweep = held.entries;
        }
        plan.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plan without nodes: equal fingerprints, told apart (or not) by
    /// its goal facets.
    fn plan(goal: &str) -> Arc<PlanGraph> {
        Arc::new(PlanGraph {
            plan_version: 1,
            planner_runtime: "deterministic".into(),
            planner_model: None,
            nodes: Vec::new(),
            edges: Vec::new(),
            supplied_facets: Vec::new(),
            goal_facets: vec![goal.to_string()],
            metadata: serde_json::Map::new(),
        })
    }

    #[test]
    fn equal_plans_are_one_and_a_different_one_of_the_same_shape_stays_apart() {
        let shared = SharedPlans::default();
        let first = plan("summary");
        let second = plan("summary");
        assert!(!Arc::ptr_eq(&first, &second));
        assert!(Arc::ptr_eq(&shared.share(&first), &first));
        assert!(Arc::ptr_eq(&shared.share(&second), &first));
        let other = plan("headline");
        assert!(Arc::ptr_eq(&shared.share(&other), &other));
    }

    #[test]
    fn a_plan_no_run_holds_is_freed() {
        let shared = SharedPlans::default();
        let first = plan("summary");
        shared.share(&first);
        let weak = Arc::downgrade(&first);
        drop(first);
        assert_eq!(weak.strong_count(), 0, "the map holds it weakly");
        let again = plan("summary");
        assert!(Arc::ptr_eq(&shared.share(&again), &again));
    }
}
