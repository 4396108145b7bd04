//! The envelope builder over the repository's registry: a three-message
//! conversation drafts an envelope that passes the plan checks, each
//! missing or wrong piece is asked for by name and path, and the metadata
//! lists what a developer needs. The check is the planner's own
//! (`TaskEnvelope::parse_value` and `preview_plan`), not a stand-in.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::Path;

use baton_core::basics::schema::ValidatorCache;
use baton_core::catalog::registry::Registry;
use baton_core::contracts::envelope::TaskEnvelope;
use baton_core::planning::preview::{PlanPreview, preview_plan};
use baton_sandbox::{
    DraftMessage, DraftProblem, DraftRequest, DraftRole, DraftStage, DraftTurn, draft_turn,
    sandbox_metadata,
};
use serde_json::Value;

fn registry() -> Registry {
    baton_runtime::registry_loader::load_registry(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../registry"),
    )
    .unwrap()
}

fn planner_check(registry: &Registry) -> impl Fn(&Value) -> Result<PlanPreview, DraftProblem> {
    move |envelope: &Value| {
        let envelope = TaskEnvelope::parse_value(envelope)
            .map_err(|error| DraftProblem::new("$", error.to_string()))?;
        Ok(preview_plan(&envelope, registry, &ValidatorCache::new()))
    }
}

fn turn(registry: &Registry, said: &[&str]) -> DraftTurn {
    let request = DraftRequest {
        messages: said
            .iter()
            .map(|content| DraftMessage {
                role: DraftRole::User,
                content: (*content).to_string(),
            })
            .collect(),
    };
    draft_turn(registry, &request, &planner_check(registry)).unwrap()
}

const OBJECTIVE: &str =
    "Recommend a market positioning for Acme Analytics and the messaging stack that expresses it.";

const INPUTS: &str = "positioning_context.company_name: Acme Analytics
positioning_context.company_url: https://acmeanalytics.io
positioning_context.target_audience: Operations managers in mid-sized manufacturing firms
positioning_context.competing_factors: Data reliability, Ease of integration";

#[test]
fn an_empty_conversation_asks_what_the_run_should_produce() {
    let registry = registry();
    let first = turn(&registry, &[]);
    assert_eq!(first.stage, DraftStage::NeedsObjective);
    assert!(
        first.reply.contains("What should the run produce"),
        "{}",
        first.reply
    );
    assert!(first.envelope.is_none());
}

#[test]
fn three_messages_draft_an_envelope_that_passes_the_plan_checks() {
    let registry = registry();
    let first = turn(&registry, &[OBJECTIVE]);
    assert_eq!(first.stage, DraftStage::NeedsInputs, "{}", first.reply);
    assert_eq!(
        first.outputs,
        vec![
            "messaging_stack".to_string(),
            "positioning_recommendation".to_string()
        ]
    );
    let asked: Vec<&str> = first
        .missing_inputs
        .iter()
        .map(|input| input.facet.as_str())
        .collect();
    assert_eq!(asked, vec!["positioning_context"], "{}", first.reply);
    assert!(
        first.reply.contains("company_name (required)"),
        "{}",
        first.reply
    );

    let second = turn(&registry, &[OBJECTIVE, INPUTS]);
    assert_eq!(
        second.stage,
        DraftStage::AwaitingConfirmation,
        "{}",
        second.reply
    );
    assert!(second.problems.is_empty(), "{:?}", second.problems);
    let envelope = second.envelope.clone().unwrap();
    assert_eq!(
        envelope["inputs"]["positioning_context"]["competing_factors"],
        serde_json::json!(["Data reliability", "Ease of integration"])
    );
    assert!(
        second
            .plan_mermaid
            .as_deref()
            .unwrap()
            .contains("flowchart")
    );
    assert!(!second.ready);

    let third = turn(&registry, &[OBJECTIVE, INPUTS, "yes"]);
    assert_eq!(third.stage, DraftStage::Ready, "{}", third.reply);
    assert!(third.ready);
    let envelope = third.envelope.unwrap();
    let parsed = TaskEnvelope::parse_value(&envelope).unwrap();
    let preview = preview_plan(&parsed, &registry, &ValidatorCache::new());
    assert!(!preview.is_rejected(), "{:?}", preview.diagnostics);
    let plan = preview.plan.unwrap();
    for goal in ["messaging_stack", "positioning_recommendation"] {
        assert!(plan.goal_facets.iter().any(|facet| facet == goal), "{goal}");
    }
}

#[test]
fn a_confirmation_before_the_inputs_does_not_hand_the_envelope_back() {
    let registry = registry();
    let early = turn(&registry, &[OBJECTIVE, "yes"]);
    assert_eq!(early.stage, DraftStage::NeedsInputs);
    assert!(!early.ready);
}

#[test]
fn a_wrong_value_is_named_by_its_path_and_an_unknown_facet_by_name() {
    let registry = registry();
    let wrong = turn(
        &registry,
        &[
            OBJECTIVE,
            "positioning_context.company_name: Acme\npositioning_context.company_url: not a url",
        ],
    );
    assert_eq!(wrong.stage, DraftStage::NeedsInputs);
    assert!(
        wrong
            .problems
            .iter()
            .any(|problem| problem.path == "$.inputs.positioning_context.company_url"),
        "{:?}",
        wrong.problems
    );
    let unknown = turn(
        &registry,
        &[OBJECTIVE, "positioning_contxt.company_name: Acme"],
    );
    let problem = &unknown.problems[0];
    assert_eq!(problem.path, "$.messages[1].content");
    assert!(
        problem.message.contains("positioning_contxt"),
        "{}",
        problem.message
    );
    let unreadable = turn(&registry, &[OBJECTIVE, "I am not sure what you mean"]);
    assert_eq!(unreadable.problems[0].path, "$.messages[1].content");
}

#[test]
fn outputs_are_added_and_removed_by_name() {
    let registry = registry();
    let changed = turn(
        &registry,
        &[
            OBJECTIVE,
            "remove messaging_stack",
            "add value_canvas, no_such_facet",
        ],
    );
    assert_eq!(
        changed.outputs,
        vec![
            "positioning_recommendation".to_string(),
            "value_canvas".to_string()
        ]
    );
    assert!(changed.problems[0].message.contains("no_such_facet"));
    let nothing = turn(&registry, &["Something entirely unrelated to anything"]);
    assert_eq!(nothing.stage, DraftStage::NeedsOutputs);
    assert!(nothing.reply.contains("add NAME"), "{}", nothing.reply);
}

#[test]
fn a_too_long_conversation_is_refused_naming_the_path() {
    let registry = registry();
    let many = vec!["yes"; baton_sandbox::conversation::MAX_DRAFT_MESSAGES + 1];
    let request = DraftRequest {
        messages: many
            .iter()
            .map(|content| DraftMessage {
                role: DraftRole::User,
                content: (*content).to_string(),
            })
            .collect(),
    };
    let refused = draft_turn(&registry, &request, &planner_check(&registry)).unwrap_err();
    assert_eq!(refused.path, "$.messages");
}

#[test]
fn the_metadata_lists_capabilities_facets_schemas_policies_and_examples_that_pass() {
    let registry = registry();
    let metadata = sandbox_metadata(&registry);
    assert_eq!(metadata.capabilities.len(), registry.capabilities().count());
    assert_eq!(metadata.facets.len(), registry.facets.len());
    for name in ["envelope", "capability", "facet"] {
        assert!(metadata.schemas.contains_key(name), "{name}");
    }
    assert!(
        metadata
            .policies
            .iter()
            .any(|policy| policy.name == "planner" && !policy.description.is_empty())
    );
    let recommendation = metadata
        .facets
        .iter()
        .find(|facet| facet.name == "positioning_recommendation")
        .unwrap();
    assert!(!recommendation.produced_by.is_empty());
    assert!(metadata.examples.len() >= 3, "{}", metadata.examples.len());
    // Every example the sandbox offers is an envelope a submission takes.
    for example in &metadata.examples {
        let parsed = TaskEnvelope::parse_value(&example.envelope)
            .unwrap_or_else(|error| panic!("{}: {error}", example.name));
        assert!(!parsed.objective.is_empty(), "{}", example.name);
    }
}
