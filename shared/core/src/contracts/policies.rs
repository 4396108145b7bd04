//! Task policies: planner policies shape the plan,
//! runtime policies are guardrails with a canonical action union. `goto` and
//! the legacy verbs are rejected with a migration hint.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// `TaskEnvelope.policies`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskPolicies {
    /// How the plan is drawn: its shape (`topology`), which capabilities
    /// may or must take part (`selection`), what it optimises
    /// (`optimisation`) and free-form directives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planner: Option<PlannerPolicy>,
    /// Guardrails while the run goes: when a trigger matches (the run's
    /// start, a node's end, a failed validation, a timeout, a metric
    /// below its floor, a budget crossed, a manual trigger), an action
    /// (replan, ask a person, fail, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runtime: Vec<RuntimePolicy>,
    /// The catch-all capability (`catchAll: true`) a failed node's facets
    /// go to when no other capability can make them; the registry's first
    /// catch-all when absent; `"none"`: no catch-all, the run fails with
    /// the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_capability: Option<String>,
    /// A person approves each derived capability's output (a capability
    /// the planner runs outside its declared inputs) before the run goes
    /// on: it becomes the runtime policy `review-derived` (a `hitl` action
    /// on `onNodeComplete` with the selector `{"derived": true}`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub review_derived: bool,
    /// Who answers the tasks of a person's capability in this run, by
    /// capability id (`{users, groups}`): it takes the place of the
    /// capability's `assignmentDefaults`.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub task_assignments:
        std::collections::BTreeMap<String, crate::contracts::assignment::Assignment>,
    /// Caller hints outside the canonical shape (the seed's sample envelopes
    /// send e.g. a persona or a voice here). Kept verbatim and handed to the
    /// planner as context; never interpreted by code.
    #[serde(flatten)]
    pub hints: Map<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlannerPolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologyPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection: Option<SelectionPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimisation: Option<OptimisationPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directives: Option<Map<String, Value>>,
    /// Turn-by-turn orchestration: instead of one whole plan, an
    /// orchestrator model decides each turn (`handoff` to one capability,
    /// `plan_update` with nodes to add, or `final`); each decision is a
    /// plan version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_by_turn: Option<TurnByTurnPolicy>,
}

/// `policies.planner.turnByTurn`: the orchestrator model decides turn by
/// turn, at most `maxTurns` decisions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnByTurnPolicy {
    /// The most decisions the orchestrator makes, 1 to 50 (default 8):
    /// past them the run finishes with what it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
}

impl TurnByTurnPolicy {
    /// Decisions when `maxTurns` is not given.
    pub const DEFAULT_MAX_TURNS: u32 = 8;
    /// The most `maxTurns` may be.
    pub const MOST_TURNS: u32 = 50;

    /// The decisions the orchestrator may make.
    pub fn max_turns(&self) -> u32 {
        self.max_turns.unwrap_or(Self::DEFAULT_MAX_TURNS)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TopologyPolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant_count: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_depth: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_kinds: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forbidden_kinds: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SelectionPolicy {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub require: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forbid: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefer: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub avoid: Vec<String>,
    /// Which mismatches with the envelope's language and format hints keep
    /// a capability out of the plan (default `language`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cutoff: Option<SelectionCutoff>,
}

/// The capability-scoring cutoff: which mismatches with the envelope's
/// hints keep a capability from being a candidate at all (below the
/// cutoff), rather than only ranking it lower.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SelectionCutoff {
    /// Declared languages none of which is hinted (the default).
    #[default]
    Language,
    /// A language mismatch, or declared formats none of which is hinted.
    Strict,
    /// Nothing: a mismatch only ranks the capability lower.
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OptimisationObjective {
    Speed,
    Quality,
    Diversity,
    TokenEfficiency,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OptimisationPolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objective: Option<OptimisationObjective>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
}

/// The run metrics an `onMetricBelow` trigger and a condition's `$metrics`
/// read (`engine::run_metrics` writes them).
pub const RUN_METRIC_NAMES: [&str; 7] = [
    "nodesCompleted",
    "nodesTotal",
    "promptTokens",
    "completionTokens",
    "totalTokens",
    "satisfactionScore",
    "observedSatisfaction",
];

/// A runtime guardrail: when `trigger` matches, request `action`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuntimePolicy {
    pub id: String,
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
    pub trigger: PolicyTrigger,
    pub action: PolicyAction,
}

fn enabled_by_default() -> bool {
    true
}

/// Static node selector (no relative navigation, §5.10).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeSelector {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability_id: Option<String>,
    /// Only derived nodes (`true`) or only declared ones (`false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub derived: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum PolicyTrigger {
    OnStart,
    OnNodeComplete {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        selector: Option<NodeSelector>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        condition: Option<Value>,
    },
    OnValidationFail {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        selector: Option<NodeSelector>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        condition: Option<Value>,
    },
    OnTimeout {
        ms: u64,
    },
    /// `metric`: a run metric ([`RUN_METRIC_NAMES`]), else a dotted path
    /// into a completed node's output whose first segment is a facet.
    OnMetricBelow {
        metric: String,
        threshold: f64,
    },
    /// A budget is used up before a node's model call: with a `hitl`
    /// action the run parks for approval instead of ending
    /// `budget_exceeded`; approval allows another budget's worth.
    OnBudgetExceeded {
        budget: BudgetField,
    },
    Manual,
}

impl PolicyTrigger {
    /// The JSONLogic condition the trigger carries, if any.
    pub fn condition(&self) -> Option<&Value> {
        match self {
            PolicyTrigger::OnNodeComplete { condition, .. }
            | PolicyTrigger::OnValidationFail { condition, .. } => condition.as_ref(),
            PolicyTrigger::OnStart
            | PolicyTrigger::OnTimeout { .. }
            | PolicyTrigger::OnMetricBelow { .. }
            | PolicyTrigger::OnBudgetExceeded { .. }
            | PolicyTrigger::Manual => None,
        }
    }

    /// The names a node trigger's condition may read besides the node's
    /// own output fields (`$node`, `$metrics`; and for `onValidationFail`,
    /// `attempt` and `violations` instead of the output).
    pub fn provided_variables(&self) -> &'static [&'static str] {
        match self {
            PolicyTrigger::OnValidationFail { .. } => {
                &["$node", "$metrics", "attempt", "violations"]
            }
            _ => &["$node", "$metrics"],
        }
    }
}

/// A budget a policy may park the run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum BudgetField {
    /// `constraints.maxCostUsd`.
    #[serde(rename = "maxCostUsd")]
    MaxCostUsd,
}

impl BudgetField {
    /// The envelope field the budget is set in, as frames name it.
    pub fn path(self) -> &'static str {
        match self {
            BudgetField::MaxCostUsd => "$.constraints.maxCostUsd",
        }
    }
}

/// The canonical action union after §5.10 (no `goto`).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PolicyAction {
    Replan {
        #[serde(skip_serializing_if = "Option::is_none")]
        rationale: Option<String>,
    },
    Hitl {
        #[serde(skip_serializing_if = "Option::is_none")]
        rationale: Option<String>,
        #[serde(rename = "approveAction", skip_serializing_if = "Option::is_none")]
        approve_action: Option<Box<PolicyAction>>,
        #[serde(rename = "rejectAction", skip_serializing_if = "Option::is_none")]
        reject_action: Option<Box<PolicyAction>>,
        /// Who may decide (users, group claims); none: anyone holding
        /// `approvals:decide`.
        #[serde(skip_serializing_if = "Option::is_none")]
        approvers: Option<crate::contracts::assignment::Assignment>,
    },
    Fail {
        #[serde(skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    Pause {
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    Emit {
        event: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        payload: Option<Map<String, Value>>,
    },
}

/// Mirror of [`PolicyAction`] used only to deserialize the canonical names
/// after the migration checks below have run.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum CanonicalActionWire {
    Replan {
        #[serde(default)]
        rationale: Option<String>,
    },
    Hitl {
        #[serde(default)]
        rationale: Option<String>,
        #[serde(default, rename = "approveAction")]
        approve_action: Option<Box<PolicyAction>>,
        #[serde(default, rename = "rejectAction")]
        reject_action: Option<Box<PolicyAction>>,
        #[serde(default)]
        approvers: Option<crate::contracts::assignment::Assignment>,
    },
    Fail {
        #[serde(default)]
        message: Option<String>,
    },
    Pause {
        #[serde(default)]
        reason: Option<String>,
    },
    Emit {
        event: String,
        #[serde(default)]
        payload: Option<Map<String, Value>>,
    },
}

/// Migration hint for an action name that is no longer canonical.
pub fn migration_hint_for_action(action_type: &str) -> Option<&'static str> {
    match action_type {
        "goto" => Some(
            "the `goto` action was removed: plan topology is immutable at run time; use {\"type\": \"replan\"} to request a new plan instead",
        ),
        "hitl_pause" => Some("`hitl_pause` is now `hitl`"),
        "fail_run" => Some("`fail_run` is now `fail`"),
        "pause_run" => Some("`pause_run` is now `pause`"),
        "emit_event" => Some("`emit_event` is now `emit`"),
        _ => None,
    }
}

impl<'de> Deserialize<'de> for PolicyAction {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Value::deserialize(deserializer)?;
        let action_type = raw.get("type").and_then(Value::as_str).unwrap_or_default();
        if let Some(hint) = migration_hint_for_action(action_type) {
            return Err(D::Error::custom(format!(
                "unsupported action type `{action_type}`: {hint}"
            )));
        }
        let wire: CanonicalActionWire = serde_json::from_value(raw).map_err(D::Error::custom)?;
        Ok(match wire {
            CanonicalActionWire::Replan { rationale } => PolicyAction::Replan { rationale },
            CanonicalActionWire::Hitl {
                rationale,
                approve_action,
                reject_action,
                approvers,
            } => PolicyAction::Hitl {
                rationale,
                approve_action,
                reject_action,
                approvers,
            },
            CanonicalActionWire::Fail { message } => PolicyAction::Fail { message },
            CanonicalActionWire::Pause { reason } => PolicyAction::Pause { reason },
            CanonicalActionWire::Emit { event, payload } => PolicyAction::Emit { event, payload },
        })
    }
}

impl TaskPolicies {
    /// `policies.planner.optimisation`, if given.
    pub fn planner_optimisation(&self) -> Option<&OptimisationPolicy> {
        self.planner
            .as_ref()
            .and_then(|planner| planner.optimisation.as_ref())
    }

    /// `policies.planner.optimisation.maxTokens`: the run's token budget.
    pub fn token_budget(&self) -> Option<u64> {
        self.planner_optimisation()
            .and_then(|optimisation| optimisation.max_tokens)
    }

    pub fn planner_selection(&self) -> Option<&SelectionPolicy> {
        self.planner
            .as_ref()
            .and_then(|planner| planner.selection.as_ref())
    }

    /// `policies.planner.turnByTurn`: present when an orchestrator model
    /// decides the run turn by turn.
    pub fn turn_by_turn(&self) -> Option<&TurnByTurnPolicy> {
        self.planner
            .as_ref()
            .and_then(|planner| planner.turn_by_turn.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn goto_is_rejected_with_a_migration_hint() {
        let error = serde_json::from_value::<PolicyAction>(json!({"type": "goto", "next": "n1"}))
            .unwrap_err();
        assert!(error.to_string().contains("replan"), "{error}");
    }

    #[test]
    fn legacy_verbs_name_their_replacement() {
        let error =
            serde_json::from_value::<PolicyAction>(json!({"type": "hitl_pause"})).unwrap_err();
        assert!(error.to_string().contains("`hitl`"), "{error}");
    }

    #[test]
    fn nested_hitl_follow_ups_parse() {
        let action: PolicyAction = serde_json::from_value(json!({
            "type": "hitl", "rationale": "review",
            "approveAction": {"type": "emit", "event": "approved"},
            "rejectAction": {"type": "fail", "message": "rejected"}
        }))
        .unwrap();
        let PolicyAction::Hitl { reject_action, .. } = action else {
            unreachable!("parsed as hitl above")
        };
        assert_eq!(
            reject_action.as_deref(),
            Some(&PolicyAction::Fail {
                message: Some("rejected".into())
            })
        );
    }

    #[test]
    fn seed_example_policies_parse() {
        let policies: TaskPolicies = serde_json::from_value(json!({
            "planner": {
                "topology": {"variantCount": 3},
                "selection": {"require": ["a.b"], "forbid": ["c"], "prefer": ["d.e"]},
                "optimisation": {"objective": "quality"}
            },
            "runtime": [{
                "id": "low_quality_replan",
                "trigger": {"kind": "onNodeComplete", "selector": {"kind": "validation"},
                            "condition": {"<": [{"var": "qaFindings.overallScore"}, 0.6]}},
                "action": {"type": "replan", "rationale": "Low QA score"}
            }]
        }))
        .unwrap();
        assert_eq!(policies.runtime.len(), 1);
        assert_eq!(
            policies.planner.unwrap().topology.unwrap().variant_count,
            Some(3)
        );
    }
}
