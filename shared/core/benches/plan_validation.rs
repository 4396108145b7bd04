//! Plan validation cost: a 50-node plan against a 40-capability registry
//! (structure, facets, coverage, policies, constraints, merge), with the
//! validator cache warm as it is in a long-lived process.
//!
//! `cargo bench -p baton-core --bench plan_validation`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench code

use baton_core::basics::schema::ValidatorCache;
use baton_core::catalog::registry::Registry;
use baton_core::contracts::capability::CapabilityRegistration;
use baton_core::contracts::compiler::{ContractDirection, compile_contract};
use baton_core::contracts::envelope::TaskEnvelope;
use baton_core::contracts::facet::{Facet, FacetDirection};
use baton_core::planning::plan::{PlanEdge, PlanGraph, PlanNode};
use baton_core::planning::validator::validate_plan;
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Map, json};

const CAPABILITIES: usize = 40;
const NODES: usize = 50;

fn facet_name(index: usize) -> String {
    format!("stage_{index}")
}

fn registry() -> Registry {
    let mut registry = Registry::default();
    for index in 0..=CAPABILITIES {
        registry
            .add_facet(
                Facet {
                    name: facet_name(index),
                    title: format!("Stage {index}"),
                    description: "bench facet".into(),
                    schema: json!({"type": "object", "required": ["text", "score"], "properties": {
                        "text": {"type": "string"}, "score": {"type": "number", "minimum": 0, "maximum": 1},
                        "notes": {"type": "array", "items": {"type": "string"}}}}),
                    semantics: String::new(),
                    direction: FacetDirection::Bidirectional,
                    required_by_default: true,
                    drives_revisions: false,
                    merge: Default::default(),
                    widget: None,
                    metadata: Map::new(),
                },
                "bench",
            )
            .unwrap();
    }
    for index in 0..CAPABILITIES {
        let capability: CapabilityRegistration = serde_json::from_value(json!({
            "capabilityId": format!("bench.capability_{index}"), "agentType": "ai", "version": "1",
            "displayName": format!("Capability {index}"), "summary": "bench",
            "inputContract": [facet_name(index)], "outputContract": [facet_name(index + 1)]
        }))
        .unwrap();
        registry.add_capability(capability, "bench").unwrap();
    }
    registry
}

/// 50 nodes cycling through the 40 capabilities: node k runs capability k mod 40
/// and reads its input from the nearest earlier producer, or from the envelope.
fn plan(registry: &Registry) -> PlanGraph {
    let mut nodes: Vec<PlanNode> = Vec::new();
    let mut edges = Vec::new();
    for index in 0..NODES {
        let capability = registry
            .capability(&format!("bench.capability_{}", index % CAPABILITIES))
            .unwrap();
        let node_id = format!("node_{index}");
        let input = capability.input_contract[0].clone();
        if let Some(producer) = nodes
            .iter()
            .rev()
            .find(|node| node.output_facets.contains(&input))
        {
            edges.push(PlanEdge {
                from: producer.node_id.clone(),
                to: node_id.clone(),
                facet: input.clone(),
            });
        }
        nodes.push(PlanNode {
            node_id,
            capability_id: capability.capability_id.clone(),
            label: capability.display_name.clone(),
            kind: capability.kind,
            executor: baton_core::planning::plan::NodeExecutor::for_capability(capability),
            derived: false,
            input_facets: vec![input.clone()],
            output_facets: capability.output_contract.clone(),
            input_contract: compile_contract(
                &registry.facets,
                &[input],
                ContractDirection::Input,
                &|_| None,
            )
            .unwrap(),
            output_contract: compile_contract(
                &registry.facets,
                &capability.output_contract,
                ContractDirection::Output,
                &|_| None,
            )
            .unwrap(),
            instructions: "".into(),
            variant: None,
            allows_clarify: false,
            guard: None,
            task_surface: None,
            quality_score: None,
            remember: Vec::new(),
            model: None,
        });
    }
    PlanGraph {
        plan_version: 1,
        planner_runtime: "bench".into(),
        planner_model: None,
        nodes,
        edges,
        supplied_facets: vec![facet_name(0)],
        goal_facets: vec![facet_name(CAPABILITIES)],
        metadata: Map::new(),
    }
}

fn bench_validation(criterion: &mut Criterion) {
    let registry = registry();
    let plan = plan(&registry);
    let envelope = TaskEnvelope::parse_value(&json!({
        "objective": "bench",
        "inputs": {"stage_0": {"text": "t", "score": 0.5}},
        "outputContract": {
            "schema": {"type": "object", "required": [facet_name(CAPABILITIES)], "properties": {facet_name(CAPABILITIES): {"type": "object"}}},
            "constraints": [
                {"constraintId": "scored", "level": "hard", "expr": {">=": [{"var": "stage_40.score"}, 0.5]}},
                {"constraintId": "noted", "level": "soft", "expr": {"!!": [{"var": "stage_12.notes"}]}}
            ]
        },
        "policies": {"planner": {"topology": {"maxDepth": 60}, "selection": {"forbid": ["legacy"], "require": ["bench.capability_3"]}}}
    }))
    .unwrap();
    let validators = ValidatorCache::new();
    let first = validate_plan(&plan, &envelope, &registry, &validators);
    assert_eq!(
        first.status,
        baton_core::contracts::diagnostics::PlanStatus::Accepted,
        "{first:?}"
    );
    criterion.bench_function("validate_50_node_plan_40_capabilities", |bencher| {
        bencher.iter(|| validate_plan(&plan, &envelope, &registry, &validators))
    });
}

criterion_group!(benches, bench_validation);
criterion_main!(benches);
