//! Planner and validator over the repository's registry: goal facets, policy
//! enforcement, constraint satisfiability and the diagnostics they produce.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::{Path, PathBuf};

use baton_core::basics::schema::ValidatorCache;
use baton_core::catalog::registry::{Registry, RegistryDocument};
use baton_core::contracts::diagnostics::{DiagnosticCause, DiagnosticsBundle, PlanStatus};
use baton_core::contracts::envelope::TaskEnvelope;
use baton_core::planning::planner::{
    CandidateOrders, plan_deterministically, plan_deterministically_ordered,
};
use baton_core::planning::validator::{rejected_bundle, validate_plan};
use serde_json::{Value, json};

fn repository(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(relative)
}

fn documents(directory: &str) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(repository(directory))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    paths.sort();
    paths
}

fn registry() -> Registry {
    let facets: Vec<RegistryDocument> = documents("registry/facets")
        .into_iter()
        .map(|path| RegistryDocument {
            source_name: path.display().to_string(),
            text: std::fs::read_to_string(&path).unwrap(),
        })
        .collect();
    let capabilities: Vec<(RegistryDocument, Option<String>)> = documents("registry/capabilities")
        .into_iter()
        .map(|path| {
            (
                RegistryDocument {
                    source_name: path.display().to_string(),
                    text: std::fs::read_to_string(&path).unwrap(),
                },
                None,
            )
        })
        .collect();
    Registry::from_documents(&facets, &capabilities).unwrap()
}

fn example(name: &str) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(repository(&format!("registry/examples/{name}"))).unwrap(),
    )
    .unwrap()
}

fn plan_and_validate(envelope: &Value) -> (Option<Vec<String>>, DiagnosticsBundle) {
    let registry = registry();
    let envelope = TaskEnvelope::parse_value(envelope).unwrap();
    match plan_deterministically(&envelope, &registry) {
        Ok(plan) => {
            let bundle = validate_plan(&plan, &envelope, &registry, &ValidatorCache::new());
            (
                Some(
                    plan.nodes
                        .iter()
                        .map(|node| node.capability_id.clone())
                        .collect(),
                ),
                bundle,
            )
        }
        Err(diagnostics) => (None, rejected_bundle(diagnostics)),
    }
}

#[test]
fn the_seed_sample_chains_strategy_into_the_writer() {
    let (capabilities, bundle) = plan_and_validate(&example("seed-10.1-sample-envelope.json"));
    assert_eq!(
        capabilities.unwrap(),
        vec![
            "StrategyManager.writerBrief",
            "ContentGenerator.copyVariants"
        ]
    );
    assert_eq!(bundle.status, PlanStatus::Accepted);
    assert_eq!(bundle.satisfaction_score, 1.0);
}

#[test]
fn positioning_chains_strategist_and_messaging_without_the_human_review() {
    let (capabilities, bundle) = plan_and_validate(&example("positioning-recommendation.json"));
    assert_eq!(
        capabilities.unwrap(),
        vec!["strategist.Positioning", "copywriter.Messaging"]
    );
    assert_eq!(bundle.status, PlanStatus::Accepted);
}

#[test]
fn forbidding_the_only_producer_rejects_with_missing_producer() {
    let mut envelope = example("seed-10.1-sample-envelope.json");
    envelope["policies"]["planner"] = json!({"selection": {"forbid": ["ContentGenerator"]}});
    let (capabilities, bundle) = plan_and_validate(&envelope);
    assert!(capabilities.is_none());
    assert_eq!(bundle.status, PlanStatus::Rejected);
    assert_eq!(bundle.failures[0].cause, DiagnosticCause::MissingProducer);
    assert_eq!(
        bundle.failures[0].constraint_id.as_deref(),
        Some("output.copyVariants")
    );
}

#[test]
fn a_required_reviewer_is_added_and_one_that_cannot_run_is_a_hard_failure() {
    let mut envelope = example("seed-10.1-sample-envelope.json");
    envelope["policies"]["planner"] =
        json!({"selection": {"require": ["QualityAssurance.contentReview"]}});
    let (capabilities, bundle) = plan_and_validate(&envelope);
    assert_eq!(bundle.status, PlanStatus::Accepted, "{bundle:?}");
    let capabilities = capabilities.unwrap();
    assert_eq!(
        capabilities.last().map(String::as_str),
        Some("QualityAssurance.contentReview"),
        "the review comes after what it reviews: {capabilities:?}"
    );
    envelope["policies"]["planner"] =
        json!({"selection": {"require": ["director.SocialPostingReview"]}});
    let (_, bundle) = plan_and_validate(&envelope);
    assert_eq!(bundle.status, PlanStatus::Rejected);
    assert_eq!(bundle.failures[0].cause, DiagnosticCause::MissingProducer);
    assert_eq!(
        bundle.failures[0].constraint_id.as_deref(),
        Some("policy.selection.require.director.SocialPostingReview")
    );
}

#[test]
fn max_depth_is_enforced() {
    let mut envelope = example("seed-10.1-sample-envelope.json");
    envelope["policies"]["planner"] = json!({"topology": {"maxDepth": 1}});
    let (_, bundle) = plan_and_validate(&envelope);
    assert_eq!(bundle.status, PlanStatus::Rejected);
    assert_eq!(
        bundle.failures[0].constraint_id.as_deref(),
        Some("policy.topology.maxDepth")
    );
}

#[test]
fn variant_count_contradicting_max_items_is_schema_incompatible() {
    let mut envelope = example("seed-10.0.1-stream-contract-variants.json");
    envelope["policies"] = json!({"planner": {"topology": {"variantCount": 3}}});
    let (_, bundle) = plan_and_validate(&envelope);
    assert_eq!(bundle.status, PlanStatus::Rejected);
    assert_eq!(
        bundle.failures[0].cause,
        DiagnosticCause::SchemaIncompatible
    );
}

#[test]
fn constraints_on_unproduced_facets_score_by_severity() {
    let mut envelope = example("seed-10.1-sample-envelope.json");
    envelope["outputContract"]["constraints"] = json!([
        {"constraintId": "min_qa", "level": "soft", "expr": {">=": [{"var": "qaFindings.overallScore"}, 0.8]},
         "rationale": "legal signs off only on reviewed copy"},
        {"constraintId": "has_variants", "level": "hard", "expr": {"!!": [{"var": "copyVariants"}]}},
        {"constraintId": "tone_note", "level": "informational", "expr": {"!!": [{"var": "toneOfVoice"}]}}
    ]);
    let (_, bundle) = plan_and_validate(&envelope);
    assert_eq!(bundle.status, PlanStatus::AcceptedWithFindings);
    assert_eq!(bundle.warnings.len(), 1);
    assert_eq!(bundle.warnings[0].cause, DiagnosticCause::UnsatisfiedSoft);
    assert_eq!(
        bundle.warnings[0].details.as_ref().unwrap()["rationale"],
        "legal signs off only on reviewed copy",
        "the caller's rationale travels with its finding"
    );
    assert!(
        (bundle.satisfaction_score - 1.0 / 1.5).abs() < 1e-9,
        "{}",
        bundle.satisfaction_score
    );
    envelope["outputContract"]["constraints"][0]["level"] = json!("hard");
    let (_, bundle) = plan_and_validate(&envelope);
    assert_eq!(bundle.status, PlanStatus::Rejected);
    assert_eq!(bundle.failures[0].constraint_id.as_deref(), Some("min_qa"));
}

#[test]
fn goal_facets_are_tightened_by_the_caller_schema() {
    let registry = registry();
    let envelope =
        TaskEnvelope::parse_value(&example("seed-10.0.1-stream-contract-variants.json")).unwrap();
    let plan = plan_deterministically(&envelope, &registry).unwrap();
    let writer = plan.final_producer_of("copyVariants").unwrap();
    let schema = &writer.output_contract.schema["properties"]["copyVariants"];
    assert_eq!(schema["allOf"][1]["maxItems"], 2, "{schema}");
    assert!(
        writer
            .output_contract
            .provenance
            .iter()
            .any(|p| p.facet == "copyVariants" && p.tightened_by_caller_contract)
    );
}

#[test]
fn every_facet_example_satisfies_its_own_schema() {
    let registry = registry();
    let mut checked = 0;
    for facet in registry.facets.list() {
        let validator =
            baton_core::basics::schema::compile_schema(&facet.schema, &facet.name).unwrap();
        for example in facet
            .schema
            .get("examples")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let violations = baton_core::basics::schema::collect_violations(&validator, example);
            assert!(
                violations.is_empty(),
                "facet {} example breaks its schema: {violations:?}",
                facet.name
            );
            checked += 1;
        }
    }
    assert!(checked >= 12, "examples were found and checked ({checked})");
}

#[test]
fn exactly_two_variants_become_two_parallel_branches_and_a_join() {
    let registry = registry();
    let envelope =
        TaskEnvelope::parse_value(&example("seed-10.0.1-stream-contract-variants.json")).unwrap();
    let plan = plan_deterministically(&envelope, &registry).unwrap();
    let ids: Vec<&str> = plan
        .nodes
        .iter()
        .map(|node| node.node_id.as_str())
        .collect();
    assert_eq!(ids, vec!["node_1", "node_2_v1", "node_2_v2", "node_2_join"]);
    for branch in ["node_2_v1", "node_2_v2"] {
        assert_eq!(
            plan.upstream_of(branch).into_iter().collect::<Vec<_>>(),
            vec!["node_1"],
            "branches run in parallel after the strategy"
        );
        let node = plan.node(branch).unwrap();
        assert_eq!(
            node.kind,
            baton_core::contracts::capability::NodeKind::Branch
        );
        let property = &node.output_contract.schema["properties"]["copyVariants"];
        assert_eq!(property["allOf"][2], json!({"minItems": 1, "maxItems": 1}));
        assert!(
            property["allOf"][1].get("maxItems").is_none(),
            "the caller's count applies to the join, not a branch"
        );
    }
    let join = plan.node("node_2_join").unwrap();
    assert_eq!(
        plan.upstream_of("node_2_join")
            .into_iter()
            .collect::<Vec<_>>(),
        vec!["node_2_v1", "node_2_v2"]
    );
    assert_eq!(
        join.output_contract.schema["properties"]["copyVariants"]["allOf"][1]["maxItems"],
        2
    );
    assert_eq!(
        plan.final_producer_of("copyVariants").unwrap().node_id,
        "node_2_join"
    );
    let bundle = validate_plan(&plan, &envelope, &registry, &ValidatorCache::new());
    assert_eq!(bundle.status, PlanStatus::Accepted, "{bundle:?}");
}

#[test]
fn topology_variant_count_expands_an_open_ended_array() {
    let registry = registry();
    let mut envelope = example("seed-10.1-sample-envelope.json");
    envelope["policies"]["planner"] = json!({"topology": {"variantCount": 3}});
    let envelope = TaskEnvelope::parse_value(&envelope).unwrap();
    let plan = plan_deterministically(&envelope, &registry).unwrap();
    assert_eq!(
        plan.nodes
            .iter()
            .filter(|node| node.variant.is_some())
            .count(),
        3
    );
    assert_eq!(plan.metadata["branchCount"], 3);
}

fn messaging_writer(capability_id: &str, languages: &[&str], formats: &[&str]) -> Value {
    json!({
        "capabilityId": capability_id,
        "agentType": "ai",
        "version": "1",
        "displayName": capability_id,
        "summary": "Writes a messaging stack.",
        "inputTraits": {"languages": languages, "formats": formats},
        "inputContract": ["company_information", "positioning_context", "positioning_recommendation", "feedback"],
        "outputContract": ["messaging_stack", "handoff_summary"]
    })
}

/// The repository registry plus scoped messaging writers, as agents would register them.
fn registry_with_scoped_writers() -> Registry {
    let scoped = [
        messaging_writer("copywriter.Messaging.fr", &["fr-FR"], &[]),
        messaging_writer(
            "copywriter.Messaging.newsletter",
            &[],
            &["newsletter_issue"],
        ),
        {
            let mut premium = messaging_writer("copywriter.Messaging.premium", &[], &[]);
            premium["cost"] = json!({"tier": "premium"});
            premium
        },
    ]
    .map(|value| serde_json::from_value(value).unwrap());
    let (registry, left_out) = registry().with_additional_capabilities(scoped.iter());
    assert!(left_out.is_empty(), "{left_out:?}");
    registry
}

fn messaging_capability_for(inputs: Value, policies: Value) -> Option<String> {
    let mut envelope = example("positioning-recommendation.json");
    for (key, value) in inputs.as_object().unwrap() {
        envelope["inputs"][key] = value.clone();
    }
    envelope["policies"] = policies;
    let envelope = TaskEnvelope::parse_value(&envelope).unwrap();
    let plan = plan_deterministically(&envelope, &registry_with_scoped_writers()).ok()?;
    plan.nodes
        .iter()
        .find(|node| {
            node.output_facets
                .iter()
                .any(|facet| facet == "messaging_stack")
        })
        .map(|node| node.capability_id.clone())
}

#[test]
fn capabilities_are_scored_on_language_and_format_hints() {
    // (inputs, policies, expected messaging writer)
    let table = [
        (json!({}), json!({}), "copywriter.Messaging"),
        (
            json!({"language": "fr-CA"}),
            json!({}),
            "copywriter.Messaging.fr",
        ),
        // A declared language that is not hinted is below the cutoff.
        (json!({"language": "de"}), json!({}), "copywriter.Messaging"),
        (
            json!({"channel": "Newsletter"}),
            json!({}),
            "copywriter.Messaging.newsletter",
        ),
        // Hints in non-canonical policy keys count too.
        (
            json!({}),
            json!({"locale": "fr"}),
            "copywriter.Messaging.fr",
        ),
        // Selection policy outranks hints.
        (
            json!({"language": "fr"}),
            json!({"planner": {"selection": {"prefer": ["copywriter.Messaging.newsletter"]}}}),
            "copywriter.Messaging.newsletter",
        ),
        (
            json!({"language": "fr"}),
            json!({"planner": {"selection": {"avoid": ["copywriter.Messaging.fr"]}}}),
            "copywriter.Messaging",
        ),
        (
            json!({}),
            json!({"planner": {"selection": {"require": ["copywriter.Messaging.newsletter"]}}}),
            "copywriter.Messaging.newsletter",
        ),
        // Cheaper first by default; `quality` prefers the higher tier.
        (
            json!({}),
            json!({"planner": {"optimisation": {"objective": "quality"}}}),
            "copywriter.Messaging.premium",
        ),
    ];
    for (inputs, policies, expected) in table {
        assert_eq!(
            messaging_capability_for(inputs.clone(), policies.clone()).as_deref(),
            Some(expected),
            "inputs {inputs}, policies {policies}"
        );
    }
}

#[test]
fn the_plan_records_the_hints_and_each_chosen_capabilitys_fit() {
    let mut envelope = example("positioning-recommendation.json");
    envelope["inputs"]["language"] = json!("fr");
    let envelope = TaskEnvelope::parse_value(&envelope).unwrap();
    let plan = plan_deterministically(&envelope, &registry_with_scoped_writers()).unwrap();
    let selection = &plan.metadata["selection"];
    assert_eq!(selection["hints"]["languages"], json!(["fr"]));
    assert_eq!(
        selection["fits"]["copywriter.Messaging.fr"],
        json!({"languages": "matches", "formats": "not_hinted"})
    );
    assert_eq!(
        selection["fits"]["strategist.Positioning"]["languages"],
        "undeclared"
    );
}

#[test]
fn each_planner_policy_is_enforced_by_the_validator() {
    // (policies.planner, expected status, constraint id of the first failure)
    let table = [
        (
            json!({"selection": {"forbid": ["copywriter"]}}),
            PlanStatus::Rejected,
            Some("output.messaging_stack"),
        ),
        // A required reviewer nothing asked for is added after what it reviews…
        (
            json!({"selection": {"require": ["director.PositioningReview"]}}),
            PlanStatus::Accepted,
            None,
        ),
        // …unless its inputs cannot be had.
        (
            json!({"selection": {"require": ["director.SocialPostingReview"]}}),
            PlanStatus::Rejected,
            Some("policy.selection.require.director.SocialPostingReview"),
        ),
        (
            json!({"selection": {"prefer": ["strategist"]}}),
            PlanStatus::Accepted,
            None,
        ),
        (
            json!({"selection": {"avoid": ["copywriter.Messaging"]}}),
            PlanStatus::Accepted,
            None,
        ),
        (
            json!({"topology": {"maxDepth": 1}}),
            PlanStatus::Rejected,
            Some("policy.topology.maxDepth"),
        ),
        (
            json!({"topology": {"maxDepth": 2}}),
            PlanStatus::Accepted,
            None,
        ),
        (
            json!({"topology": {"forbiddenKinds": ["structuring"]}}),
            PlanStatus::Rejected,
            Some("policy.topology.forbiddenKinds"),
        ),
        // A required kind the plan lacks is added when the registry has a
        // capability of it whose inputs can be had; else it is rejected.
        (
            json!({"topology": {"requiredKinds": ["validation"]}}),
            PlanStatus::Accepted,
            None,
        ),
        (
            json!({"topology": {"requiredKinds": ["branch"]}}),
            PlanStatus::Rejected,
            Some("policy.topology.requiredKinds.branch"),
        ),
        (
            json!({"topology": {"requiredKinds": ["execution"]}}),
            PlanStatus::Accepted,
            None,
        ),
        // The declared token estimates of the plan's capabilities must fit the budget.
        (
            json!({"optimisation": {"maxTokens": 100}}),
            PlanStatus::Rejected,
            Some("policy.optimisation.maxTokens"),
        ),
        (
            json!({"optimisation": {"maxTokens": 1000000, "objective": "quality"}}),
            PlanStatus::Accepted,
            None,
        ),
        (
            json!({"directives": {"tone": "plain"}}),
            PlanStatus::Accepted,
            None,
        ),
    ];
    for (planner, status, first_failure) in table {
        let mut envelope = example("positioning-recommendation.json");
        envelope["policies"] = json!({"planner": planner});
        let (capabilities, bundle) = plan_and_validate(&envelope);
        if planner["topology"]["requiredKinds"] == json!(["validation"]) {
            let capabilities = capabilities.clone().unwrap_or_default();
            assert!(
                capabilities
                    .iter()
                    .any(|id| id == "director.PositioningReview"),
                "a validation node was added: {capabilities:?}"
            );
        }
        assert_eq!(bundle.status, status, "{planner}: {bundle:?}");
        assert_eq!(
            bundle
                .failures
                .first()
                .and_then(|failure| failure.constraint_id.as_deref()),
            first_failure,
            "{planner}"
        );
    }
}

fn normalized_plan(envelope: &Value) -> (baton_core::planning::plan::PlanGraph, DiagnosticsBundle) {
    let registry = registry();
    let envelope = TaskEnvelope::parse_value(envelope).unwrap();
    let plan = plan_deterministically(&envelope, &registry).unwrap();
    let bundle = validate_plan(&plan, &envelope, &registry, &ValidatorCache::new());
    (plan, bundle)
}

#[test]
fn no_normalization_node_when_the_facets_already_satisfy_the_contract() {
    for example_name in [
        "positioning-recommendation.json",
        "seed-10.1-sample-envelope.json",
        "seed-10.0.1-stream-contract-variants.json",
    ] {
        let (plan, _) = normalized_plan(&example(example_name));
        assert!(
            plan.nodes
                .iter()
                .all(|node| node.capability_id != "baton.normalize"),
            "{example_name}"
        );
        assert_eq!(
            plan.metadata["normalizationInjected"], false,
            "{example_name}"
        );
    }
}

#[test]
fn a_non_facet_property_or_object_level_keyword_injects_one_transformation_node() {
    let mut with_summary = example("positioning-recommendation.json");
    with_summary["outputContract"]["schema"]["properties"]["summary"] =
        json!({"type": "string", "maxLength": 280});
    with_summary["outputContract"]["schema"]["required"]
        .as_array_mut()
        .unwrap()
        .push(json!("summary"));
    let mut with_object_keyword = example("positioning-recommendation.json");
    with_object_keyword["outputContract"]["schema"]["minProperties"] = json!(2);
    let mut variants_with_summary = example("seed-10.0.1-stream-contract-variants.json");
    variants_with_summary["outputContract"]["schema"]["properties"]["summary"] =
        json!({"type": "string"});
    for (envelope, reason) in [
        (with_summary, "property `summary` is not a facet"),
        (with_object_keyword, "object-level keyword `minProperties`"),
        (variants_with_summary, "property `summary` is not a facet"),
    ] {
        let (plan, bundle) = normalized_plan(&envelope);
        assert_eq!(bundle.status, PlanStatus::Accepted, "{bundle:?}");
        let last = plan.nodes.last().unwrap();
        assert_eq!(last.capability_id, "baton.normalize");
        assert_eq!(last.kind.as_str(), "transformation");
        assert_eq!(plan.metadata["normalizationInjected"], true);
        assert!(
            plan.metadata["normalizationReasons"]
                .as_array()
                .unwrap()
                .contains(&json!(reason)),
            "{:?}",
            plan.metadata["normalizationReasons"]
        );
        // It reads every goal facet from its final producer and answers the whole contract.
        for goal in &plan.goal_facets {
            let producer = plan
                .nodes
                .iter()
                .rev()
                .skip(1)
                .find(|node| node.output_facets.contains(goal))
                .unwrap();
            assert_eq!(
                plan.producer_for("normalize", goal),
                Some(producer.node_id.as_str())
            );
        }
        // The caller's schema, facet-named properties also held to their facet schema.
        let output_schema = &*last.output_contract.schema;
        assert_eq!(
            output_schema["required"],
            envelope["outputContract"]["schema"]["required"]
        );
        for goal in &plan.goal_facets {
            assert_eq!(
                output_schema["properties"][goal]["allOf"][1],
                envelope["outputContract"]["schema"]["properties"][goal]
            );
        }
        for property in envelope["outputContract"]["schema"]["properties"]
            .as_object()
            .unwrap()
            .keys()
        {
            assert_eq!(
                plan.final_producer_of(property)
                    .map(|node| node.node_id.as_str()),
                Some("normalize")
            );
        }
    }
}

#[test]
fn a_capability_is_derived_when_no_declared_one_has_its_inputs() {
    // The strategist is forbidden, so nobody produces the positioning
    // recommendation copywriter.Messaging declares as a required input; the
    // copywriter agent still supports the facets at hand.
    let mut envelope = example("positioning-recommendation.json");
    envelope["outputContract"]["schema"] = json!({
        "type": "object",
        "required": ["messaging_stack"],
        "properties": {"messaging_stack": {"type": "object"}}
    });
    envelope["policies"] = json!({"planner": {"selection": {"forbid": ["strategist"]}}});
    let registry = registry();
    let parsed = TaskEnvelope::parse_value(&envelope).unwrap();
    let plan = plan_deterministically(&parsed, &registry).unwrap();
    assert_eq!(plan.nodes.len(), 1);
    let node = &plan.nodes[0];
    assert_eq!(node.capability_id, "copywriter.Messaging");
    assert!(node.derived);
    assert_eq!(
        node.input_facets,
        vec!["company_information", "positioning_context"]
    );
    let bundle = validate_plan(&plan, &parsed, &registry, &ValidatorCache::new());
    assert_eq!(
        bundle.status,
        PlanStatus::AcceptedWithFindings,
        "{bundle:?}"
    );
    assert_eq!(
        bundle.infos[0].constraint_id.as_deref(),
        Some("derived.node_1.positioning_recommendation")
    );
    // With the strategist allowed the declared chain is used and nothing is derived.
    envelope["policies"] = json!({});
    let parsed = TaskEnvelope::parse_value(&envelope).unwrap();
    let plan = plan_deterministically(&parsed, &registry).unwrap();
    assert!(plan.nodes.iter().all(|node| !node.derived));
}

/// A model node's instructions (`compose_instructions`) are its
/// capability's prompt plus the meaning of every facet it reads and writes:
/// each facet's name, title, description and semantics from the registry.
#[test]
fn a_node_s_instructions_carry_the_semantics_of_its_facets() {
    let registry = registry();
    let envelope = TaskEnvelope::parse_value(&example("positioning-recommendation.json")).unwrap();
    let plan = plan_deterministically(&envelope, &registry).unwrap();
    let mut checked = 0;
    for node in plan
        .nodes
        .iter()
        .filter(|node| node.kind.as_str() != "builtin")
    {
        let Some(capability) = registry.capability(&node.capability_id) else {
            continue;
        };
        if capability.instructions.is_none() && capability.summary.is_empty() {
            continue;
        }
        let instructions = node.instructions.as_ref();
        for facet_name in node.input_facets.iter().chain(&node.output_facets) {
            let facet = registry.facets.get(facet_name).unwrap();
            assert!(
                instructions.contains(&format!(
                    "- `{}` ({}): {}",
                    facet.name, facet.title, facet.description
                )),
                "{}: `{facet_name}` is described: {instructions}",
                node.node_id
            );
            if !facet.semantics.is_empty() {
                assert!(
                    instructions.contains(&facet.semantics),
                    "{}: `{facet_name}`'s semantics: {instructions}",
                    node.node_id
                );
                checked += 1;
            }
        }
        assert!(
            instructions.contains("Answer with one JSON object holding exactly these facets"),
            "{instructions}"
        );
    }
    assert!(checked > 0, "at least one facet with semantics was checked");
}

/// The repository registry plus `oneshot.Positioning`, which makes both
/// goal facets of the positioning example at once (at an unknown, so
/// last-ranked, cost tier), and `lean.Messaging`, a messaging writer
/// declaring a quarter of the shipped one's token estimate at a premium
/// tier.
fn registry_with_a_one_shot_and_a_lean_writer() -> Registry {
    let extra: [baton_core::contracts::capability::CapabilityRegistration; 2] = [
        json!({
            "capabilityId": "oneshot.Positioning", "agentType": "ai", "version": "1",
            "displayName": "One shot", "summary": "Positions and writes the messaging at once.",
            "inputContract": ["company_information", "positioning_context"],
            "outputContract": ["positioning_recommendation", "messaging_stack", "handoff_summary"],
            "cost": {"tier": "bespoke"}
        }),
        {
            let mut lean = messaging_writer("lean.Messaging", &[], &[]);
            lean["cost"] = json!({"tier": "premium", "estimatedTokens": 1000});
            lean
        },
    ]
    .map(|value| serde_json::from_value(value).unwrap());
    let (registry, left_out) = registry().with_additional_capabilities(extra.iter());
    assert!(left_out.is_empty(), "{left_out:?}");
    registry
}

/// The capabilities the positioning example is planned with, under
/// `policies` (`null`: the example's own).
fn planned_capabilities(policies: Value) -> Vec<String> {
    let mut envelope = example("positioning-recommendation.json");
    if !policies.is_null() {
        envelope["policies"] = policies;
    }
    let envelope = TaskEnvelope::parse_value(&envelope).unwrap();
    let plan =
        plan_deterministically(&envelope, &registry_with_a_one_shot_and_a_lean_writer()).unwrap();
    plan.nodes
        .iter()
        .filter(|node| node.builtin().is_none())
        .map(|node| node.capability_id.clone())
        .collect()
}

#[test]
fn speed_plans_fewer_nodes_and_token_efficiency_the_leanest_writer() {
    assert_eq!(
        planned_capabilities(Value::Null),
        ["strategist.Positioning", "copywriter.Messaging"],
        "by default: the cheaper tiers, one capability per goal"
    );
    assert_eq!(
        planned_capabilities(json!({"planner": {"optimisation": {"objective": "speed"}}})),
        ["oneshot.Positioning"],
        "speed: the capability making both goals, one node instead of two"
    );
    assert_eq!(
        planned_capabilities(
            json!({"planner": {"optimisation": {"objective": "token_efficiency"}}})
        ),
        ["strategist.Positioning", "lean.Messaging"],
        "token efficiency: the lowest declared token estimate (1,000 against 4,000), whatever its tier"
    );
}

#[test]
fn the_selection_cutoff_decides_which_mismatches_keep_a_capability_out() {
    let prefer = |id: &str, cutoff: Option<&str>| {
        let mut selection = json!({"prefer": [id]});
        if let Some(cutoff) = cutoff {
            selection["cutoff"] = json!(cutoff);
        }
        json!({"planner": {"selection": selection}})
    };
    // A format mismatch only ranks lower by default: the preferred
    // newsletter writer still writes for a LinkedIn post; `strict` cuts it.
    let linkedin = json!({"channel": "linkedin"});
    assert_eq!(
        messaging_capability_for(
            linkedin.clone(),
            prefer("copywriter.Messaging.newsletter", None)
        ),
        Some("copywriter.Messaging.newsletter".into())
    );
    assert_eq!(
        messaging_capability_for(
            linkedin,
            prefer("copywriter.Messaging.newsletter", Some("strict"))
        ),
        Some("copywriter.Messaging".into())
    );
    // A language mismatch is cut by default; `none` lets the preferred
    // French writer in.
    let english = json!({"language": "en-GB"});
    assert_eq!(
        messaging_capability_for(english.clone(), prefer("copywriter.Messaging.fr", None)),
        Some("copywriter.Messaging".into())
    );
    assert_eq!(
        messaging_capability_for(english, prefer("copywriter.Messaging.fr", Some("none"))),
        Some("copywriter.Messaging.fr".into())
    );
    // An unknown cutoff is refused naming its path.
    let mut envelope = example("positioning-recommendation.json");
    envelope["policies"] = json!({"planner": {"selection": {"cutoff": "lenient"}}});
    let error = TaskEnvelope::parse_value(&envelope).unwrap_err();
    assert_eq!(
        error.path(),
        Some("$.policies.planner.selection.cutoff"),
        "{error}"
    );
}

/// `QualityAssurance.contentReview` declares `partialOutputs`: planned as
/// a required reviewer, it is asked only for what the plan reads (its
/// score's and acceptance report's facets); when the caller's contract
/// asks for its recommendations too, those stay.
#[test]
fn a_partial_outputs_capability_is_asked_only_for_what_the_plan_reads() {
    let registry = registry();
    let mut envelope = example("seed-10.1-sample-envelope.json");
    envelope["policies"]["planner"] =
        json!({"selection": {"require": ["QualityAssurance.contentReview"]}});
    let parsed = TaskEnvelope::parse_value(&envelope).unwrap();
    let plan = plan_deterministically(&parsed, &registry).unwrap();
    let review = plan
        .nodes
        .iter()
        .find(|node| node.capability_id == "QualityAssurance.contentReview")
        .unwrap();
    assert_eq!(review.output_facets, vec!["qaFindings", "acceptanceReport"]);
    let required = review.output_contract.schema["required"].clone();
    assert_eq!(required, json!(["qaFindings", "acceptanceReport"]));
    assert!(!review.instructions.contains("`recommendationSet`"));
    assert_eq!(
        plan.metadata["outputsLeftOut"][&review.node_id],
        json!(["recommendationSet"])
    );
    let bundle = validate_plan(&plan, &parsed, &registry, &ValidatorCache::new());
    assert_eq!(bundle.status, PlanStatus::Accepted);

    envelope["outputContract"]["schema"]["properties"]["recommendationSet"] =
        json!({"type": "object"});
    let parsed = TaskEnvelope::parse_value(&envelope).unwrap();
    let plan = plan_deterministically(&parsed, &registry).unwrap();
    let review = plan
        .nodes
        .iter()
        .find(|node| node.capability_id == "QualityAssurance.contentReview")
        .unwrap();
    assert_eq!(
        review.output_facets,
        vec!["qaFindings", "recommendationSet", "acceptanceReport"]
    );
    assert!(plan.metadata.get("outputsLeftOut").is_none());
}

/// The repository registry plus two messaging writers at the shipped
/// writer's cost, one for banks and one for hospitals: three candidates
/// that nothing but their texts tells apart.
fn registry_with_sector_writers() -> Registry {
    let writer = |capability_id: &str, summary: &str| {
        let mut writer = messaging_writer(capability_id, &[], &[]);
        writer["summary"] = json!(summary);
        writer["cost"] = json!({"tier": "standard", "estimatedTokens": 4000});
        serde_json::from_value::<baton_core::contracts::capability::CapabilityRegistration>(writer)
            .unwrap()
    };
    let sector_writers = [
        writer(
            "writer.MessagingBanking",
            "Writes messaging for banks, lenders and payment companies.",
        ),
        writer(
            "writer.MessagingHealth",
            "Writes messaging for hospitals, clinics and care providers.",
        ),
    ];
    let (registry, left_out) = registry().with_additional_capabilities(sector_writers.iter());
    assert!(left_out.is_empty(), "{left_out:?}");
    registry
}

fn messaging_writer_planned_for(objective: &str, orders: CandidateOrders<'_>) -> (String, Value) {
    let mut envelope = example("positioning-recommendation.json");
    envelope["objective"] = json!(objective);
    let envelope = TaskEnvelope::parse_value(&envelope).unwrap();
    let plan =
        plan_deterministically_ordered(&envelope, &registry_with_sector_writers(), orders).unwrap();
    let writer = plan
        .nodes
        .iter()
        .find(|node| {
            node.output_facets
                .iter()
                .any(|facet| facet == "messaging_stack")
        })
        .map(|node| node.capability_id.clone())
        .unwrap();
    (writer, plan.metadata["relevance"].clone())
}

#[test]
fn among_equals_the_planner_picks_the_capability_whose_text_fits_the_objective() {
    let (writer, relevance) = messaging_writer_planned_for(
        "Position our lending product for banks and write its messaging.",
        CandidateOrders::default(),
    );
    assert_eq!(writer, "writer.MessagingBanking");
    assert_eq!(relevance["rankedBy"], json!("words"));
    assert_eq!(
        relevance["query"],
        json!("Position our lending product for banks and write its messaging.")
    );
    assert!(
        relevance["ranks"]["writer.MessagingBanking"].is_u64(),
        "the chosen writer's place is recorded: {relevance}"
    );

    let (writer, _) = messaging_writer_planned_for(
        "Position our clinic network for hospitals and write its messaging.",
        CandidateOrders::default(),
    );
    assert_eq!(writer, "writer.MessagingHealth");

    // Nothing sector-specific in the objective: the shipped writer, whose
    // summary says "messaging stack", fits best (before relevance, the
    // tie went to the first id, the same one).
    let (writer, _) = messaging_writer_planned_for(
        "Recommend a market positioning and the messaging stack that expresses it.",
        CandidateOrders::default(),
    );
    assert_eq!(writer, "copywriter.Messaging");
}

#[test]
fn an_order_the_shell_fused_with_embeddings_is_followed_and_recorded() {
    // The shell's order (words fused with embeddings) ranks the hospital
    // writer first although the objective's words name banks: a model
    // found it closer in meaning. The planner follows the order it is given.
    let fused = [
        "writer.MessagingHealth".to_string(),
        "writer.MessagingBanking".to_string(),
    ];
    let (writer, relevance) = messaging_writer_planned_for(
        "Position our lending product for banks and write its messaging.",
        CandidateOrders {
            health: &[],
            relevance: Some(&fused),
        },
    );
    assert_eq!(writer, "writer.MessagingHealth");
    assert_eq!(relevance["rankedBy"], json!("words_and_embeddings"));
    assert_eq!(relevance["ranks"]["writer.MessagingHealth"], json!(0));
}

#[test]
fn relevance_never_outranks_cost_or_the_selection_policy() {
    // The bespoke one-shot writer's text fits the positioning objective
    // best, but its unknown tier ranks it after the standard ones.
    assert_eq!(
        planned_capabilities(Value::Null),
        ["strategist.Positioning", "copywriter.Messaging"]
    );
    // A policy's `prefer` outranks relevance.
    let mut envelope = example("positioning-recommendation.json");
    envelope["objective"] =
        json!("Position our lending product for banks and write its messaging.");
    envelope["policies"] =
        json!({"planner": {"selection": {"prefer": ["writer.MessagingHealth"]}}});
    let envelope = TaskEnvelope::parse_value(&envelope).unwrap();
    let plan = plan_deterministically(&envelope, &registry_with_sector_writers()).unwrap();
    assert!(
        plan.nodes
            .iter()
            .any(|node| node.capability_id == "writer.MessagingHealth"),
        "{:?}",
        plan.nodes
            .iter()
            .map(|node| &node.capability_id)
            .collect::<Vec<_>>()
    );
}
