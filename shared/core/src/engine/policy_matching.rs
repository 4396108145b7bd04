//! Which runtime policies an occurrence fires: the trigger as it happens
//! (`Occurrence`), what a condition reads (the node's output fields, `$node`,
//! `$metrics`; `attempt` and `violations` for a failed attempt), and the
//! conditions that cannot be read (a name the data lacks, an evaluation
//! error), which `policy.rs` says in a `warning` instead of silently not
//! firing. Pure: reads the run state, decides nothing.

use serde_json::{Map, Value, json};

use crate::basics::schema::SchemaViolation;
use crate::contracts::policies::{NodeSelector, PolicyTrigger, RuntimePolicy};
use crate::planning::plan::PlanNode;
use crate::state::run::{NodeStatus, RunState};
use crate::wire::frames::{self, TriggerDetails};

/// A trigger as it happens, with what conditions may read.
pub(super) enum Occurrence<'a> {
    Start,
    NodeComplete {
        node: &'a PlanNode,
        output: &'a Value,
    },
    ValidationFail {
        node: &'a PlanNode,
        attempt: u32,
        violations: &'a [SchemaViolation],
    },
    /// An `onTimeout` policy's timer came due (`node`: a human task's SLA).
    Timeout {
        policy_id: Option<&'a str>,
        node: Option<&'a PlanNode>,
    },
    Manual {
        policy_id: &'a str,
    },
    /// A budget was used up before `node`'s model call.
    BudgetExceeded {
        node: &'a PlanNode,
        report: &'a frames::BudgetReport,
    },
}

/// The run metrics conditions and `onMetricBelow` read.
pub fn run_metrics(state: &RunState) -> Map<String, Value> {
    let usage = state.total_usage();
    let completed = state
        .nodes
        .values()
        .filter(|record| record.status() == NodeStatus::Completed)
        .count();
    let mut metrics = Map::new();
    metrics.insert("nodesCompleted".into(), json!(completed));
    metrics.insert("nodesTotal".into(), json!(state.nodes.len()));
    metrics.insert("promptTokens".into(), json!(usage.prompt_tokens));
    metrics.insert("completionTokens".into(), json!(usage.completion_tokens));
    metrics.insert(
        "totalTokens".into(),
        json!(usage.prompt_tokens + usage.completion_tokens),
    );
    if let Some(bundle) = &state.plan_diagnostics {
        metrics.insert("satisfactionScore".into(), json!(bundle.satisfaction_score));
    }
    if let Some(observed) = state.observed_satisfaction {
        metrics.insert("observedSatisfaction".into(), json!(observed));
    }
    metrics
}

fn selector_matches(selector: Option<&NodeSelector>, node: &PlanNode) -> bool {
    let Some(selector) = selector else {
        return true;
    };
    selector
        .node_id
        .as_deref()
        .is_none_or(|id| id == node.node_id)
        && selector
            .kind
            .as_deref()
            .is_none_or(|kind| kind == node.kind.as_str())
        && selector
            .capability_id
            .as_deref()
            .is_none_or(|id| id == node.capability_id)
        && selector
            .derived
            .is_none_or(|derived| derived == node.derived)
}

fn node_view(node: &PlanNode) -> Value {
    json!({"nodeId": node.node_id, "capabilityId": node.capability_id, "kind": node.kind.as_str()})
}

/// The data a node trigger's condition reads: the node's output fields at
/// the top level, plus `$node` and `$metrics`.
fn condition_data(state: &RunState, node: &PlanNode, fields: Map<String, Value>) -> Value {
    let mut data = fields;
    data.insert("$node".into(), node_view(node));
    data.insert("$metrics".into(), Value::Object(run_metrics(state)));
    Value::Object(data)
}

fn condition_holds(condition: Option<&Value>, data: impl FnOnce() -> Value) -> bool {
    condition.is_none_or(|rule| crate::basics::logic::holds(rule, &data()))
}

/// Why `rule` cannot be read over `data`: a name it reads that `data` does
/// not have at the top level, or an evaluation error. `None` when it reads.
fn unreadable(rule: &Value, data: &Value) -> Option<String> {
    let missing: Vec<String> = crate::basics::logic::variables_read(rule)
        .into_iter()
        .filter(|read| !read.has_default && data.get(read.root()).is_none())
        .map(|read| format!("`{}`", read.name))
        .collect();
    if !missing.is_empty() {
        let mut present: Vec<String> = data
            .as_object()
            .map(|fields| fields.keys().map(|key| format!("`{key}`")).collect())
            .unwrap_or_default();
        present.sort();
        return Some(format!(
            "reads {}, which this node's data does not have (it has {})",
            missing.join(", "),
            present.join(", ")
        ));
    }
    crate::basics::logic::evaluate(rule, data)
        .err()
        .map(|error| format!("failed to evaluate: {error}"))
}

/// The node policies `occurrence` selects whose condition cannot be read
/// over its data, as (index in the envelope, policy id, why): each is said
/// in a `warning` instead of silently not firing.
pub(super) fn unreadable_conditions(
    state: &RunState,
    occurrence: &Occurrence<'_>,
) -> Vec<(usize, String, String)> {
    let mut found = Vec::new();
    for (index, policy) in state.envelope.policies.runtime.iter().enumerate() {
        if !policy.enabled {
            continue;
        }
        let data = match (&policy.trigger, occurrence) {
            (
                PolicyTrigger::OnNodeComplete {
                    selector,
                    condition: Some(_),
                },
                Occurrence::NodeComplete { node, output },
            ) if selector_matches(selector.as_ref(), node) => {
                let fields = output.as_object().cloned().unwrap_or_default();
                condition_data(state, node, fields)
            }
            (
                PolicyTrigger::OnValidationFail {
                    selector,
                    condition: Some(_),
                },
                Occurrence::ValidationFail {
                    node,
                    attempt,
                    violations,
                },
            ) if selector_matches(selector.as_ref(), node) => {
                let mut fields = Map::new();
                fields.insert("attempt".into(), json!(attempt));
                fields.insert("violations".into(), json!(violations));
                condition_data(state, node, fields)
            }
            _ => continue,
        };
        if let Some(reason) = policy
            .trigger
            .condition()
            .and_then(|rule| unreadable(rule, &data))
        {
            found.push((index, policy.id.clone(), reason));
        }
    }
    found
}

/// A metric's value: a run metric by name, else a number at that dotted
/// path in the completed node's output.
fn metric_value(state: &RunState, metric: &str, output: Option<&Value>) -> Option<f64> {
    if let Some(value) = run_metrics(state).get(metric).and_then(Value::as_f64) {
        return Some(value);
    }
    let mut current = output?;
    for segment in metric.split('.') {
        current = current.get(segment)?;
    }
    current.as_f64()
}

/// The policies `occurrence` fires, in envelope order, with their trigger
/// details and firing keys. Pure: the table tests call it directly.
pub(super) fn matching(
    state: &RunState,
    occurrence: &Occurrence<'_>,
) -> Vec<(RuntimePolicy, TriggerDetails, String)> {
    let node_details = |kind: &str, node: &PlanNode| TriggerDetails {
        kind: kind.to_string(),
        node_id: Some(node.node_id.clone()),
        capability_id: Some(node.capability_id.clone()),
        ..TriggerDetails::default()
    };
    let mut fired = Vec::new();
    for policy in state.envelope.policies.runtime.iter().filter(|p| p.enabled) {
        let found = match (&policy.trigger, occurrence) {
            (PolicyTrigger::OnStart, Occurrence::Start) => Some((
                TriggerDetails {
                    kind: "onStart".into(),
                    ..TriggerDetails::default()
                },
                "start".to_string(),
            )),
            (
                PolicyTrigger::OnNodeComplete {
                    selector,
                    condition,
                },
                Occurrence::NodeComplete { node, output },
            ) if selector_matches(selector.as_ref(), node)
                && condition_holds(condition.as_ref(), || {
                    let fields = output.as_object().cloned().unwrap_or_default();
                    condition_data(state, node, fields)
                }) =>
            {
                Some((
                    node_details("onNodeComplete", node),
                    format!("node:{}", node.node_id),
                ))
            }
            (
                PolicyTrigger::OnValidationFail {
                    selector,
                    condition,
                },
                Occurrence::ValidationFail {
                    node,
                    attempt,
                    violations,
                },
            ) if selector_matches(selector.as_ref(), node)
                && condition_holds(condition.as_ref(), || {
                    let mut fields = Map::new();
                    fields.insert("attempt".into(), json!(attempt));
                    fields.insert("violations".into(), json!(violations));
                    condition_data(state, node, fields)
                }) =>
            {
                Some((
                    node_details("onValidationFail", node),
                    format!("validation:{}:{attempt}", node.node_id),
                ))
            }
            (
                PolicyTrigger::OnMetricBelow { metric, threshold },
                Occurrence::NodeComplete { node, output },
            ) => metric_value(state, metric, Some(output))
                .filter(|value| value < threshold)
                .map(|value| {
                    let mut details = node_details("onMetricBelow", node);
                    details.metric = Some(metric.clone());
                    details.value = Some(value);
                    details.threshold = Some(*threshold);
                    (details, format!("metric:{}", node.node_id))
                }),
            (PolicyTrigger::OnTimeout { .. }, Occurrence::Timeout { policy_id, node }) => {
                // A policy timer fires its own policy; a task SLA fires the
                // first `onTimeout` policy (the caller takes one).
                let own = policy_id.is_none_or(|id| id == policy.id);
                own.then(|| {
                    let details = match node {
                        Some(node) => node_details("onTimeout", node),
                        None => TriggerDetails {
                            kind: "onTimeout".into(),
                            ..TriggerDetails::default()
                        },
                    };
                    let key = node.map_or("timeout".to_string(), |node| {
                        format!("sla:{}", node.node_id)
                    });
                    (details, key)
                })
            }
            (
                PolicyTrigger::OnBudgetExceeded { budget },
                Occurrence::BudgetExceeded { node, report },
            ) if budget.path() == report.field => {
                let mut details = node_details("onBudgetExceeded", node);
                details.metric = Some(report.field.clone());
                details.value = Some(report.spent);
                details.threshold = Some(report.limit);
                // Once per budget's worth: after an approval it may fire again.
                let grants = state.governance.budget_grants.get(&report.field).copied();
                Some((
                    details,
                    format!("budget:{}:{}", report.field, grants.unwrap_or(0)),
                ))
            }
            (PolicyTrigger::Manual, Occurrence::Manual { policy_id })
                if *policy_id == policy.id =>
            {
                Some((
                    TriggerDetails {
                        kind: "manual".into(),
                        ..TriggerDetails::default()
                    },
                    format!("manual:{}", state.governance.fired.len()),
                ))
            }
            _ => None,
        };
        if let Some((details, key)) = found
            && !state
                .governance
                .fired
                .contains(&firing_key(&policy.id, &key))
        {
            fired.push((policy.clone(), details, key));
        }
    }
    fired
}

pub(super) fn firing_key(policy_id: &str, trigger_key: &str) -> String {
    format!("{policy_id}@{trigger_key}")
}

#[cfg(test)]
mod metric_name_tests {
    #[test]
    fn every_run_metric_is_a_name_submission_accepts() {
        let mut state = super::super::tests::started_run();
        state.observed_satisfaction = Some(0.5);
        state.plan_diagnostics = Some(std::sync::Arc::new(
            crate::contracts::diagnostics::DiagnosticsBundle::satisfied(),
        ));
        let metrics = super::run_metrics(&state);
        for name in metrics.keys() {
            assert!(
                crate::contracts::policies::RUN_METRIC_NAMES.contains(&name.as_str()),
                "`{name}` is written but refused at submission"
            );
        }
        assert_eq!(
            metrics.len(),
            crate::contracts::policies::RUN_METRIC_NAMES.len()
        );
    }
}
