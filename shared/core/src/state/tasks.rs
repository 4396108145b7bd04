//! Human tasks: what a person is asked to do, derived from a parked run's
//! state (a node of a human capability waiting for its output). A task's id
//! is `{runId}:{nodeId}`; its answer goes through `run.resume`. And the
//! approval request or clarifying question a held run waits on.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::records::governance::HitlRequest;

use crate::records::governance::human_sla_timer_id;
use crate::state::run::{NodeStatus, RunState};

/// One pending task of a person.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HumanTask {
    pub task_id: String,
    pub run_id: String,
    pub node_id: String,
    pub capability_id: String,
    /// The plan version to answer at (`expectedPlanVersion`).
    pub plan_version: u32,
    pub instructions: String,
    pub input_facets: Vec<String>,
    pub output_facets: Vec<String>,
    /// The JSON Schema the answer must satisfy (the node's output contract).
    pub output_schema: Value,
    /// When the task's SLA passes (RFC 3339): unanswered, the run fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due_at: Option<String>,
    /// The capability's `instructionTemplates` (UI copy), verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instruction_templates: Option<serde_json::Map<String, Value>>,
    /// The capability's `assignmentDefaults` (routing hints), verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignment_defaults: Option<serde_json::Map<String, Value>>,
    /// Who may answer it (from `assignmentDefaults`' `users`, `groups` and
    /// `role`); absent: anyone who may answer tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assigned_to: Option<Assignment>,
    /// When the task takes over the facets of a node that failed (its model
    /// kept failing, or its attempts ran out): that node and its failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalated_from: Option<crate::records::governance::EscalationRecord>,
    /// When the task runs again because feedback asked for it: the
    /// feedback items that concern it (what to revise, and why).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub feedback: Vec<Value>,
    /// How a person edits each output facet that names a widget (its
    /// registry definition's `widget`), by facet; the others get the
    /// generic form of their schema.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub widgets: std::collections::BTreeMap<String, crate::contracts::facet_widgets::FacetWidget>,
}

pub use crate::contracts::assignment::{Answerer, Assignment};

fn strings_at(defaults: &serde_json::Map<String, Value>, keys: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for key in keys {
        match defaults.get(*key) {
            Some(Value::String(text)) if !text.trim().is_empty() => {
                found.push(text.trim().to_string());
            }
            Some(Value::Array(items)) => found.extend(
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::trim)
                    .filter(|text| !text.is_empty())
                    .map(str::to_string),
            ),
            _ => {}
        }
    }
    found
}

impl Assignment {
    /// The assignment a capability's `assignmentDefaults` names (`users` or
    /// `user`; `groups`, `group`, `role` or `roles`), if any.
    pub fn of_task_surface(surface: Option<&crate::planning::plan::TaskSurface>) -> Option<Self> {
        let defaults = surface?.assignment_defaults.as_ref()?;
        let assignment = Assignment {
            users: strings_at(defaults, &["users", "user"]),
            groups: strings_at(defaults, &["groups", "group", "role", "roles"]),
        };
        (!assignment.users.is_empty() || !assignment.groups.is_empty()).then_some(assignment)
    }

    /// Whether `answerer` may answer a task so assigned.
    pub fn admits(&self, answerer: &Answerer) -> bool {
        answerer.may_answer_any_task
            || answerer
                .user
                .as_ref()
                .is_some_and(|user| self.users.contains(user))
            || answerer
                .groups
                .iter()
                .any(|group| self.groups.contains(group))
    }
}

/// The approval request or clarifying question a held run waits on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingRequest {
    pub run_id: String,
    /// The plan version to answer a clarifying question at.
    pub plan_version: u32,
    #[serde(flatten)]
    pub request: HitlRequest,
}

/// The run's pending request, if it is held on one.
pub fn pending_request(state: &RunState) -> Option<PendingRequest> {
    if state.status().is_terminal() {
        return None;
    }
    state
        .governance
        .pending_request()
        .map(|request| PendingRequest {
            run_id: state.run_id.clone(),
            plan_version: state.plan_version(),
            request: request.clone(),
        })
}

/// Who the task of `node` is for: the envelope's
/// `policies.taskAssignments` for its capability, else the capability's
/// `assignmentDefaults`; none: anyone may answer.
pub fn assignment_of(
    state: &RunState,
    node: &crate::planning::plan::PlanNode,
) -> Option<Assignment> {
    state
        .envelope
        .policies
        .task_assignments
        .get(&node.capability_id)
        .filter(|assignment| !assignment.users.is_empty() || !assignment.groups.is_empty())
        .cloned()
        .or_else(|| Assignment::of_task_surface(node.task_surface.as_ref()))
}

/// Whether `answerer` may answer the task of `node_id` (a node without an
/// assignment: anyone may); `Err` with the assignment when not.
pub fn check_assignee(
    state: &RunState,
    node_id: &str,
    answerer: &Answerer,
) -> Result<(), Assignment> {
    let assignment = state
        .plan
        .as_deref()
        .and_then(|plan| plan.node(node_id))
        .and_then(|node| assignment_of(state, node));
    match assignment {
        Some(assignment) if !assignment.admits(answerer) => Err(assignment),
        _ => Ok(()),
    }
}

/// The task id of `node_id` in `run_id`.
pub fn task_id(run_id: &str, node_id: &str) -> String {
    format!("{run_id}:{node_id}")
}

/// The run's pending human tasks, in plan order.
pub fn human_tasks(state: &RunState) -> Vec<HumanTask> {
    let Some(plan) = &state.plan else {
        return Vec::new();
    };
    if state.status().is_terminal() {
        return Vec::new();
    }
    plan.nodes
        .iter()
        .filter(|node| {
            state
                .nodes
                .get(&node.node_id)
                .is_some_and(|record| record.status() == NodeStatus::AwaitingHuman)
        })
        .map(|node| HumanTask {
            task_id: task_id(&state.run_id, &node.node_id),
            run_id: state.run_id.clone(),
            node_id: node.node_id.clone(),
            capability_id: node.capability_id.clone(),
            plan_version: state.plan_version(),
            instructions: node.instructions.to_string(),
            input_facets: node.input_facets.clone(),
            output_facets: node.output_facets.clone(),
            output_schema: node.output_contract.schema.as_ref().clone(),
            due_at: state.nodes.get(&node.node_id).and_then(|record| {
                let timer_id = human_sla_timer_id(&node.node_id, record.current_attempt);
                state
                    .governance
                    .timers
                    .get(&timer_id)
                    .map(|timer| timer.due_at.rfc3339())
            }),
            instruction_templates: node
                .task_surface
                .as_ref()
                .and_then(|surface| surface.instruction_templates.clone()),
            assignment_defaults: node
                .task_surface
                .as_ref()
                .and_then(|surface| surface.assignment_defaults.clone()),
            assigned_to: assignment_of(state, node),
            escalated_from: state
                .governance
                .escalation_taken_over_by(&node.output_facets)
                .cloned(),
            feedback: crate::state::context::feedback_for(state, node).unwrap_or_default(),
            widgets: node
                .task_surface
                .as_ref()
                .map(|surface| surface.widgets.clone())
                .unwrap_or_default(),
        })
        .collect()
}
