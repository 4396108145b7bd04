//! Architecture rule that runs as a test: nothing an envelope carries is
//! accepted and ignored. Every property of the envelope's JSON Schema
//! (`registry/schemas/envelope.schema.json`, generated from the Rust types)
//! is listed below with the test that shows what it does: a behaviour
//! (one that is advisory in some runs, such as `diversity` with no list to
//! vary, shows its `warning` there too) or a refusal at submission (422 /
//! exit 2 naming its path). No field is advisory only. The walk fails on a property
//! with no entry (a new field must come with its test), on an entry for a
//! property the schema no longer has, and on an entry naming a test that
//! does not exist in its file or never names the field (as JSON or as
//! the Rust field).
//!
//! A field that takes any JSON (its schema is `true`) is listed once more,
//! as a JSONLogic expression (compiled at submission, with the test that
//! shows an unknown operator refused at its path) or as data: a new
//! JSONLogic-bearing field cannot arrive without its compilation.
//!
//! Keys outside the canonical ones are covered by their parent's entry:
//! other `constraints` travel to the nodes (`callerConstraints`), other
//! `policies` are legacy keys (normalised) or selection hints.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::{Value, json};

/// How a field shows it acts.
#[derive(Debug, Clone, Copy)]
enum Acts {
    Behaviour,
    Refusal,
}

use Acts::{Behaviour, Refusal};

const ENVELOPE_FIELDS: &str = "shared/runtime/tests/envelope_fields.rs";
const GOVERNANCE: &str = "shared/core/src/engine/tests/governance.rs";
const PLANNING: &str = "shared/core/tests/planning.rs";
const CLI: &str = "functions/baton/tests/cli.rs";
const ENGINE: &str = "shared/core/src/engine/tests.rs";
const MEMORY: &str = "shared/core/src/engine/tests/memory.rs";

/// (schema path, how it acts, test file, test function).
const FIELDS: &[(&str, Acts, &str, &str)] = &[
    (
        "$.objective",
        Refusal,
        "shared/core/src/contracts/envelope.rs",
        "missing_objective_names_the_root",
    ),
    (
        "$.inputs",
        Behaviour,
        CLI,
        "a_node_sees_only_its_own_input_facets_and_no_orchestrator_prompt",
    ),
    (
        "$.constraints",
        Behaviour,
        ENVELOPE_FIELDS,
        "caller_constraints_directives_and_output_hints_reach_the_nodes_they_concern",
    ),
    (
        "$.constraints.qualityThreshold",
        Behaviour,
        ENVELOPE_FIELDS,
        "a_quality_threshold_alone_plans_a_reviewer_and_a_low_score_revises",
    ),
    (
        "$.constraints.maxRevisions",
        Behaviour,
        "shared/runtime/tests/feedback.rs",
        "feedback_on_the_copy_re_runs_the_writer_with_it_and_stops_at_max_revisions",
    ),
    (
        "$.constraints.executionDepth",
        Behaviour,
        CLI,
        "at_the_depth_limit_the_best_draft_is_delivered_best_effort",
    ),
    (
        "$.constraints.acceptanceCriteria",
        Behaviour,
        ENVELOPE_FIELDS,
        "identity_instruction_and_caller_fields_act_as_documented",
    ),
    (
        "$.constraints.maxCostUsd",
        Behaviour,
        "shared/core/src/engine/tests/cost.rs",
        "a_cost_budget_warns_at_80_percent_and_stops_the_next_model_call",
    ),
    (
        "$.constraints.maxDurationSeconds",
        Behaviour,
        "shared/core/src/engine/tests/cost.rs",
        "a_duration_budget_is_two_durable_timers_and_a_check_before_each_call",
    ),
    (
        "$.constraints.maxTurns",
        Behaviour,
        ENVELOPE_FIELDS,
        "max_turns_bounds_the_model_turns_of_the_runs_nodes",
    ),
    (
        "$.constraints.resumeRunId",
        Behaviour,
        "shared/http/tests/api.rs",
        "resume_run_id_follows_the_existing_run_and_never_creates_one",
    ),
    (
        "$.constraints.preferredModels",
        Behaviour,
        "shared/runtime/tests/model_choice.rs",
        "each_node_calls_the_model_the_documented_order_picks",
    ),
    (
        "$.outputContract",
        Behaviour,
        ENVELOPE_FIELDS,
        "diversity_varies_a_list_goal_and_is_said_when_nothing_can_vary_and_a_mode_baton_cannot_enforce_is_refused",
    ),
    (
        "$.outputContract.mode",
        Refusal,
        ENVELOPE_FIELDS,
        "diversity_varies_a_list_goal_and_is_said_when_nothing_can_vary_and_a_mode_baton_cannot_enforce_is_refused",
    ),
    (
        "$.outputContract.schema",
        Behaviour,
        CLI,
        "every_example_envelope_completes_with_contract_valid_output",
    ),
    (
        "$.outputContract.hints",
        Behaviour,
        ENVELOPE_FIELDS,
        "caller_constraints_directives_and_output_hints_reach_the_nodes_they_concern",
    ),
    (
        "$.outputContract.constraints",
        Behaviour,
        PLANNING,
        "constraints_on_unproduced_facets_score_by_severity",
    ),
    (
        "$.outputContract.constraints[].constraintId",
        Behaviour,
        PLANNING,
        "constraints_on_unproduced_facets_score_by_severity",
    ),
    (
        "$.outputContract.constraints[].expr",
        Behaviour,
        PLANNING,
        "constraints_on_unproduced_facets_score_by_severity",
    ),
    (
        "$.outputContract.constraints[].level",
        Behaviour,
        PLANNING,
        "constraints_on_unproduced_facets_score_by_severity",
    ),
    (
        "$.outputContract.constraints[].rationale",
        Behaviour,
        PLANNING,
        "constraints_on_unproduced_facets_score_by_severity",
    ),
    (
        "$.policies",
        Behaviour,
        ENVELOPE_FIELDS,
        "the_sample_envelope_says_what_each_legacy_key_became_and_parks_its_final_output_for_approval",
    ),
    (
        "$.policies.planner",
        Behaviour,
        PLANNING,
        "each_planner_policy_is_enforced_by_the_validator",
    ),
    (
        "$.policies.planner.topology",
        Behaviour,
        PLANNING,
        "each_planner_policy_is_enforced_by_the_validator",
    ),
    (
        "$.policies.planner.topology.variantCount",
        Behaviour,
        PLANNING,
        "topology_variant_count_expands_an_open_ended_array",
    ),
    (
        "$.policies.planner.topology.maxDepth",
        Behaviour,
        PLANNING,
        "max_depth_is_enforced",
    ),
    (
        "$.policies.planner.topology.requiredKinds",
        Behaviour,
        PLANNING,
        "each_planner_policy_is_enforced_by_the_validator",
    ),
    (
        "$.policies.planner.topology.forbiddenKinds",
        Behaviour,
        PLANNING,
        "each_planner_policy_is_enforced_by_the_validator",
    ),
    (
        "$.policies.planner.selection",
        Behaviour,
        PLANNING,
        "each_planner_policy_is_enforced_by_the_validator",
    ),
    (
        "$.policies.planner.selection.require",
        Behaviour,
        PLANNING,
        "a_required_reviewer_is_added_and_one_that_cannot_run_is_a_hard_failure",
    ),
    (
        "$.policies.planner.selection.forbid",
        Behaviour,
        PLANNING,
        "forbidding_the_only_producer_rejects_with_missing_producer",
    ),
    (
        "$.policies.planner.selection.prefer",
        Behaviour,
        PLANNING,
        "capabilities_are_scored_on_language_and_format_hints",
    ),
    (
        "$.policies.planner.selection.avoid",
        Behaviour,
        PLANNING,
        "capabilities_are_scored_on_language_and_format_hints",
    ),
    (
        "$.policies.planner.selection.cutoff",
        Behaviour,
        PLANNING,
        "the_selection_cutoff_decides_which_mismatches_keep_a_capability_out",
    ),
    (
        "$.policies.planner.optimisation",
        Behaviour,
        PLANNING,
        "each_planner_policy_is_enforced_by_the_validator",
    ),
    (
        "$.policies.planner.optimisation.objective",
        Behaviour,
        PLANNING,
        "speed_plans_fewer_nodes_and_token_efficiency_the_leanest_writer",
    ),
    (
        "$.policies.planner.optimisation.maxTokens",
        Behaviour,
        "shared/core/src/engine/tests.rs",
        "the_token_budget_stops_the_run_before_more_is_spent",
    ),
    (
        "$.policies.planner.directives",
        Behaviour,
        ENVELOPE_FIELDS,
        "caller_constraints_directives_and_output_hints_reach_the_nodes_they_concern",
    ),
    (
        "$.policies.planner.turnByTurn",
        Behaviour,
        "shared/runtime/tests/llm_replan.rs",
        "the_turn_by_turn_orchestrator_completes_the_seed_envelope_one_decision_a_plan_version",
    ),
    (
        "$.policies.planner.turnByTurn.maxTurns",
        Behaviour,
        "shared/runtime/tests/llm_replan.rs",
        "past_max_turns_the_run_finishes_with_what_it_has_and_says_so",
    ),
    (
        "$.policies.fallbackCapability",
        Behaviour,
        "shared/runtime/tests/fallback.rs",
        "an_envelope_names_its_fallback_and_a_capability_that_is_not_a_catch_all_is_refused",
    ),
    (
        "$.policies.reviewDerived",
        Behaviour,
        "shared/runtime/tests/derived.rs",
        "review_derived_holds_a_derived_output_for_a_person",
    ),
    (
        "$.policies.runtime",
        Behaviour,
        CLI,
        "approvals_and_pauses_continue_in_later_processes",
    ),
    (
        "$.policies.runtime[].id",
        Behaviour,
        GOVERNANCE,
        "manual_policies_fire_on_request_only",
    ),
    (
        "$.policies.runtime[].enabled",
        Behaviour,
        GOVERNANCE,
        "policy_trigger_action_table",
    ),
    (
        "$.policies.runtime[].trigger",
        Behaviour,
        GOVERNANCE,
        "policy_trigger_action_table",
    ),
    (
        "$.policies.runtime[].trigger.kind",
        Behaviour,
        GOVERNANCE,
        "policy_trigger_action_table",
    ),
    (
        "$.policies.runtime[].trigger.selector",
        Behaviour,
        GOVERNANCE,
        "policy_trigger_action_table",
    ),
    (
        "$.policies.runtime[].trigger.selector.nodeId",
        Behaviour,
        GOVERNANCE,
        "policy_trigger_action_table",
    ),
    (
        "$.policies.runtime[].trigger.selector.kind",
        Behaviour,
        GOVERNANCE,
        "policy_trigger_action_table",
    ),
    (
        "$.policies.runtime[].trigger.selector.capabilityId",
        Behaviour,
        GOVERNANCE,
        "policy_trigger_action_table",
    ),
    (
        "$.policies.runtime[].trigger.selector.derived",
        Behaviour,
        "shared/runtime/tests/derived.rs",
        "review_derived_holds_a_derived_output_for_a_person",
    ),
    (
        "$.policies.runtime[].trigger.condition",
        Behaviour,
        GOVERNANCE,
        "policy_trigger_action_table",
    ),
    (
        "$.policies.runtime[].trigger.ms",
        Behaviour,
        GOVERNANCE,
        "an_on_timeout_policy_is_a_durable_timer",
    ),
    (
        "$.policies.runtime[].trigger.metric",
        Behaviour,
        GOVERNANCE,
        "policy_trigger_action_table",
    ),
    (
        "$.policies.runtime[].trigger.threshold",
        Behaviour,
        GOVERNANCE,
        "policy_trigger_action_table",
    ),
    (
        "$.policies.runtime[].trigger.budget",
        Behaviour,
        "shared/runtime/tests/budgets.rs",
        "a_budget_policy_parks_the_run_for_approval_which_allows_another_budget",
    ),
    (
        "$.policies.runtime[].action",
        Behaviour,
        GOVERNANCE,
        "policy_trigger_action_table",
    ),
    (
        "$.policies.runtime[].action.type",
        Behaviour,
        GOVERNANCE,
        "policy_trigger_action_table",
    ),
    (
        "$.policies.runtime[].action.rationale",
        Behaviour,
        GOVERNANCE,
        "policy_trigger_action_table",
    ),
    (
        "$.policies.runtime[].action.approveAction",
        Behaviour,
        GOVERNANCE,
        "approval_chains_table",
    ),
    (
        "$.policies.taskAssignments",
        Behaviour,
        ENGINE,
        "the_envelopes_task_assignment_takes_the_place_of_the_capabilitys",
    ),
    (
        "$.policies.runtime[].action.approvers",
        Behaviour,
        GOVERNANCE,
        "an_approval_with_approvers_is_decided_by_a_member_only_and_names_who_decided",
    ),
    (
        "$.policies.runtime[].action.approvers.users",
        Behaviour,
        GOVERNANCE,
        "an_approval_with_approvers_is_decided_by_a_member_only_and_names_who_decided",
    ),
    (
        "$.policies.runtime[].action.approvers.groups",
        Behaviour,
        GOVERNANCE,
        "an_approval_with_approvers_is_decided_by_a_member_only_and_names_who_decided",
    ),
    (
        "$.policies.runtime[].action.rejectAction",
        Behaviour,
        GOVERNANCE,
        "approval_chains_table",
    ),
    (
        "$.policies.runtime[].action.message",
        Behaviour,
        GOVERNANCE,
        "policy_trigger_action_table",
    ),
    (
        "$.policies.runtime[].action.reason",
        Behaviour,
        GOVERNANCE,
        "policy_trigger_action_table",
    ),
    (
        "$.policies.runtime[].action.event",
        Behaviour,
        GOVERNANCE,
        "policy_trigger_action_table",
    ),
    (
        "$.policies.runtime[].action.payload",
        Behaviour,
        GOVERNANCE,
        "policy_trigger_action_table",
    ),
    (
        "$.specialInstructions",
        Behaviour,
        ENVELOPE_FIELDS,
        "identity_instruction_and_caller_fields_act_as_documented",
    ),
    (
        "$.threadId",
        Behaviour,
        ENVELOPE_FIELDS,
        "identity_instruction_and_caller_fields_act_as_documented",
    ),
    (
        "$.correlationId",
        Behaviour,
        ENVELOPE_FIELDS,
        "identity_instruction_and_caller_fields_act_as_documented",
    ),
    (
        "$.idempotencyKey",
        Behaviour,
        "shared/runtime/tests/durability.rs",
        "an_idempotency_key_returns_the_same_run",
    ),
    (
        "$.metadata",
        Behaviour,
        ENVELOPE_FIELDS,
        "identity_instruction_and_caller_fields_act_as_documented",
    ),
    (
        "$.callbackUrl",
        Behaviour,
        "functions/baton/tests/serve_webhooks.rs",
        "a_signed_callback_refused_twice_is_accepted_once_and_an_ssrf_target_is_never_dialled",
    ),
    (
        "$.workflowName",
        Behaviour,
        "shared/http/tests/api.rs",
        "an_ended_run_is_auditable_from_its_snapshot_and_the_runs_list",
    ),
    (
        "$.memory",
        Behaviour,
        MEMORY,
        "a_node_recalls_before_its_call_and_gets_the_items_as_quoted_data",
    ),
    (
        "$.memory.recall",
        Behaviour,
        MEMORY,
        "a_node_recalls_before_its_call_and_gets_the_items_as_quoted_data",
    ),
    (
        "$.memory.recall.namespaces",
        Behaviour,
        MEMORY,
        "a_node_recalls_before_its_call_and_gets_the_items_as_quoted_data",
    ),
    (
        "$.memory.recall.perNode",
        Refusal,
        "shared/core/src/contracts/memory_use.rs",
        "a_memory_block_names_the_path_of_its_fault",
    ),
    (
        "$.memory.rememberTo",
        Behaviour,
        MEMORY,
        "a_completed_run_remembers_its_marked_facets_after_its_last_frame",
    ),
    (
        "$.$schema",
        Behaviour,
        ENVELOPE_FIELDS,
        "identity_instruction_and_caller_fields_act_as_documented",
    ),
];

fn repository_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What a field that takes any JSON holds.
#[derive(Debug, Clone, Copy)]
enum FreeJson {
    /// A JSONLogic expression, compiled at submission: the test (file,
    /// function) refuses an unknown operator at the field's path.
    Logic(&'static str, &'static str),
    /// Data, never evaluated as logic (why).
    Data(&'static str),
}

const FREE_JSON_FIELDS: &[(&str, FreeJson)] = &[
    (
        "$.constraints.*",
        FreeJson::Data("caller constraints, travel to the nodes"),
    ),
    (
        "$.inputs.*",
        FreeJson::Data("input facets, checked against their schemas"),
    ),
    (
        "$.metadata.*",
        FreeJson::Data("the caller's metadata, kept on the run"),
    ),
    (
        "$.outputContract.constraints[].expr",
        FreeJson::Logic(
            "shared/core/src/contracts/envelope.rs",
            "invalid_jsonlogic_constraint_names_its_index",
        ),
    ),
    (
        "$.outputContract.hints.*",
        FreeJson::Data("output hints, shown to the nodes"),
    ),
    (
        "$.outputContract.schema",
        FreeJson::Data("a JSON Schema, compiled as one"),
    ),
    (
        "$.policies.*",
        FreeJson::Data("legacy keys (normalised) and selection hints"),
    ),
    (
        "$.policies.planner.directives.*",
        FreeJson::Data("planner directives"),
    ),
    (
        "$.policies.runtime[].action.payload.*",
        FreeJson::Data("an emitted event's payload"),
    ),
    (
        "$.policies.runtime[].trigger.condition",
        FreeJson::Logic(
            "shared/core/src/contracts/envelope.rs",
            "a_policy_condition_with_an_unknown_operator_is_refused_naming_its_path",
        ),
    ),
];

/// Every property path of `schema`: `$.a.b`, array items as `[]`, unions
/// (`anyOf`/`oneOf`/`allOf`) merged, `$ref`s followed once per path.
fn property_paths(schema: &Value) -> BTreeSet<String> {
    walk_schema(schema).0
}

/// The paths of `schema` whose value may be any JSON (a schema of `true` or
/// without constraints): properties, array items and open maps (`.*`).
fn free_json_paths(schema: &Value) -> BTreeSet<String> {
    walk_schema(schema).1
}

/// One walk of the schema: (every property path, the free-JSON paths).
fn walk_schema(schema: &Value) -> (BTreeSet<String>, BTreeSet<String>) {
    fn free(node: &Value) -> bool {
        match node {
            Value::Bool(true) => true,
            Value::Object(object) => object
                .keys()
                .all(|key| ["description", "title", "default", "examples"].contains(&key.as_str())),
            _ => false,
        }
    }
    fn walk(
        node: &Value,
        path: &str,
        definitions: &Value,
        seen: &[String],
        out: &mut (BTreeSet<String>, BTreeSet<String>),
    ) {
        let Some(object) = node.as_object() else {
            return;
        };
        if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
            let name = reference.rsplit('/').next().unwrap_or_default().to_string();
            if seen.contains(&name) {
                return;
            }
            let mut seen = seen.to_vec();
            seen.push(name.clone());
            walk(&definitions[&name], path, definitions, &seen, out);
            return;
        }
        for union in ["anyOf", "oneOf", "allOf"] {
            for member in object
                .get(union)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                walk(member, path, definitions, seen, out);
            }
        }
        for (name, property) in object
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let child = format!("{path}.{name}");
            out.0.insert(child.clone());
            if free(property) {
                out.1.insert(child.clone());
            }
            walk(property, &child, definitions, seen, out);
        }
        if let Some(items) = object.get("items") {
            if free(items) {
                out.1.insert(format!("{path}[]"));
            }
            walk(items, &format!("{path}[]"), definitions, seen, out);
        }
        if object.get("additionalProperties").is_some_and(free) {
            out.1.insert(format!("{path}.*"));
        }
    }
    let mut out = (BTreeSet::new(), BTreeSet::new());
    walk(schema, "$", &schema["$defs"], &[], &mut out);
    out
}

/// The text of `fn name` in `file_text`, up to the next item.
fn test_body<'a>(file_text: &'a str, name: &str) -> Option<&'a str> {
    let start = file_text.find(&format!("fn {name}("))?;
    let rest = &file_text[start..];
    let end = rest[1..]
        .find("\n#[")
        .or_else(|| rest[1..].find("\nfn "))
        .map_or(rest.len(), |end| end + 1);
    Some(&rest[..end])
}

/// `qualityThreshold` → `quality_threshold`.
fn snake_case(name: &str) -> String {
    let mut snake = String::new();
    for character in name.chars() {
        if character.is_ascii_uppercase() {
            snake.push('_');
            snake.push(character.to_ascii_lowercase());
        } else {
            snake.push(character);
        }
    }
    snake
}

fn envelope_schema() -> Value {
    let path = repository_root().join("registry/schemas/envelope.schema.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

#[test]
fn every_envelope_field_has_a_test_that_shows_it_acts() {
    let paths = property_paths(&envelope_schema());
    assert!(paths.len() > 50, "the walk reads the schema: {paths:?}");
    let listed: BTreeSet<String> = FIELDS.iter().map(|(path, ..)| path.to_string()).collect();
    let unlisted: Vec<&String> = paths.difference(&listed).collect();
    assert!(
        unlisted.is_empty(),
        "envelope fields with no test showing a behaviour, a refusal or a warning (add one, then list it here): {unlisted:?}"
    );
    let stale: Vec<&String> = listed.difference(&paths).collect();
    assert!(
        stale.is_empty(),
        "listed fields the schema no longer has: {stale:?}"
    );
    let mut missing_tests = Vec::new();
    for (path, acts, file, test) in FIELDS {
        let text = std::fs::read_to_string(repository_root().join(file))
            .unwrap_or_else(|error| panic!("{path}: {file}: {error}"));
        let Some(body) = test_body(&text, test) else {
            missing_tests.push(format!("{path} ({acts:?}): no `fn {test}` in {file}"));
            continue;
        };
        // The test names the field it stands for (as JSON, or as the Rust
        // field): an entry cannot point at a test about something else.
        let field = path.rsplit(['.', ']']).next().unwrap_or_default();
        let field = field.trim_start_matches('$');
        let rust_name = snake_case(field);
        if !field.is_empty() && !body.contains(field) && !body.contains(&rust_name) {
            missing_tests.push(format!(
                "{path} ({acts:?}): `fn {test}` in {file} never names `{field}`"
            ));
        }
    }
    assert!(missing_tests.is_empty(), "{missing_tests:#?}");
}

#[test]
fn the_walk_finds_a_field_added_without_a_test() {
    let mut schema = envelope_schema();
    schema["properties"]["newField"] = json!({"type": "string"});
    schema["$defs"]["EnvelopeConstraints"]["properties"]["newLimit"] = json!({"type": "integer"});
    let paths = property_paths(&schema);
    let listed: BTreeSet<String> = FIELDS.iter().map(|(path, ..)| path.to_string()).collect();
    let unlisted: Vec<&String> = paths.difference(&listed).collect();
    assert_eq!(unlisted, ["$.constraints.newLimit", "$.newField"]);
}

#[test]
fn every_field_that_takes_any_json_is_compiled_logic_or_named_data() {
    let free = free_json_paths(&envelope_schema());
    let listed: BTreeSet<String> = FREE_JSON_FIELDS
        .iter()
        .map(|(path, _)| path.to_string())
        .collect();
    assert_eq!(
        free, listed,
        "a field that takes any JSON must be listed as JSONLogic (with the test refusing an unknown operator) or as data"
    );
    for (path, kind) in FREE_JSON_FIELDS {
        let (file, test) = match kind {
            FreeJson::Logic(file, test) => (file, test),
            FreeJson::Data(why) => {
                assert!(!why.trim().is_empty(), "{path}: say why it is data");
                continue;
            }
        };
        let text = std::fs::read_to_string(repository_root().join(file)).unwrap();
        let body =
            test_body(&text, test).unwrap_or_else(|| panic!("{path}: no `fn {test}` in {file}"));
        let field = path.rsplit(['.', ']']).next().unwrap_or_default();
        assert!(
            body.contains("operator") && body.contains(field),
            "{path}: `fn {test}` must refuse an unknown operator in `{field}`"
        );
    }
}

#[test]
fn the_walk_finds_a_new_field_that_takes_any_json() {
    let mut schema = envelope_schema();
    schema["$defs"]["EnvelopeConstraints"]["properties"]["newRule"] = json!(true);
    let listed: BTreeSet<String> = FREE_JSON_FIELDS
        .iter()
        .map(|(path, _)| path.to_string())
        .collect();
    let free = free_json_paths(&schema);
    let unlisted: Vec<&String> = free.difference(&listed).collect();
    assert_eq!(unlisted, ["$.constraints.newRule"]);
}
