//! The deterministic planner:
//! the caller's output contract names the goal facets, the envelope's inputs
//! supply facets, and capabilities are chained backward over facet coverage.
//! Candidates are scored (see [`crate::planning::selection`]): `policies.planner.selection`
//! first (forbid removes; require, then prefer, rank first; avoid ranks
//! last), then AI before human before a terminal fallback (`kind:
//! "fallback"`, chosen only when nothing else can make a facet), an
//! escalation's health order ([`CandidateOrders::health`]: recent
//! success, latency and price), fewer missing inputs (facet alignment), the
//! fit of declared languages and formats to the envelope's hints (a
//! language mismatch is a cutoff), cost, relevance to the objective (see
//! [`crate::planning::relevance`]: among capabilities of one cost, the one
//! whose text fits the objective best) and id. The plan's `metadata.selection` records
//! the hints and each chosen capability's fit; `metadata.relevance` the
//! query and each chosen capability's place, when relevance was consulted.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::catalog::registry::Registry;
use crate::contracts::capability::CapabilityRegistration;
use crate::contracts::compiler::{ContractDirection, compile_contract};
use crate::contracts::diagnostics::{DiagnosticCause, PlanDiagnostic};
use crate::contracts::envelope::TaskEnvelope;
use crate::contracts::facet::FacetMerge;
use crate::planning::plan::{PlanEdge, PlanGraph, PlanNode};
use crate::planning::relevance::{Relevance, relevance_query};
use crate::planning::selection::{SelectionHints, trait_fit};

/// Name recorded in `PlanGraph.plannerRuntime` for this planner.
pub const DETERMINISTIC_PLANNER_RUNTIME: &str = "deterministic";

use super::planning_context::{Draft, PlanningContext};
pub use super::planning_context::{goal_facets, selection_matches, supplied_facets};

/// Plans `envelope` over `registry`. Returns the plan, or the diagnostics
/// explaining why no plan covers the contract.
pub fn plan_deterministically(
    envelope: &TaskEnvelope,
    registry: &Registry,
) -> Result<PlanGraph, Vec<PlanDiagnostic>> {
    plan_deterministically_ordered(envelope, registry, CandidateOrders::default())
}

/// Orders the shell knows that rank the candidates the caller's selection
/// policy leaves level.
#[derive(Debug, Clone, Copy, Default)]
pub struct CandidateOrders<'a> {
    /// Capability ids, best first: an escalation's ranking by recent
    /// health and price (empty when planning afresh).
    pub health: &'a [String],
    /// Capability ids, best first: the registry ranked for the objective
    /// by words fused with embeddings. `None`: ranked by words here.
    pub relevance: Option<&'a [String]>,
}

/// [`plan_deterministically`], with `orders` the shell made.
pub fn plan_deterministically_ordered(
    envelope: &TaskEnvelope,
    registry: &Registry,
    orders: CandidateOrders<'_>,
) -> Result<PlanGraph, Vec<PlanDiagnostic>> {
    let context = PlanningContext {
        envelope,
        registry,
        supplied: supplied_facets(envelope, registry),
        hints: SelectionHints::from_envelope(envelope),
        health_order: orders.health,
        relevance: Relevance::new(registry, relevance_query(envelope), orders.relevance),
    };
    let mut diagnostics = Vec::new();
    // With at least one facet to produce, other properties are the
    // normalization node's job; with none, nothing can produce them.
    if goal_facets(envelope, registry).is_empty() {
        for property in envelope.output_contract.top_level_properties() {
            if envelope.output_contract.is_required_property(&property) {
                diagnostics.push(
                    PlanDiagnostic::hard(
                        format!("output.{property}"),
                        DiagnosticCause::MissingProducer,
                        format!("output property `{property}` is produced"),
                    )
                    .with_suggestion(format!(
                        "No facet named `{property}` exists in the registry and no other output property is a facet to derive it from; register a facet and a capability that produces it, or rename the contract property to a known facet."
                    )),
                );
            }
        }
        if diagnostics.is_empty() {
            diagnostics.push(
            PlanDiagnostic::hard(
                "output.properties",
                DiagnosticCause::SchemaIncompatible,
                "the output contract names at least one facet",
            )
            .with_suggestion(
                "Give outputContract.schema top-level `properties` named after registry facets.",
            ),
        );
        }
    }
    let goals = goal_facets(envelope, registry);
    let mut draft = Draft::default();
    for goal in &goals {
        let mut stack = Vec::new();
        if !context.resolve_facet(goal, &mut draft, &mut stack) {
            let producers: Vec<String> = registry
                .producers_of(goal)
                .iter()
                .map(|c| c.capability_id.clone())
                .collect();
            let suggestion = if producers.is_empty() {
                format!("Register a capability whose outputContract includes `{goal}`.")
            } else {
                format!(
                    "Capabilities producing `{goal}` ({}) need inputs nobody supplies or produces; supply them in `inputs` or register their producers.",
                    producers.join(", ")
                )
            };
            diagnostics.push(
                PlanDiagnostic::hard(
                    format!("output.{goal}"),
                    DiagnosticCause::MissingProducer,
                    format!("facet `{goal}` is produced or supplied"),
                )
                .with_suggestion(suggestion),
            );
        }
    }
    super::capability_needs::add_required_capabilities(&context, &mut draft, &mut diagnostics);
    super::capability_needs::add_capabilities_the_constraints_need(&context, &mut draft);
    if !diagnostics.is_empty() {
        return Err(diagnostics);
    }
    let mut plan = build_plan(&context, &draft, &goals).map_err(|error| {
        vec![
            PlanDiagnostic::hard(
                "structure.contracts",
                DiagnosticCause::SchemaIncompatible,
                "node contracts compile",
            )
            .with_suggestion(error.to_string()),
        ]
    })?;
    record_selection(&mut plan, &context);
    record_relevance(&mut plan, &context);
    let facet_schema = |name: &str| registry.facets.get(name).map(|facet| facet.schema.clone());
    let expanded = crate::planning::variants::expand_variants(plan, envelope, &facet_schema);
    crate::planning::normalization::inject_normalization(expanded, envelope, registry).map_err(
        |error| {
            vec![PlanDiagnostic::structural(
                "structure.contracts",
                "node contracts compile",
                error.to_string(),
            )]
        },
    )
}

/// Turns an ordered list of capability ids into nodes and facet edges.
fn build_plan(
    context: &PlanningContext<'_>,
    draft: &Draft,
    goals: &[String],
) -> Result<PlanGraph, crate::basics::error::CoreError> {
    let numbered: Vec<(String, String)> = draft
        .chosen_capability_ids
        .iter()
        .enumerate()
        .map(|(index, capability_id)| (format!("node_{}", index + 1), capability_id.clone()))
        .collect();
    build_plan_with_ids(context, &numbered, goals, &draft.derived_inputs)
}

/// Assembles a plan from `(node id, capability id)` pairs in execution order
/// (as an LLM planner drafts them): facets flow from the nearest earlier
/// producer, or from the envelope; contracts are compiled; variants expanded.
pub fn assemble_plan(
    envelope: &TaskEnvelope,
    registry: &Registry,
    ordered_nodes: &[(String, String)],
    planner_runtime: &str,
    planner_model: Option<String>,
) -> Result<PlanGraph, crate::basics::error::CoreError> {
    let context = PlanningContext {
        envelope,
        registry,
        supplied: supplied_facets(envelope, registry),
        hints: SelectionHints::from_envelope(envelope),
        health_order: &[],
        relevance: Relevance::new(registry, relevance_query(envelope), None),
    };
    let goals = goal_facets(envelope, registry);
    let mut plan = build_plan_with_ids(&context, ordered_nodes, &goals, &BTreeMap::new())?;
    plan.planner_runtime = planner_runtime.to_string();
    plan.planner_model = planner_model;
    record_selection(&mut plan, &context);
    let facet_schema = |name: &str| registry.facets.get(name).map(|facet| facet.schema.clone());
    let expanded = crate::planning::variants::expand_variants(plan, envelope, &facet_schema);
    crate::planning::normalization::inject_normalization(expanded, envelope, registry)
}

/// `metadata.selection`: the envelope's hints and each planned capability's
/// fit to them (only when the envelope gives hints).
fn record_selection(plan: &mut PlanGraph, context: &PlanningContext<'_>) {
    if context.hints.is_empty() {
        return;
    }
    let fits: serde_json::Map<String, Value> = plan
        .nodes
        .iter()
        .filter_map(|node| context.registry.capability(&node.capability_id))
        .map(|capability| {
            (
                capability.capability_id.clone(),
                serde_json::to_value(trait_fit(capability, &context.hints)).unwrap_or_default(),
            )
        })
        .collect();
    plan.metadata.insert(
        "selection".into(),
        serde_json::json!({"hints": context.hints, "fits": fits}),
    );
}

/// `metadata.relevance`, when relevance ordered some candidates: the
/// query, how it was ranked, and each planned capability's place in the
/// order (`null`: the query did not find it).
fn record_relevance(plan: &mut PlanGraph, context: &PlanningContext<'_>) {
    if !context.relevance.was_consulted() {
        return;
    }
    let ranks: serde_json::Map<String, Value> = plan
        .nodes
        .iter()
        .map(|node| {
            let rank = context.relevance.rank_of(&node.capability_id);
            let shown = if rank == usize::MAX {
                Value::Null
            } else {
                Value::from(rank)
            };
            (node.capability_id.clone(), shown)
        })
        .collect();
    plan.metadata.insert(
        "relevance".into(),
        serde_json::json!({
            "query": context.relevance.query(),
            "rankedBy": context.relevance.ranked_by(),
            "ranks": ranks,
        }),
    );
}

/// `nodes` and every node they depend on through `edges`.
fn upstream_closure_of(edges: &[PlanEdge], nodes: BTreeSet<String>) -> BTreeSet<String> {
    let mut closure = BTreeSet::new();
    let mut pending: Vec<String> = nodes.into_iter().collect();
    while let Some(next) = pending.pop() {
        if closure.insert(next.clone()) {
            pending.extend(
                edges
                    .iter()
                    .filter(|edge| edge.to == next)
                    .map(|edge| edge.from.clone()),
            );
        }
    }
    closure
}

fn build_plan_with_ids(
    context: &PlanningContext<'_>,
    ordered_nodes: &[(String, String)],
    goals: &[String],
    derived_inputs: &BTreeMap<String, Vec<String>>,
) -> Result<PlanGraph, crate::basics::error::CoreError> {
    let registry = context.registry;
    let contract = &context.envelope.output_contract;
    let mut nodes: Vec<PlanNode> = Vec::with_capacity(ordered_nodes.len());
    let mut edges = Vec::new();
    for (node_id, capability_id) in ordered_nodes {
        let Some(capability) = registry.capability(capability_id) else {
            continue;
        };
        let node_id = node_id.clone();
        let derived = derived_inputs.get(capability_id);
        let considered_inputs = derived.unwrap_or(&capability.input_contract);
        let mut input_facets = Vec::new();
        let appends = |facet: &str| {
            registry
                .facets
                .get(facet)
                .is_some_and(|definition| definition.merge == FacetMerge::Append)
        };
        let latest_producer = |facet: &str, among: Option<&BTreeSet<String>>| {
            nodes.iter().rev().find(|node| {
                node.output_facets.iter().any(|name| name == facet)
                    && among.is_none_or(|among| among.contains(&node.node_id))
            })
        };
        // A list every producer adds to does not order its producers: it
        // comes from the latest producer the node already depends on for
        // its other inputs, so two branches adding to it stay parallel.
        let mut depends_on = BTreeSet::new();
        for facet in considered_inputs.iter().filter(|facet| !appends(facet)) {
            if let Some(producer) = latest_producer(facet, None) {
                depends_on.insert(producer.node_id.clone());
            }
        }
        let depends_on = upstream_closure_of(&edges, depends_on);
        for facet in considered_inputs {
            let upstream_producer = if appends(facet) {
                latest_producer(facet, Some(&depends_on)).or_else(|| latest_producer(facet, None))
            } else {
                latest_producer(facet, None)
            };
            if let Some(producer) = upstream_producer {
                edges.push(PlanEdge {
                    from: producer.node_id.clone(),
                    to: node_id.clone(),
                    facet: facet.clone(),
                });
                input_facets.push(facet.clone());
            } else if context.supplied.contains(facet) {
                input_facets.push(facet.clone());
            }
        }
        let output_facets = capability.output_contract.clone();
        let tighten = |facet: &str| -> Option<Value> {
            goals
                .iter()
                .any(|goal| goal == facet)
                .then(|| contract.property_schema(facet).cloned())
                .flatten()
        };
        let input_contract = compile_contract(
            &registry.facets,
            &input_facets,
            ContractDirection::Input,
            &|_| None,
        )?;
        let output_contract = compile_contract(
            &registry.facets,
            &output_facets,
            ContractDirection::Output,
            &tighten,
        )?;
        nodes.push(PlanNode {
            node_id,
            capability_id: capability.capability_id.clone(),
            label: capability.display_name.clone(),
            kind: capability.kind,
            executor: crate::planning::plan::NodeExecutor::for_capability(capability),
            derived: derived.is_some(),
            instructions: compose_instructions(registry, capability, &input_facets, &output_facets)
                .into(),
            input_facets,
            output_facets,
            input_contract,
            output_contract,
            variant: None,
            allows_clarify: capability.allows_clarify,
            guard: capability.guard.clone().map(std::sync::Arc::new),
            quality_score: capability.quality_score.clone(),
            remember: capability.remember.clone(),
            task_surface: crate::planning::plan::TaskSurface::of(capability, &registry.facets),
            model: crate::planning::model_choice::model_for(
                capability,
                context.envelope,
                registry.models(),
            ),
        });
    }
    let left_out = super::partial_outputs::narrow_to_needed_outputs(
        &mut nodes,
        &edges,
        goals,
        context.envelope,
        registry,
        &|capability, inputs, outputs| compose_instructions(registry, capability, inputs, outputs),
    )?;
    let mut metadata = serde_json::Map::new();
    if !left_out.is_empty() {
        metadata.insert("outputsLeftOut".into(), serde_json::json!(left_out));
    }
    Ok(PlanGraph {
        plan_version: 1,
        planner_runtime: DETERMINISTIC_PLANNER_RUNTIME.to_string(),
        planner_model: None,
        nodes,
        edges,
        supplied_facets: context.supplied.iter().cloned().collect(),
        goal_facets: goals.to_vec(),
        metadata,
    })
}

/// The merged system instruction: the capability's own prompt plus the
/// semantics of the facets it reads and writes (§5.7 step 4).
pub fn compose_instructions(
    registry: &Registry,
    capability: &CapabilityRegistration,
    input_facets: &[String],
    output_facets: &[String],
) -> String {
    let mut text = capability
        .instructions
        .clone()
        .unwrap_or_else(|| capability.summary.clone());
    let describe = |names: &[String]| -> String {
        names
            .iter()
            .filter_map(|name| registry.facets.get(name))
            .map(|facet| {
                let semantics = if facet.semantics.is_empty() {
                    String::new()
                } else {
                    format!(" {}", facet.semantics)
                };
                format!(
                    "- `{}` ({}): {}{}",
                    facet.name, facet.title, facet.description, semantics
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    if !input_facets.is_empty() {
        text.push_str("\n\nYou receive these facets in `inputs`:\n");
        text.push_str(&describe(input_facets));
    }
    text.push_str("\n\nAnswer with one JSON object holding exactly these facets as properties:\n");
    text.push_str(&describe(output_facets));
    text
}
