//! What a run remembers about its governance: which runtime policies fired,
//! the human request it may be held on (an approval or a clarifying
//! question), an operator pause, the clarifications answered so far, and the
//! durable timers (human task SLAs, `onTimeout` policies) it waits for.
//!
//! All of it lives in the run state, so a hold survives any process and a
//! resume continues from the stored snapshot without re-planning.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::basics::instant::Instant;
use crate::contracts::policies::PolicyAction;

/// The run's governance record (empty for a run no policy touched).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Governance {
    /// `{policyId}@{triggerKey}` of every firing: a policy fires once per
    /// trigger key (the run start, a node, the timeout), so a replan that
    /// re-runs a node cannot loop.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub fired: BTreeSet<String>,
    /// Why nothing new is dispatched, if anything holds the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<Hold>,
    /// Hold actions that fired while another hold was pending; applied in
    /// order when it is released.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deferred: Vec<DeferredAction>,
    /// Human requests issued so far (numbers the next request id).
    #[serde(default)]
    pub requests_issued: u32,
    /// Clarifying questions and their answers (`runContext.hitlClarifications`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clarifications: Vec<ClarificationEntry>,
    /// Durable timers by id; a timer fires through a delayed step message.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub timers: BTreeMap<String, Timer>,
    /// Drafts a reviewer scored under `constraints.qualityThreshold`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drafts: Vec<DraftRecord>,
    /// Nodes that handed their facets on (their model kept failing, or
    /// their attempts ran out), in order: what a person who takes the
    /// facets over is told.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub escalations: Vec<EscalationRecord>,
    /// Revisions that feedback asked for, in order (at most
    /// `constraints.maxRevisions`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub feedback_rounds: Vec<FeedbackRound>,
    /// The budgets (`$.constraints.maxCostUsd`, …) whose 80% warning was
    /// written: each is said once.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub budgets_warned: BTreeSet<String>,
    /// Approvals an `onBudgetExceeded` policy obtained, by budget field:
    /// each allows another budget's worth.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub budget_grants: BTreeMap<String, u32>,
}

/// A feedback item's `facet` naming the whole output.
pub const FEEDBACK_WHOLE_OUTPUT: &str = "*";

/// One revision feedback asked for: who gave it in which version, its open
/// items, and the nodes it re-runs (the next version's requests and tasks
/// for them carry the items that concern them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FeedbackRound {
    pub plan_version: u32,
    pub from_node_id: String,
    pub items: Vec<serde_json::Value>,
    pub revised_nodes: Vec<String>,
}

/// A node that handed its facets to the next capability, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EscalationRecord {
    /// The plan version the node failed in.
    pub plan_version: u32,
    pub node_id: String,
    pub capability_id: String,
    /// The facets it was to produce.
    pub output_facets: Vec<String>,
    /// What went wrong (`model_failed` or `attempts_exhausted`).
    pub trigger: String,
    /// The failure in words, with the provider's error or the last violations.
    pub failure: String,
}

impl Governance {
    /// The latest escalation whose facets `output_facets` takes over.
    pub fn escalation_taken_over_by(&self, output_facets: &[String]) -> Option<&EscalationRecord> {
        self.escalations.iter().rev().find(|record| {
            record
                .output_facets
                .iter()
                .any(|facet| output_facets.contains(facet))
        })
    }
}

/// One reviewed draft: its score and what it consisted of.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DraftRecord {
    pub plan_version: u32,
    pub review_node_id: String,
    /// Normalised to 0–1.
    pub score: f64,
    /// The reviewer's answer: the next draft's revision notes.
    pub review: std::sync::Arc<serde_json::Value>,
    /// The reviewed nodes' outputs, so the best draft can be delivered.
    pub outputs: BTreeMap<String, std::sync::Arc<serde_json::Value>>,
    /// The reviewer's per-criterion verdicts on this draft, when it gives them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acceptance_report: Option<serde_json::Value>,
    /// What the draft failed besides its score: acceptance criteria the
    /// reviewer marked `pass: false`, `constraints.mustInclude` terms it
    /// lacks. A draft with any is below the threshold whatever its score;
    /// the next draft's revision notes carry them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unmet: Vec<String>,
}

impl Governance {
    pub fn is_empty(&self) -> bool {
        self == &Governance::default()
    }

    /// The pending human request, if the run is held on one.
    pub fn pending_request(&self) -> Option<&HitlRequest> {
        match &self.hold {
            Some(Hold::Request(request)) => Some(request),
            _ => None,
        }
    }
}

/// Why a run dispatches nothing new (work already dispatched finishes).
/// Tagged `hold` (a request has a `kind` of its own).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "hold", rename_all = "snake_case")]
pub enum Hold {
    /// Waiting for a person to approve, reject or answer.
    Request(Box<HitlRequest>),
    /// Paused by a policy; `run.resume` continues without re-planning.
    Paused {
        #[serde(rename = "policyId")]
        policy_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

/// An approval request or a clarifying question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HitlKind {
    Approval,
    Clarify,
}

/// A request to a person that holds the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HitlRequest {
    /// `{runId}:hitl:{n}`.
    pub request_id: String,
    pub kind: HitlKind,
    /// The policy that asked (approvals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_id: Option<String>,
    /// The node whose output (approval) or question (clarify) this is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_node_id: Option<String>,
    pub operator_prompt: String,
    /// What approval does (none: resume).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approve_action: Option<PolicyAction>,
    /// What rejection does (none: fail the run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reject_action: Option<PolicyAction>,
    /// Who may decide an approval (its policy's `approvers`); none: anyone
    /// who may decide approvals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvers: Option<crate::contracts::assignment::Assignment>,
    /// The pending node's contract and output: what a person is approving
    /// or answering about, kept with the request (as its `hitl_request`
    /// frame said it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract_summary: Option<ContractSummary>,
    #[serde(with = "crate::basics::instant::rfc3339")]
    #[schemars(with = "String")]
    pub created_at: Instant,
}

/// The contract of the node a request is about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContractSummary {
    pub capability_id: String,
    pub input_facets: Vec<String>,
    pub output_facets: Vec<String>,
    pub input_schema: serde_json::Value,
    pub output_schema: serde_json::Value,
    /// The node's output when it has one (what an approval is about).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<serde_json::Value>,
}

/// A hold action that waits behind the pending hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeferredAction {
    pub policy_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    pub action: PolicyAction,
}

/// One clarifying question a node asked, and its answer once given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClarificationEntry {
    pub node_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability_id: Option<String>,
    pub question_id: String,
    pub question: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    #[serde(with = "crate::basics::instant::rfc3339")]
    #[schemars(with = "String")]
    pub created_at: Instant,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::basics::instant::rfc3339_option"
    )]
    #[schemars(with = "Option<String>")]
    pub answered_at: Option<Instant>,
}

/// A durable timer: a delayed step message fires it at `due_at`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Timer {
    /// RFC 3339 on the wire.
    #[serde(with = "crate::basics::instant::rfc3339")]
    #[schemars(with = "String")]
    pub due_at: Instant,
    pub purpose: TimerPurpose,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TimerPurpose {
    /// A human task's SLA: unanswered by then, the run fails (or an
    /// `onTimeout` policy fires).
    HumanTaskSla {
        #[serde(rename = "nodeId")]
        node_id: String,
        attempt: u32,
    },
    /// A panel round's `roundTimeout`: judges not heard from by then are
    /// left out of the round.
    PanelRound {
        #[serde(rename = "nodeId")]
        node_id: String,
        attempt: u32,
        round: u32,
    },
    /// An agent session's watchdog: still running by then, it ends
    /// incomplete.
    AgentWatchdog {
        #[serde(rename = "nodeId")]
        node_id: String,
        attempt: u32,
    },
    /// A parked human task announced again (its capability's
    /// `assignmentDefaults.maxNotifications`): `sent` announcements so far.
    TaskReminder {
        #[serde(rename = "nodeId")]
        node_id: String,
        attempt: u32,
        sent: u32,
    },
    /// An `onTimeout` policy, measured from the run's first plan.
    PolicyTimeout {
        #[serde(rename = "policyId")]
        policy_id: String,
    },
    /// `constraints.maxDurationSeconds`, measured from the run's
    /// submission: at 80% a warning, at the end the run stops.
    RunDeadline {
        /// The 80% mark (a warning), not the end.
        #[serde(default, rename = "nearlySpent")]
        nearly_spent: bool,
    },
}

/// The timer id of a human task's SLA.
pub fn human_sla_timer_id(node_id: &str, attempt: u32) -> String {
    format!("sla:{node_id}:{attempt}")
}

/// The timer id of a human task's next reminder.
pub fn task_reminder_timer_id(node_id: &str, attempt: u32) -> String {
    format!("remind:{node_id}:{attempt}")
}

/// The timer id of the run's `maxDurationSeconds` deadline (or its 80% mark).
pub fn deadline_timer_id(nearly_spent: bool) -> String {
    if nearly_spent {
        "deadline:80".into()
    } else {
        "deadline".into()
    }
}

/// The timer id of an `onTimeout` policy.
pub fn policy_timer_id(policy_id: &str) -> String {
    format!("policy:{policy_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_run_survives_its_store() {
        let mut governance = Governance {
            hold: Some(Hold::Request(Box::new(HitlRequest {
                request_id: "run:hitl:1".into(),
                kind: HitlKind::Clarify,
                policy_id: None,
                pending_node_id: Some("node_1".into()),
                operator_prompt: "Which market?".into(),
                approve_action: Some(PolicyAction::Pause { reason: None }),
                reject_action: None,
                approvers: None,
                contract_summary: Some(ContractSummary {
                    capability_id: "plan.brief".into(),
                    input_facets: vec!["notes".into()],
                    output_facets: vec!["brief".into()],
                    input_schema: serde_json::json!({"type": "object"}),
                    output_schema: serde_json::json!({"type": "object"}),
                    output: None,
                }),
                created_at: Instant::parse_rfc3339("2026-01-01T00:00:00.000Z").unwrap(),
            }))),
            ..Governance::default()
        };
        governance.timers.insert(
            human_sla_timer_id("node_2", 1),
            Timer {
                due_at: Instant::parse_rfc3339("2026-01-01T00:15:00.000Z").unwrap(),
                purpose: TimerPurpose::HumanTaskSla {
                    node_id: "node_2".into(),
                    attempt: 1,
                },
            },
        );
        let stored = serde_json::to_string(&governance).unwrap();
        let loaded: Governance = serde_json::from_str(&stored).unwrap();
        assert_eq!(loaded, governance);
        let paused = Governance {
            hold: Some(Hold::Paused {
                policy_id: "p".into(),
                reason: Some("later".into()),
            }),
            ..Governance::default()
        };
        let stored = serde_json::to_string(&paused).unwrap();
        assert_eq!(serde_json::from_str::<Governance>(&stored).unwrap(), paused);
    }
}
