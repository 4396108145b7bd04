//! Decide: what a node's answer is, judged against its contracts. Nothing
//! here emits a frame, changes the run or calls another part of the engine:
//! [`judge_answer`] reads the answer, the node's compiled output contract
//! and (for a derived node) the caller's contract, and returns a
//! [`Judgement`]. What follows from it (a question asked, the budget, the
//! node completed or asked again) is governed in `node_answers`.

use serde_json::Value;

use crate::basics::error::CoreError;
use crate::basics::schema::{SchemaViolation, ValidatorCache, collect_violations, compile_schema};
use crate::contracts::content_rules::ContentRules;
use crate::contracts::contract::OutputContract;
use crate::planning::plan::PlanNode;
use crate::state::context::clarifying_question;

/// An answer, judged.
#[derive(Debug)]
pub(super) struct Judgement {
    pub verdict: Verdict,
    /// The model asked a clarifying question instead of answering (only
    /// for a node that allows it). Whether it is asked is governance's
    /// call: when it is not, the verdict stands.
    pub clarification: Option<String>,
    /// A derived node's valid answer, checked once more against the
    /// caller's contract (its findings are in the verdict).
    pub probation: Option<Probation>,
}

/// Whether the answer meets the contract.
#[derive(Debug)]
pub(super) enum Verdict {
    /// Valid JSON that meets every contract it is held to.
    Valid(Value),
    /// Not JSON, or JSON that breaks a contract (each violation names its
    /// JSON pointer and, where known, its facet).
    Broken(Vec<SchemaViolation>),
}

impl Verdict {
    pub(super) fn is_valid(&self) -> bool {
        matches!(self, Verdict::Valid(_))
    }
}

/// What the probation check of a derived node's answer found.
#[derive(Debug)]
pub(super) struct Probation {
    /// The facets the caller's contract names and the answer carries.
    pub checked: Vec<String>,
    pub violations: usize,
}

impl Probation {
    /// The finding in words, for the `derived_output_checked` warning.
    pub(super) fn found(&self) -> String {
        if self.checked.is_empty() {
            "the caller's contract names none of its facets".to_string()
        } else if self.violations == 0 {
            format!("{} meet the caller's contract", self.checked.join(", "))
        } else {
            format!(
                "{} break the caller's contract ({} violations): it is asked again",
                self.checked.join(", "),
                self.violations
            )
        }
    }
}

/// Judges an answer (parsed, or why it is not JSON) against `node`'s
/// output contract, a derived node's valid answer against
/// `caller_contract` too, and a schema-valid answer against the
/// `content_rules` that apply to the run.
pub(super) fn judge_answer(
    validators: &ValidatorCache,
    caller_contract: &OutputContract,
    node: &PlanNode,
    content_rules: &[&ContentRules],
    parsed: Result<Value, serde_json::Error>,
) -> Result<Judgement, CoreError> {
    let answer = match parsed {
        Err(not_json) => {
            return Ok(Judgement {
                verdict: Verdict::Broken(vec![SchemaViolation {
                    instance_pointer: String::new(),
                    schema_pointer: String::new(),
                    message: format!("the answer is not valid JSON: {not_json}"),
                    facet: None,
                }]),
                clarification: None,
                probation: None,
            });
        }
        Ok(answer) => answer,
    };
    let validator = validators.validator_for_key(
        &node.output_contract.schema_key,
        &node.output_contract.schema,
        "output contract",
    )?;
    let mut violations = collect_violations(&validator, &answer);
    node.output_contract.attribute_violations(&mut violations);
    let clarification = if node.allows_clarify {
        clarifying_question(&answer).map(str::to_string)
    } else {
        None
    };
    let mut probation = None;
    if node.derived && violations.is_empty() {
        let (finding, found) = probation_violations(caller_contract, node, &answer)?;
        probation = Some(finding);
        violations = found;
    }
    if violations.is_empty() {
        for rules in content_rules {
            violations.extend(rules.violations(&answer));
        }
    }
    let verdict = if violations.is_empty() {
        Verdict::Valid(answer)
    } else {
        Verdict::Broken(violations)
    };
    Ok(Judgement {
        verdict,
        clarification,
        probation,
    })
}

/// A derived capability runs outside its declared inputs: its answer is
/// held, facet by facet, to the caller's schema for that property (even
/// when a later node delivers it).
fn probation_violations(
    caller_contract: &OutputContract,
    node: &PlanNode,
    answer: &Value,
) -> Result<(Probation, Vec<SchemaViolation>), CoreError> {
    let mut violations = Vec::new();
    let mut checked = Vec::new();
    for facet in &node.output_facets {
        let (Some(schema), Some(value)) =
            (caller_contract.property_schema(facet), answer.get(facet))
        else {
            continue;
        };
        let path = format!("$.outputContract.schema.properties.{facet}");
        let validator = compile_schema(schema, &path)?;
        checked.push(facet.clone());
        violations.extend(collect_violations(&validator, value).into_iter().map(
            |mut violation| {
                violation.instance_pointer = format!("/{facet}{}", violation.instance_pointer);
                violation.facet = Some(facet.clone());
                violation
            },
        ));
    }
    let finding = Probation {
        checked,
        violations: violations.len(),
    };
    Ok((finding, violations))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::engine::tests::{engine, planned_run, registry_where_may_clarify};

    /// The test plan's node of `plan.brief`, the capability that may ask
    /// questions.
    fn brief_node(state: &crate::state::run::RunState) -> PlanNode {
        let plan = state.plan.as_ref().unwrap();
        let node = plan
            .nodes
            .iter()
            .find(|node| node.capability_id == "plan.brief");
        node.unwrap().clone()
    }

    #[test]
    fn a_judgement_reads_the_answer_and_changes_nothing() {
        let registry = registry_where_may_clarify(Some("plan.brief"));
        let validators = ValidatorCache::default();
        let context = engine(&registry, &validators);
        let state = planned_run(&context);
        let node = brief_node(&state);
        let contract = &state.envelope.output_contract;

        let parsed = serde_json::from_str::<serde_json::Value>("not JSON");
        let not_json = judge_answer(&validators, contract, &node, &[], parsed).unwrap();
        let Verdict::Broken(violations) = &not_json.verdict else {
            panic!("an answer that is not JSON is broken: {not_json:?}");
        };
        assert!(
            violations[0]
                .message
                .starts_with("the answer is not valid JSON: expected ident"),
            "{}",
            violations[0].message
        );

        let empty = judge_answer(&validators, contract, &node, &[], Ok(json!({}))).unwrap();
        let Verdict::Broken(violations) = &empty.verdict else {
            panic!("an answer without its facet is broken: {empty:?}");
        };
        assert!(
            violations
                .iter()
                .any(|violation| violation.message.contains("brief")),
            "{violations:?}"
        );

        let question = json!({"clarify": {"question": "Which audience?"}});
        let asked = judge_answer(&validators, contract, &node, &[], Ok(question)).unwrap();
        assert_eq!(
            asked.clarification.as_deref(),
            Some("Which audience?"),
            "{asked:?}"
        );
        assert!(!asked.verdict.is_valid(), "a question is not an answer");

        let valid = json!({"brief": {"text": "hello"}});
        let judged = judge_answer(&validators, contract, &node, &[], Ok(valid.clone())).unwrap();
        assert!(matches!(&judged.verdict, Verdict::Valid(answer) if *answer == valid));
        assert!(judged.clarification.is_none() && judged.probation.is_none());
    }

    #[test]
    fn probation_says_what_it_found() {
        let none = Probation {
            checked: vec![],
            violations: 0,
        };
        assert_eq!(
            none.found(),
            "the caller's contract names none of its facets"
        );
        let broken = Probation {
            checked: vec!["draft".into()],
            violations: 2,
        };
        assert_eq!(
            broken.found(),
            "draft break the caller's contract (2 violations): it is asked again"
        );
    }
}
