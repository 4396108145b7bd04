//! Forks ("time travel"): a new run that starts from a point of an earlier
//! one, reusing what it had done there, with inputs or node outputs
//! changed. The source run is not touched.
//!
//! The fork point names a plan version (the last moment it was in force)
//! or a frame (the plan version in force when it was written, up to that
//! frame). `fork_base` reads what held there off the source's event log:
//! the plan of that version (the current one from the state, an earlier one
//! from the versions kept beside the run), and each of its nodes completed
//! by then, with the output its `node_complete` carried (a node a later
//! version reused counts under the version that reused it). A corrected
//! output (`nodeOutputs`) replaces a reused node's output, checked against
//! the node's output contract. What runs again: the nodes downstream of a
//! corrected node, the nodes reading a changed input facet and those
//! downstream of them, and every node not completed at the fork point. No
//! model is called for a reused node.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Map, Value};

use super::decision::{Decision, EngineContext, NewRunIdentity};
use super::starts::start_run;
use super::step_context::StepContext;
use crate::basics::instant::Instant;
use crate::basics::schema::{collect_violations, json_path_for_pointer};
use crate::planning::plan::PlanGraph;
use crate::state::run::{NodeRecord, RunState};
use crate::wire::event::{EventFrame, EventType};
use crate::wire::frames;

/// Where a fork starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForkPoint {
    /// After every node completed under this plan version.
    PlanVersion(u32),
    /// After the frame with this id: nodes completed at or before it.
    EventId(u64),
}

/// What a fork changes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ForkChanges {
    /// Input facets set anew (each replaces the source's value).
    pub inputs: Map<String, Value>,
    /// Corrected outputs of nodes completed at the fork point.
    pub node_outputs: BTreeMap<String, Value>,
}

/// A fork refused, and where (a JSON path of the request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForkRefused {
    pub path: String,
    pub message: String,
}

fn refused(path: impl Into<String>, message: impl Into<String>) -> ForkRefused {
    ForkRefused {
        path: path.into(),
        message: message.into(),
    }
}

/// A node completed at the fork point: what its `node_complete` said.
#[derive(Debug, Clone, PartialEq)]
pub struct CompletedNode {
    pub output: Value,
    pub attempt: u32,
}

/// What held at a fork point: the plan in force and its nodes completed.
#[derive(Debug, Clone, PartialEq)]
pub struct ForkBase {
    pub plan: Arc<PlanGraph>,
    pub completed: BTreeMap<String, CompletedNode>,
}

/// What held at `point` of `source`, from its event log (`frames`, in
/// order) and the plan versions newer ones replaced (`superseded`).
pub fn fork_base(
    source: &RunState,
    frames: &[EventFrame],
    superseded: &[PlanGraph],
    point: ForkPoint,
) -> Result<ForkBase, ForkRefused> {
    let current = source
        .plan
        .clone()
        .ok_or_else(|| refused("$.at", "the run has no plan yet: nothing to fork from"))?;
    let (version, until) = match point {
        ForkPoint::PlanVersion(version) => (version, u64::MAX),
        ForkPoint::EventId(event_id) => {
            let frame = frames
                .iter()
                .find(|frame| frame.id == event_id)
                .ok_or_else(|| {
                    refused("$.at.eventId", format!("the run has no frame {event_id}"))
                })?;
            if frame.plan_version == 0 {
                return Err(refused(
                    "$.at.eventId",
                    format!("frame {event_id} is from before the run had a plan: nothing to reuse"),
                ));
            }
            (frame.plan_version, event_id)
        }
    };
    let plan = if version == current.plan_version {
        current
    } else {
        superseded
            .iter()
            .find(|plan| plan.plan_version == version)
            .cloned()
            .map(Arc::new)
            .ok_or_else(|| {
                refused(
                    "$.at.planVersion",
                    format!(
                        "the run has no plan version {version} (its versions are 1 to {})",
                        current.plan_version
                    ),
                )
            })?
    };
    // The nodes `version` took over from the one before it, completed.
    let carried: BTreeSet<String> = frames
        .iter()
        .filter(|frame| frame.event_type == EventType::PlanUpdated)
        .filter_map(|frame| frame.payload.as_ref())
        .filter(|payload| payload["version"].as_u64() == Some(u64::from(version)))
        .flat_map(|payload| {
            payload["reusedNodes"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|node| node.as_str().map(str::to_string))
        .collect();
    let mut completed = BTreeMap::new();
    for frame in frames
        .iter()
        .filter(|frame| frame.event_type == EventType::NodeComplete && frame.id <= until)
    {
        let (Some(node_id), Some(payload)) = (&frame.node_id, &frame.payload) else {
            continue;
        };
        let holds = frame.plan_version == version
            || (frame.plan_version < version && carried.contains(node_id));
        if !holds || plan.node(node_id).is_none() {
            continue;
        }
        completed.insert(
            node_id.clone(),
            CompletedNode {
                output: payload["output"].clone(),
                attempt: payload["attempt"]
                    .as_u64()
                    .and_then(|attempt| u32::try_from(attempt).ok())
                    .unwrap_or(1),
            },
        );
    }
    Ok(ForkBase { plan, completed })
}

/// The new run forked from `source` at `point` (what held there: `base`,
/// from `fork_base`) with `changes`.
pub fn fork_run(
    source: &RunState,
    base: &ForkBase,
    point: ForkPoint,
    changes: &ForkChanges,
    identity: NewRunIdentity,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Result<Decision, ForkRefused> {
    let plan = base.plan.clone();
    let reusable: BTreeSet<String> = base.completed.keys().cloned().collect();
    for (node_id, output) in &changes.node_outputs {
        let path = format!("$.nodeOutputs.{node_id}");
        let Some(node) = plan.node(node_id) else {
            return Err(refused(path, "no such node in the run's plan"));
        };
        if !reusable.contains(node_id) {
            return Err(refused(
                path,
                "the node had not completed at the fork point: it runs again, there is no output to correct",
            ));
        }
        let contract = &node.output_contract;
        let validator = engine
            .validators
            .validator_for_key(&contract.schema_key, &contract.schema, &path)
            .map_err(|error| refused(path.clone(), error.to_string()))?;
        if let Some(violation) = collect_violations(&validator, output).first() {
            return Err(refused(
                json_path_for_pointer(&path, &violation.instance_pointer),
                format!("breaks the node's output contract: {}", violation.message),
            ));
        }
    }
    // What runs again: readers of a changed input, downstream of those and
    // of every corrected node.
    let mut changed: BTreeSet<String> = plan
        .nodes
        .iter()
        .filter(|node| {
            node.input_facets
                .iter()
                .any(|facet| changes.inputs.contains_key(facet))
        })
        .map(|node| node.node_id.clone())
        .collect();
    let mut frontier: Vec<String> = changed
        .iter()
        .cloned()
        .chain(changes.node_outputs.keys().cloned())
        .collect();
    while let Some(node_id) = frontier.pop() {
        for edge in plan.edges.iter().filter(|edge| edge.from == node_id) {
            if changed.insert(edge.to.clone()) {
                frontier.push(edge.to.clone());
            }
        }
    }
    let reused: BTreeSet<String> = reusable.difference(&changed).cloned().collect();

    let mut envelope = (*source.envelope).clone();
    for (facet, value) in &changes.inputs {
        envelope.inputs.insert(facet.clone(), value.clone());
    }
    let mut decision = start_run(identity, envelope, now, source.max_node_attempts);
    decision.outbox.clear();
    let mut state = decision.state;
    state.nodes = plan
        .nodes
        .iter()
        .map(|node| {
            let record = match base.completed.get(&node.node_id) {
                Some(done) if reused.contains(&node.node_id) => {
                    let output = changes
                        .node_outputs
                        .get(&node.node_id)
                        .unwrap_or(&done.output);
                    // Reused: completed in the fork from its first step.
                    let mut record = NodeRecord::pending();
                    record.current_attempt = done.attempt;
                    record.output = Some(Arc::new(output.clone()));
                    super::lifecycle::move_node(
                        &mut record,
                        super::lifecycle::NodeTransition::Complete,
                    );
                    record
                }
                _ => NodeRecord::pending(),
            };
            (node.node_id.clone(), Arc::new(record))
        })
        .collect();
    state.plan = Some(plan.clone());
    state.plan_diagnostics = source.plan_diagnostics.clone();
    state.plan_history = source.plan_history.clone();
    state.facet_snapshot = source.facet_snapshot.clone();
    super::lifecycle::reopen_as_fork(&mut state);
    state.forked_from = Some(Box::new(crate::state::run::ForkOrigin {
        run_id: source.run_id.clone(),
        at: match point {
            ForkPoint::PlanVersion(version) => format!("planVersion {version}"),
            ForkPoint::EventId(event_id) => format!("eventId {event_id}"),
        },
        reused_nodes: reused.iter().cloned().collect(),
    }));
    let mut step = StepContext::new(state, now, engine);
    for frame in decision.events {
        step.emit(frame);
    }
    let corrected: Vec<&String> = changes.node_outputs.keys().collect();
    step.emit(frames::log(
        &step.stamp(),
        format!(
            "forked from run {} at {}: {} node(s) reused ({}), corrected: {}, run again: the rest",
            source.run_id,
            step.state()
                .forked_from
                .as_ref()
                .map_or(String::new(), |origin| origin.at.clone()),
            reused.len(),
            reused.iter().cloned().collect::<Vec<_>>().join(", "),
            if corrected.is_empty() {
                "none".to_string()
            } else {
                corrected
                    .iter()
                    .map(|node| node.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ),
    ));
    let bundle = source
        .plan_diagnostics
        .as_deref()
        .cloned()
        .unwrap_or_else(crate::contracts::diagnostics::DiagnosticsBundle::satisfied);
    let generated = frames::plan_generated(
        &frames::FrameStamp::new(now, plan.plan_version),
        &super::plan_drafts::plan_generated_payload(&plan, &bundle),
    );
    let generated = super::frame_provenance::with_provenance(step.state(), generated, None);
    step.emit(generated);
    // Each reused node's output, as a reader of this run's stream sees
    // outputs: a `node_complete`, marked reused.
    for node in plan
        .nodes
        .iter()
        .filter(|node| reused.contains(&node.node_id))
    {
        let Some(record) = step.state().nodes.get(&node.node_id) else {
            continue;
        };
        let Some(output) = record.output.clone() else {
            continue;
        };
        let completed = frames::node_complete(
            &step.stamp(),
            node,
            &frames::NodeCompletePayload {
                attempt: record.current_attempt,
                output_facets: std::borrow::Cow::Borrowed(&node.output_facets),
                output,
                usage: frames::TokenTotals::of(&Default::default()),
                model: None,
                duration_ms: None,
                cost_usd: None,
                reused: true,
                answered_by: None,
            },
        );
        step.emit(completed);
    }
    super::progress::continue_run(&mut step).map_err(|error| refused("$", error.to_string()))?;
    Ok(step.into_decision())
}
