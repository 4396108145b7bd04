//! The plan validator: structure (DAG, node
//! completeness, facet directionality, schema compilability), facet
//! coverage, planner policies and the symbolic satisfiability of the
//! contract's constraints. Its diagnostics go through the merger.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::basics::schema::ValidatorCache;
use crate::catalog::registry::Registry;
use crate::contracts::contract::ConstraintLevel;
use crate::contracts::diagnostics::{
    ConstraintOutcome, DiagnosticCause, DiagnosticStatus, DiagnosticsBundle, PlanDiagnostic,
    merge_diagnostics,
};
use crate::contracts::envelope::TaskEnvelope;
use crate::planning::plan::PlanGraph;
use crate::planning::planner::selection_matches;

/// Validates `plan` for `envelope` against `registry` and merges the findings.
pub fn validate_plan(
    plan: &PlanGraph,
    envelope: &TaskEnvelope,
    registry: &Registry,
    validators: &ValidatorCache,
) -> DiagnosticsBundle {
    let mut diagnostics = Vec::new();
    check_structure(plan, registry, validators, &mut diagnostics);
    check_guards(plan, &mut diagnostics);
    check_coverage(plan, envelope, registry, &mut diagnostics);
    check_planner_policies(plan, envelope, registry, &mut diagnostics);
    check_quality_reviewer(plan, envelope, &mut diagnostics);
    let outcomes = check_constraints(plan, envelope, &mut diagnostics);
    merge_diagnostics(diagnostics, &outcomes)
}

/// A quality threshold with no reviewer in the plan cannot be checked: an
/// advisory says so (the planner adds one when the registry can).
fn check_quality_reviewer(
    plan: &PlanGraph,
    envelope: &TaskEnvelope,
    diagnostics: &mut Vec<PlanDiagnostic>,
) {
    let Some(threshold) = envelope.constraints.quality_threshold else {
        return;
    };
    if plan.nodes.iter().any(|node| node.quality_score.is_some()) {
        return;
    }
    diagnostics.push(
        PlanDiagnostic::advisory(
            "constraints.qualityThreshold",
            format!("a reviewer checks drafts against qualityThreshold {threshold}"),
        )
        .with_suggestion(
            "No capability with a qualityScore can review this plan's drafts: the threshold is not checked. Register a reviewer whose inputs the plan produces.",
        ),
    );
}

/// A node's guard compiles and reads only the facets the node consumes
/// (a drafted plan's guard is checked like a registered one).
fn check_guards(plan: &PlanGraph, diagnostics: &mut Vec<PlanDiagnostic>) {
    for (index, node) in plan.nodes.iter().enumerate() {
        let Some(guard) = &node.guard else {
            continue;
        };
        if let Err(problem) =
            crate::basics::logic::check_expression_reads_only(guard, &node.input_facets)
        {
            diagnostics.push(
                PlanDiagnostic::structural(
                    "structure.guards",
                    "a node's guard is JSONLogic over the facets it consumes",
                    format!(
                        "$.nodes[{index}].guard{}: {}",
                        problem.inner_path, problem.message
                    ),
                )
                .with_node(&node.node_id),
            );
        }
    }
}

/// Wraps planner failures (no plan at all) into a rejected bundle.
pub fn rejected_bundle(diagnostics: Vec<PlanDiagnostic>) -> DiagnosticsBundle {
    merge_diagnostics(diagnostics, &[])
}

fn check_structure(
    plan: &PlanGraph,
    registry: &Registry,
    validators: &ValidatorCache,
    diagnostics: &mut Vec<PlanDiagnostic>,
) {
    let mut seen_ids = BTreeSet::new();
    for node in &plan.nodes {
        if !seen_ids.insert(node.node_id.as_str()) {
            diagnostics.push(
                PlanDiagnostic::structural(
                    "structure.unique_node_ids",
                    "node ids are unique",
                    format!("Rename the second `{}`.", node.node_id),
                )
                .with_node(&node.node_id),
            );
        }
        if node.builtin().is_some() {
            if node.agent_type() != crate::contracts::capability::AgentType::Builtin
                || node.capability_id != crate::planning::plan::BUILTIN_JOIN_CAPABILITY
            {
                diagnostics.push(
                    PlanDiagnostic::structural(
                        "structure.builtin_nodes",
                        "orchestrator-managed nodes are marked builtin",
                        "Mark the node's agentType `builtin`.".into(),
                    )
                    .with_node(&node.node_id),
                );
            }
            continue;
        }
        if crate::planning::normalization::is_normalization_node(node) {
            // Orchestrator-managed: no registry entry; its output contract is the caller's schema.
            check_contracts_compile(node, validators, diagnostics);
            continue;
        }
        let Some(capability) = registry.capability(&node.capability_id) else {
            diagnostics.push(
                PlanDiagnostic::hard(
                    "structure.capability_exists",
                    DiagnosticCause::MissingProducer,
                    "every node names a registered capability",
                )
                .with_node(&node.node_id)
                .with_capability(&node.capability_id)
                .with_suggestion(format!(
                    "`{}` is not registered; pick a registered capability.",
                    node.capability_id
                )),
            );
            continue;
        };
        if node.output_facets.is_empty() {
            diagnostics.push(
                PlanDiagnostic::structural(
                    "structure.node_complete",
                    "every node produces at least one facet",
                    "Select output facets for the node.".into(),
                )
                .with_node(&node.node_id),
            );
        }
        for facet_name in &node.input_facets {
            match registry.facets.get(facet_name) {
                None => diagnostics.push(
                    PlanDiagnostic::structural("structure.known_facets", "node facets exist in the catalog", format!("Unknown facet `{facet_name}`."))
                        .with_node(&node.node_id),
                ),
                Some(facet) if !facet.direction.allows_input() => diagnostics.push(
                    PlanDiagnostic::structural("structure.facet_direction", "input facets allow input", format!("`{facet_name}` is output-only."))
                        .with_node(&node.node_id),
                ),
                Some(_) if !node.derived && !capability.catch_all && !capability.input_contract.contains(facet_name) => diagnostics.push(
                    PlanDiagnostic::structural(
                        "structure.declared_facets",
                        "a declared capability only consumes facets it declares",
                        format!("`{}` does not declare input `{facet_name}`; mark the node derived or drop the facet.", capability.capability_id),
                    )
                    .with_node(&node.node_id),
                ),
                Some(_) => {}
            }
        }
        for facet_name in &node.output_facets {
            match registry.facets.get(facet_name) {
                None => diagnostics.push(
                    PlanDiagnostic::structural(
                        "structure.known_facets",
                        "node facets exist in the catalog",
                        format!("Unknown facet `{facet_name}`."),
                    )
                    .with_node(&node.node_id),
                ),
                Some(facet) if !facet.direction.allows_output() => diagnostics.push(
                    PlanDiagnostic::structural(
                        "structure.facet_direction",
                        "output facets allow output",
                        format!("`{facet_name}` is input-only."),
                    )
                    .with_node(&node.node_id),
                ),
                Some(_)
                    if !node.derived
                        && !capability.catch_all
                        && !capability.output_contract.contains(facet_name) =>
                {
                    diagnostics.push(
                        PlanDiagnostic::structural(
                            "structure.declared_facets",
                            "a declared capability only produces facets it declares",
                            format!(
                                "`{}` does not declare output `{facet_name}`.",
                                capability.capability_id
                            ),
                        )
                        .with_node(&node.node_id),
                    )
                }
                Some(_) => {}
            }
        }
        check_contracts_compile(node, validators, diagnostics);
    }
    for edge in &plan.edges {
        if !seen_ids.contains(edge.from.as_str()) || !seen_ids.contains(edge.to.as_str()) {
            diagnostics.push(PlanDiagnostic::structural(
                "structure.edges_reference_nodes",
                "edges connect existing nodes",
                format!("Edge {} -> {} names an unknown node.", edge.from, edge.to),
            ));
        }
    }
    if plan.topological_order().is_none() {
        diagnostics.push(PlanDiagnostic::structural(
            "structure.acyclic",
            "the plan is a directed acyclic graph",
            "Remove the cycle: a facet must be produced before it is consumed.".into(),
        ));
    }
}

fn check_contracts_compile(
    node: &crate::planning::plan::PlanNode,
    validators: &ValidatorCache,
    diagnostics: &mut Vec<PlanDiagnostic>,
) {
    for (which, contract) in [
        ("input", &node.input_contract),
        ("output", &node.output_contract),
    ] {
        if let Err(error) =
            validators.validator_for_key(&contract.schema_key, &contract.schema, which)
        {
            diagnostics.push(
                PlanDiagnostic::structural(
                    "structure.schema_compiles",
                    "node contracts compile",
                    error.to_string(),
                )
                .with_node(&node.node_id),
            );
        }
    }
}

fn check_coverage(
    plan: &PlanGraph,
    envelope: &TaskEnvelope,
    registry: &Registry,
    diagnostics: &mut Vec<PlanDiagnostic>,
) {
    let supplied: BTreeSet<&str> = envelope.inputs.keys().map(String::as_str).collect();
    for node in &plan.nodes {
        for facet_name in &node.input_facets {
            let produced_upstream = plan
                .producer_for(&node.node_id, facet_name)
                .and_then(|producer| plan.node(producer))
                .is_some_and(|producer| producer.output_facets.contains(facet_name));
            if !produced_upstream && !supplied.contains(facet_name.as_str()) {
                diagnostics.push(
                    PlanDiagnostic::hard(format!("input.{facet_name}"), DiagnosticCause::MissingProducer, format!("facet `{facet_name}` reaches node {}", node.node_id))
                        .with_node(&node.node_id)
                        .with_capability(&node.capability_id)
                        .with_suggestion(format!("Add an upstream node producing `{facet_name}` (with an edge to {}) or supply it in `inputs`.", node.node_id)),
                );
            }
        }
        if let Some(capability) = registry.capability(&node.capability_id) {
            for facet_name in &capability.input_contract {
                let required = registry
                    .facets
                    .get(facet_name)
                    .is_some_and(|facet| facet.required_by_default);
                if required && !node.input_facets.contains(facet_name) && node.derived {
                    // A derived node runs on the facets its agent supports that
                    // are at hand (§5.6); say what it goes without.
                    let advisory = PlanDiagnostic::advisory(
                        format!("derived.{}.{facet_name}", node.node_id),
                        format!(
                            "derived node {} runs without declared input `{facet_name}`",
                            node.node_id
                        ),
                    )
                    .with_node(&node.node_id)
                    .with_capability(&node.capability_id)
                    .with_suggestion(format!(
                        "Supply `{facet_name}` or register a producer of it to run `{}` as declared.",
                        node.capability_id
                    ));
                    diagnostics.push(advisory);
                } else if required && !node.input_facets.contains(facet_name) {
                    diagnostics.push(
                        PlanDiagnostic::hard(
                            format!("input.{facet_name}"),
                            DiagnosticCause::MissingProducer,
                            format!(
                                "required facet `{facet_name}` reaches node {}",
                                node.node_id
                            ),
                        )
                        .with_node(&node.node_id)
                        .with_capability(&node.capability_id)
                        .with_suggestion(format!(
                            "`{}` requires `{facet_name}`; produce it upstream or supply it.",
                            node.capability_id
                        )),
                    );
                }
            }
        }
    }
    for property in envelope.output_contract.top_level_properties() {
        let covered =
            supplied.contains(property.as_str()) || plan.final_producer_of(&property).is_some();
        if !covered {
            let constraint_id = format!("output.{property}");
            let constraint = format!("output property `{property}` is produced");
            let diagnostic = if envelope.output_contract.is_required_property(&property) {
                PlanDiagnostic::hard(constraint_id, DiagnosticCause::MissingProducer, constraint)
            } else {
                PlanDiagnostic::advisory(constraint_id, constraint)
            };
            diagnostics.push(diagnostic.with_suggestion(format!(
                "Add a node whose outputContract includes `{property}`."
            )));
        }
    }
}

fn check_planner_policies(
    plan: &PlanGraph,
    envelope: &TaskEnvelope,
    registry: &Registry,
    diagnostics: &mut Vec<PlanDiagnostic>,
) {
    let Some(planner) = envelope.policies.planner.as_ref() else {
        return;
    };
    if let Some(budget) = envelope.policies.token_budget() {
        // Declared estimates only; capabilities without one count 0 here and
        // are held to the budget at run time.
        let estimated: u64 = plan
            .nodes
            .iter()
            .filter_map(|node| registry.capability(&node.capability_id))
            .filter_map(|capability| capability.cost.as_ref()?.estimated_tokens)
            .sum();
        if estimated > budget {
            diagnostics.push(
                PlanDiagnostic::hard(
                    "policy.optimisation.maxTokens",
                    DiagnosticCause::SchemaIncompatible,
                    format!("the plan's estimated {estimated} tokens fit maxTokens {budget}"),
                )
                .with_suggestion(
                    "Raise policies.planner.optimisation.maxTokens, or prefer cheaper capabilities (selection.prefer / avoid).",
                ),
            );
        }
    }
    if let Some(selection) = &planner.selection {
        for node in &plan.nodes {
            if selection
                .forbid
                .iter()
                .any(|entry| selection_matches(entry, &node.capability_id))
            {
                diagnostics.push(
                    PlanDiagnostic::hard(
                        "policy.selection.forbid",
                        DiagnosticCause::SchemaIncompatible,
                        format!("`{}` is forbidden", node.capability_id),
                    )
                    .with_node(&node.node_id)
                    .with_capability(&node.capability_id)
                    .with_suggestion("Replace the node with a capability that is not forbidden."),
                );
            }
        }
        for required in &selection.require {
            if !plan
                .nodes
                .iter()
                .any(|node| selection_matches(required, &node.capability_id))
            {
                diagnostics.push(
                    PlanDiagnostic::hard(
                        format!("policy.selection.require.{required}"),
                        DiagnosticCause::MissingEnforcer,
                        format!("`{required}` is in the plan"),
                    )
                    .with_capability(required)
                    .with_suggestion(format!("Insert a node using `{required}`.")),
                );
            }
        }
    }
    if let Some(topology) = &planner.topology {
        if let Some(max_depth) = topology.max_depth
            && plan.depth() > max_depth as usize
        {
            diagnostics.push(
                PlanDiagnostic::hard(
                    "policy.topology.maxDepth",
                    DiagnosticCause::SchemaIncompatible,
                    format!("plan depth <= {max_depth}"),
                )
                .with_suggestion(format!(
                    "The plan is {} nodes deep; shorten it.",
                    plan.depth()
                )),
            );
        }
        for kind in &topology.forbidden_kinds {
            for node in plan.nodes.iter().filter(|node| node.kind.as_str() == kind) {
                diagnostics.push(
                    PlanDiagnostic::hard(
                        "policy.topology.forbiddenKinds",
                        DiagnosticCause::SchemaIncompatible,
                        format!("no `{kind}` nodes"),
                    )
                    .with_node(&node.node_id)
                    .with_suggestion(format!("Remove the `{kind}` node.")),
                );
            }
        }
        for kind in &topology.required_kinds {
            if !plan.nodes.iter().any(|node| node.kind.as_str() == kind) {
                diagnostics.push(
                    PlanDiagnostic::hard(
                        format!("policy.topology.requiredKinds.{kind}"),
                        DiagnosticCause::MissingEnforcer,
                        format!("a `{kind}` node is in the plan"),
                    )
                    .with_suggestion(format!("Insert a `{kind}` node.")),
                );
            }
        }
        if let Some(variant_count) = topology.variant_count {
            for property in envelope.output_contract.top_level_properties() {
                let Some(schema) = envelope.output_contract.property_schema(&property) else {
                    continue;
                };
                let bound = |key: &str| schema.get(key).and_then(Value::as_u64);
                let too_many = bound("maxItems").is_some_and(|max| u64::from(variant_count) > max);
                let too_few = bound("minItems").is_some_and(|min| u64::from(variant_count) < min);
                if too_many || too_few {
                    diagnostics.push(
                        PlanDiagnostic::hard("policy.topology.variantCount", DiagnosticCause::SchemaIncompatible, format!("variantCount {variant_count} fits `{property}` item bounds"))
                            .with_suggestion(format!("variantCount {variant_count} contradicts the contract's minItems/maxItems on `{property}`; reconcile them.")),
                    );
                }
            }
        }
    }
}

/// Collects the root names of every `{"var": ...}` in a JSONLogic expression.
pub fn referenced_variable_roots(expression: &Value, roots: &mut BTreeSet<String>) {
    match expression {
        Value::Object(map) => {
            for (key, value) in map {
                if key == "var" {
                    let path = match value {
                        Value::String(path) => Some(path.as_str()),
                        Value::Array(items) => items.first().and_then(Value::as_str),
                        _ => None,
                    };
                    if let Some(root) = path
                        .and_then(|path| path.split('.').next())
                        .filter(|root| !root.is_empty())
                    {
                        roots.insert(root.to_string());
                    }
                } else {
                    referenced_variable_roots(value, roots);
                }
            }
        }
        Value::Array(items) => items
            .iter()
            .for_each(|item| referenced_variable_roots(item, roots)),
        _ => {}
    }
}

fn check_constraints(
    plan: &PlanGraph,
    envelope: &TaskEnvelope,
    diagnostics: &mut Vec<PlanDiagnostic>,
) -> Vec<ConstraintOutcome> {
    let mut available: BTreeSet<String> = envelope.inputs.keys().cloned().collect();
    for node in &plan.nodes {
        available.extend(node.output_facets.iter().cloned());
    }
    let mut outcomes = Vec::new();
    for (index, constraint) in envelope.output_contract.constraints.iter().enumerate() {
        let mut roots = BTreeSet::new();
        referenced_variable_roots(&constraint.expr, &mut roots);
        let missing: Vec<&String> = roots
            .iter()
            .filter(|root| !available.contains(*root))
            .collect();
        let satisfiable = missing.is_empty();
        outcomes.push(ConstraintOutcome {
            level: constraint.level,
            satisfiable,
        });
        if satisfiable {
            continue;
        }
        let constraint_id = constraint
            .constraint_id
            .clone()
            .unwrap_or_else(|| format!("constraints[{index}]"));
        let missing_list = missing
            .iter()
            .map(|name| format!("`{name}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let (status, cause) = match constraint.level {
            ConstraintLevel::Hard => (
                DiagnosticStatus::Unsatisfied,
                DiagnosticCause::MissingProducer,
            ),
            ConstraintLevel::Soft => (
                DiagnosticStatus::Unsatisfied,
                DiagnosticCause::UnsatisfiedSoft,
            ),
            ConstraintLevel::Informational => {
                (DiagnosticStatus::Unknown, DiagnosticCause::Advisory)
            }
        };
        diagnostics.push(PlanDiagnostic {
            severity: constraint.level,
            status,
            constraint: Some(constraint.expr.to_string()),
            constraint_id: Some(constraint_id),
            node_id: None,
            capability_id: None,
            cause,
            suggestion: Some(format!(
                "No node produces {missing_list}; add a producer so the constraint can be checked."
            )),
            // The caller's reason for the constraint travels with it.
            details: constraint.rationale.as_ref().map(|rationale| {
                let mut details = serde_json::Map::new();
                details.insert("rationale".into(), Value::String(rationale.clone()));
                details
            }),
        });
    }
    outcomes
}
