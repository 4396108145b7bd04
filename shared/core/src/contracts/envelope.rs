//! The task envelope: parsing with
//! JSON-path errors and the semantic checks that follow parsing.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::basics::error::CoreError;
use crate::basics::schema::compile_schema;
use crate::contracts::contract::OutputContract;
use crate::contracts::policies::TaskPolicies;

/// Run-level constraints.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EnvelopeConstraints {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality_threshold: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_depth: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acceptance_criteria: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// Revisions feedback may ask for in the run (each a new plan version
    /// re-running what the feedback names); past it, open feedback stays
    /// open with a `feedback_revisions_exhausted` warning. Default 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_revisions: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_run_id: Option<String>,
    /// The most the run may spend on model calls, in US dollars, priced by
    /// the registry's model catalog: checked before every model call (80%:
    /// a `warning`; all of it: the run ends `budget_exceeded`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    /// The longest the run may last, from its submission, in seconds: at
    /// 80% a `warning`, then the run ends `budget_exceeded` on time (a
    /// durable timer), even while a model call is in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_duration_seconds: Option<f64>,
    /// Catalog models the caller prefers for the run's model nodes, most
    /// preferred first (after a capability's own choice).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred_models: Vec<String>,
    /// Other caller constraints travel to the nodes as context.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// The canonical request payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskEnvelope {
    pub objective: String,
    #[serde(default)]
    pub inputs: Map<String, Value>,
    #[serde(default)]
    pub constraints: EnvelopeConstraints,
    pub output_contract: OutputContract,
    #[serde(default)]
    pub policies: TaskPolicies,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub special_instructions: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// Makes a re-sent submission return the same run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Caller metadata, stored and echoed, never interpreted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// Where to POST the run's completion (or wait for a person), signed
    /// with HMAC-SHA256; checked by the outbound guard when it is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_url: Option<String>,
    /// The workflow's name on the run, its listing and its trace (at most
    /// 128 characters). Left out: the output schema's `title`, else `baton`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_name: Option<String>,
    /// What the run recalls from the tenant's memory and where it
    /// remembers (`contracts::memory_use`). Left out: neither.
    // Boxed: most envelopes have none, and a run's state holds its envelope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Box<crate::contracts::memory_use::EnvelopeMemory>>,
}

/// The workflow name of a run whose envelope names none and whose output
/// schema has no `title`.
pub const DEFAULT_WORKFLOW_NAME: &str = "baton";

/// The longest `workflowName`.
pub const MAX_WORKFLOW_NAME_CHARS: usize = 128;

fn invalid(path: impl Into<String>, message: impl Into<String>) -> CoreError {
    CoreError::InvalidEnvelope {
        path: path.into(),
        message: message.into(),
    }
}

impl TaskEnvelope {
    /// Fields accepted as advisory that change nothing in this run, each
    /// as (JSON path, why): said in a `warning` `advisory_field` when the
    /// run starts, never silently dropped.
    pub fn advisory_notes(&self) -> Vec<(String, String)> {
        use crate::contracts::policies::OptimisationObjective;
        let objective = self
            .policies
            .planner_optimisation()
            .and_then(|optimisation| optimisation.objective);
        // `speed` always acts (the planner prefers capabilities making more
        // goal facets at once); `diversity` varies the list goal facets,
        // and says so when the contract has none.
        let has_list_property = self
            .output_contract
            .top_level_properties()
            .iter()
            .filter_map(|property| self.output_contract.property_schema(property))
            .any(|schema| {
                schema.get("type").and_then(Value::as_str) == Some("array")
                    || schema.get("items").is_some()
            });
        match objective {
            Some(OptimisationObjective::Diversity) if !has_list_property => vec![(
                "$.policies.planner.optimisation.objective".into(),
                "`diversity` plans several variants of each list goal facet; this output contract has no list property, so the plan is as without it".into(),
            )],
            _ => Vec::new(),
        }
    }
}

/// A serde path as a JSON path (`$`, `$.a.b[0]`).
pub fn normalise_serde_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut rendered = String::from("$");
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => rendered.push_str(&format!("[{index}]")),
            // A key a dotted path would misread (a dot, a bracket, a quote,
            // a blank) is quoted: `$["a.b"]`.
            Segment::Map { key } if needs_quoting(key) => {
                rendered.push_str(&format!("[{}]", Value::String(key.clone())));
            }
            Segment::Map { key } | Segment::Enum { variant: key } => {
                rendered.push('.');
                rendered.push_str(key);
            }
            Segment::Unknown => rendered.push_str(".?"),
        }
    }
    rendered
}

/// A deserialisation error as the JSON path of what is wrong and serde's
/// message; a missing or unknown field, which serde names only in its text,
/// is added to the path (`$.envelope`, not `$`).
pub fn located_serde_error<E: std::fmt::Display>(
    error: serde_path_to_error::Error<E>,
) -> (String, String) {
    let mut path = normalise_serde_path(error.path());
    let message = error.into_inner().to_string();
    if let Some(name) = ["missing field `", "unknown field `"]
        .iter()
        .find_map(|prefix| message.strip_prefix(prefix))
        .and_then(|rest| rest.split('`').next())
    {
        // As the path renders the key: dotted, or quoted when a dot would
        // misread it (serde may have named it already).
        let segment = if needs_quoting(name) {
            format!("[{}]", Value::String(name.to_string()))
        } else {
            format!(".{name}")
        };
        if !path.ends_with(&segment) {
            path.push_str(&segment);
        }
    }
    (path, message)
}

/// Whether `key` cannot stand in a dotted path as it is.
fn needs_quoting(key: &str) -> bool {
    key.is_empty()
        || key.chars().any(|character| {
            matches!(character, '.' | '[' | ']' | '"') || character.is_whitespace()
        })
}

impl TaskEnvelope {
    /// Parses envelope JSON text. Errors name the JSON path (`$.outputContract.schema`).
    pub fn parse_json_text(text: &str) -> Result<Self, CoreError> {
        let value: Value = serde_json::from_str(text).map_err(|error| {
            invalid(
                "$",
                format!(
                    "not JSON (line {}, column {}): {error}",
                    error.line(),
                    error.column()
                ),
            )
        })?;
        Self::parse_value(&value)
    }

    /// Parses an already-decoded JSON value.
    pub fn parse_value(value: &Value) -> Result<Self, CoreError> {
        let envelope = Self::parse_fields(value)?;
        envelope.check_semantics()?;
        Ok(envelope)
    }

    /// The envelope's fields, before [`TaskEnvelope::check_semantics`].
    fn parse_fields(value: &Value) -> Result<Self, CoreError> {
        // A `$schema` (for editors) is not part of the envelope.
        let stripped;
        let value = match value.as_object() {
            Some(fields) if fields.contains_key("$schema") => {
                let mut fields = fields.clone();
                fields.remove("$schema");
                stripped = Value::Object(fields);
                &stripped
            }
            _ => value,
        };
        // A missing or unknown field is named in the path (`$.objective`).
        let envelope: TaskEnvelope = serde_path_to_error::deserialize(value).map_err(|error| {
            let (path, message) = located_serde_error(error);
            invalid(path, message)
        })?;
        Ok(envelope)
    }

    /// [`TaskEnvelope::parse_value`], its contract schema compiled through
    /// `validators` (a schema seen before is not compiled again: callers
    /// submitting the same contract run after run skip the compile).
    pub fn parse_value_cached(
        value: &Value,
        validators: &crate::basics::schema::ValidatorCache,
    ) -> Result<Self, CoreError> {
        let envelope = Self::parse_fields(value)?;
        envelope.check_semantics_with(&|schema, path| {
            validators.validator_for(schema, path).map(|_| ())
        })?;
        Ok(envelope)
    }

    /// The run's workflow name: `workflowName`, else the output schema's
    /// `title`, else [`DEFAULT_WORKFLOW_NAME`].
    pub fn workflow_name(&self) -> &str {
        self.workflow_name
            .as_deref()
            .or_else(|| {
                self.output_contract
                    .schema
                    .get("title")
                    .and_then(Value::as_str)
                    .map(str::trim)
                    .filter(|title| !title.is_empty())
            })
            .unwrap_or(DEFAULT_WORKFLOW_NAME)
    }

    /// Checks that parsing alone cannot: a non-empty objective, a compiling
    /// contract schema, compiling JSONLogic constraints, sane numbers.
    pub fn check_semantics(&self) -> Result<(), CoreError> {
        self.check_semantics_with(&|schema, path| compile_schema(schema, path).map(|_| ()))
    }

    /// [`TaskEnvelope::check_semantics`] with the contract schema checked by
    /// `compiles`.
    fn check_semantics_with(
        &self,
        compiles: &dyn Fn(&Value, &str) -> Result<(), CoreError>,
    ) -> Result<(), CoreError> {
        if let Some(url) = &self.callback_url {
            let scheme_ok = url.starts_with("https://") || url.starts_with("http://");
            if !scheme_ok || url.len() > 2048 || url.chars().any(char::is_whitespace) {
                return Err(invalid(
                    "$.callbackUrl",
                    "the callback URL must be an absolute https:// URL (http:// only to hosts allowed for local development) of at most 2048 characters",
                ));
            }
        }
        if let Some(name) = &self.workflow_name
            && (name.trim().is_empty() || name.chars().count() > MAX_WORKFLOW_NAME_CHARS)
        {
            return Err(invalid(
                "$.workflowName",
                format!(
                    "the workflow name must be 1 to {MAX_WORKFLOW_NAME_CHARS} characters, not blank"
                ),
            ));
        }
        if let Some(memory) = &self.memory {
            memory.check()?;
        }
        if self.objective.trim().is_empty() {
            return Err(invalid(
                "$.objective",
                "the objective must be a non-empty string",
            ));
        }
        if let Some(mode) = self
            .output_contract
            .mode
            .as_deref()
            .filter(|mode| *mode != "json_schema")
        {
            return Err(invalid(
                "$.outputContract.mode",
                format!(
                    "`{mode}` is not a contract mode Baton enforces: use `json_schema` (or leave it out)"
                ),
            ));
        }
        if !self.output_contract.schema.is_object() && !self.output_contract.schema.is_boolean() {
            return Err(invalid(
                "$.outputContract.schema",
                "the contract schema must be a JSON Schema object",
            ));
        }
        compiles(&self.output_contract.schema, "$.outputContract.schema")
            .map_err(|error| invalid("$.outputContract.schema", error.to_string()))?;
        // Every JSONLogic expression compiles once here: an unknown
        // operator would make it silently false at run time.
        for (index, constraint) in self.output_contract.constraints.iter().enumerate() {
            let path = format!("$.outputContract.constraints[{index}].expr");
            crate::basics::logic::check_expression(&constraint.expr).map_err(|problem| {
                invalid(format!("{path}{}", problem.inner_path), problem.message)
            })?;
        }
        for (index, policy) in self.policies.runtime.iter().enumerate() {
            if let Some(condition) = policy.trigger.condition() {
                let path = format!("$.policies.runtime[{index}].trigger.condition");
                crate::basics::logic::check_expression(condition).map_err(|problem| {
                    invalid(format!("{path}{}", problem.inner_path), problem.message)
                })?;
            }
        }
        for (path, limit) in [
            ("$.constraints.maxCostUsd", self.constraints.max_cost_usd),
            (
                "$.constraints.maxDurationSeconds",
                self.constraints.max_duration_seconds,
            ),
        ] {
            if let Some(limit) = limit
                && !(limit.is_finite() && limit > 0.0)
            {
                return Err(invalid(path, "must be a number greater than 0"));
            }
        }
        if let Some(turns) = self
            .policies
            .turn_by_turn()
            .and_then(|policy| policy.max_turns)
            && !(1..=crate::contracts::policies::TurnByTurnPolicy::MOST_TURNS).contains(&turns)
        {
            return Err(invalid(
                "$.policies.planner.turnByTurn.maxTurns",
                "must be between 1 and 50",
            ));
        }
        if let Some(threshold) = self.constraints.quality_threshold
            && !(0.0..=1.0).contains(&threshold)
        {
            return Err(invalid(
                "$.constraints.qualityThreshold",
                "must be between 0 and 1",
            ));
        }
        if let Some(topology) = self
            .policies
            .planner
            .as_ref()
            .and_then(|planner| planner.topology.as_ref())
            && topology.variant_count == Some(0)
        {
            return Err(invalid(
                "$.policies.planner.topology.variantCount",
                "must be at least 1",
            ));
        }
        for (index, policy) in self.policies.runtime.iter().enumerate() {
            if policy.id.trim().is_empty() {
                return Err(invalid(
                    format!("$.policies.runtime[{index}].id"),
                    "must be a non-empty string",
                ));
            }
            if let crate::contracts::policies::PolicyTrigger::OnBudgetExceeded { budget } =
                &policy.trigger
            {
                if !matches!(
                    policy.action,
                    crate::contracts::policies::PolicyAction::Hitl { .. }
                ) {
                    return Err(invalid(
                        format!("$.policies.runtime[{index}].action"),
                        "an onBudgetExceeded policy parks the run for approval: its action must be `hitl` (without one, the run ends budget_exceeded)",
                    ));
                }
                if self.constraints.max_cost_usd.is_none() {
                    return Err(invalid(
                        format!("$.policies.runtime[{index}].trigger.budget"),
                        format!("the run sets no budget to exceed: set {}", budget.path()),
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"{"objective": "x", "outputContract": {"schema": {"type": "object"}}}"#;

    #[test]
    fn minimal_envelope_parses() {
        let envelope = TaskEnvelope::parse_json_text(MINIMAL).unwrap();
        assert_eq!(envelope.objective, "x");
    }

    #[test]
    fn missing_objective_names_the_root() {
        let error =
            TaskEnvelope::parse_json_text(r#"{"outputContract": {"schema": {}}}"#).unwrap_err();
        assert!(error.to_string().contains("objective"), "{error}");
    }

    #[test]
    fn wrong_type_names_the_path() {
        let error = TaskEnvelope::parse_json_text(
            r#"{"objective": "x", "specialInstructions": [1], "outputContract": {"schema": {}}}"#,
        )
        .unwrap_err();
        assert_eq!(error.path(), Some("$.specialInstructions[0]"), "{error}");
    }

    #[test]
    fn an_unknown_key_that_needs_quoting_is_named_once_and_quoted() {
        // Found by the envelope fuzz test: the key was named twice, the
        // second time unquoted (`$["nv.[]"].nv.[]`).
        let error = TaskEnvelope::parse_json_text(
            r#"{"objective": "x", "nv.[]": 1, "outputContract": {"schema": {}}}"#,
        )
        .unwrap_err();
        assert_eq!(error.path(), Some(r#"$["nv.[]"]"#), "{error}");
        let error = TaskEnvelope::parse_json_text(
            r#"{"objective": "x", "extra": 1, "outputContract": {"schema": {}}}"#,
        )
        .unwrap_err();
        assert_eq!(error.path(), Some("$.extra"), "{error}");
    }

    #[test]
    fn schema_that_does_not_compile_names_the_schema() {
        let error = TaskEnvelope::parse_json_text(
            r#"{"objective": "x", "outputContract": {"schema": {"type": "no-such-type"}}}"#,
        )
        .unwrap_err();
        assert_eq!(error.path(), Some("$.outputContract.schema"), "{error}");
    }

    #[test]
    fn goto_policy_names_the_action_path() {
        let error = TaskEnvelope::parse_json_text(
            r#"{"objective": "x", "outputContract": {"schema": {}},
                "policies": {"runtime": [{"id": "p", "trigger": {"kind": "manual"},
                                          "action": {"type": "goto", "next": "n"}}]}}"#,
        )
        .unwrap_err();
        assert_eq!(
            error.path(),
            Some("$.policies.runtime[0].action"),
            "{error}"
        );
        assert!(error.to_string().contains("replan"));
    }

    #[test]
    fn the_workflow_name_is_the_envelopes_else_the_schema_title_else_baton() {
        let named = TaskEnvelope::parse_json_text(
            r#"{"objective": "x", "workflowName": "launch-review",
                "outputContract": {"schema": {"title": "Launch", "type": "object"}}}"#,
        )
        .unwrap();
        assert_eq!(named.workflow_name(), "launch-review");
        let titled = TaskEnvelope::parse_json_text(
            r#"{"objective": "x", "outputContract": {"schema": {"title": " Launch ", "type": "object"}}}"#,
        )
        .unwrap();
        assert_eq!(titled.workflow_name(), "Launch");
        let bare = TaskEnvelope::parse_json_text(MINIMAL).unwrap();
        assert_eq!(bare.workflow_name(), DEFAULT_WORKFLOW_NAME);
        for refused in [
            "\"  \"",
            &format!("\"{}\"", "w".repeat(MAX_WORKFLOW_NAME_CHARS + 1)),
        ] {
            let error = TaskEnvelope::parse_json_text(&format!(
                r#"{{"objective": "x", "workflowName": {refused}, "outputContract": {{"schema": {{}}}}}}"#
            ))
            .unwrap_err();
            assert_eq!(error.path(), Some("$.workflowName"), "{error}");
        }
    }

    #[test]
    fn blank_objective_is_rejected() {
        let error = TaskEnvelope::parse_json_text(
            r#"{"objective": "  ", "outputContract": {"schema": {}}}"#,
        )
        .unwrap_err();
        assert_eq!(error.path(), Some("$.objective"));
    }

    #[test]
    fn invalid_jsonlogic_constraint_names_its_index() {
        let error = TaskEnvelope::parse_json_text(
            r#"{"objective": "x", "outputContract": {"schema": {},
                "constraints": [{"expr": {"no_such_operator_anywhere": [1]}, "level": "hard"}]}}"#,
        )
        .unwrap_err();
        assert_eq!(
            error.path(),
            Some("$.outputContract.constraints[0].expr"),
            "{error}"
        );
    }

    #[test]
    fn a_policy_condition_with_an_unknown_operator_is_refused_naming_its_path() {
        let error = TaskEnvelope::parse_json_text(
            r#"{"objective": "x", "outputContract": {"schema": {}},
                "policies": {"runtime": [{"id": "guard",
                  "trigger": {"kind": "onNodeComplete",
                              "condition": {"between": [{"var": "qualityScore"}, 0, 0.5]}},
                  "action": {"type": "fail"}}]}}"#,
        )
        .unwrap_err();
        assert_eq!(
            error.path(),
            Some("$.policies.runtime[0].trigger.condition"),
            "{error}"
        );
        let message = error.to_string();
        assert!(message.contains("`between`"), "{message}");
        assert!(
            message.contains("<="),
            "the three-argument form is named: {message}"
        );
        let nested = TaskEnvelope::parse_json_text(
            r#"{"objective": "x", "outputContract": {"schema": {}},
                "policies": {"runtime": [{"id": "guard",
                  "trigger": {"kind": "onValidationFail",
                              "condition": {"and": [true, {"frobnicate": [1]}]}},
                  "action": {"type": "fail"}}]}}"#,
        )
        .unwrap_err();
        assert_eq!(
            nested.path(),
            Some("$.policies.runtime[0].trigger.condition.and[1]"),
            "{nested}"
        );
    }
}
