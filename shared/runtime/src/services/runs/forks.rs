//! Forks and a run's history (`baton_core::engine::fork_run`): the
//! checkpoints a run can be forked from, read off its event log, and the
//! new run a fork creates. The source run is only read.

use std::collections::BTreeMap;

use baton_core::engine::{ForkChanges, ForkPoint, NewRunIdentity, fork_run};
use baton_core::event::EventType;

use super::{RunService, SubmittedRun};
use crate::error::RuntimeError;

/// One point of a run's history a fork can start from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    /// The frame that marks it (fork with `{"eventId": …}`).
    pub event_id: u64,
    /// `plan` (a plan version was generated or updated) or `node` (a
    /// node completed).
    pub kind: &'static str,
    pub plan_version: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
}

impl RunService {
    /// The run's checkpoints, oldest first: each plan version and each
    /// node's completion. `RunNotFound` for a run the tenant does not have.
    pub async fn history(
        &self,
        tenant_id: &str,
        run_id: &str,
    ) -> Result<Vec<Checkpoint>, RuntimeError> {
        if self.store.load_run(tenant_id, run_id).await?.is_none() {
            return Err(RuntimeError::RunNotFound {
                path: "runId".into(),
                run_id: run_id.into(),
            });
        }
        let frames = self.read_all_events_after(tenant_id, run_id, 0).await?;
        Ok(frames
            .iter()
            .filter_map(|frame| {
                let kind = match frame.event_type {
                    EventType::PlanGenerated | EventType::PlanUpdated => "plan",
                    EventType::NodeComplete => "node",
                    _ => return None,
                };
                Some(Checkpoint {
                    event_id: frame.id,
                    kind,
                    plan_version: frame.plan_version,
                    node_id: (kind == "node").then(|| frame.node_id.clone()).flatten(),
                })
            })
            .collect())
    }

    /// Creates the run forked from `run_id` at `point` with `changes`, and
    /// sends its first steps. A refused fork is `InvalidInput` naming the
    /// request's path; nothing is written then.
    pub async fn fork(
        &self,
        tenant_id: &str,
        run_id: &str,
        point: ForkPoint,
        changes: &ForkChanges,
    ) -> Result<SubmittedRun, RuntimeError> {
        let Some(source) = self.store.load_run(tenant_id, run_id).await? else {
            return Err(RuntimeError::RunNotFound {
                path: "runId".into(),
                run_id: run_id.into(),
            });
        };
        self.check_inputs(&changes.inputs)?;
        let current_version = source.state.plan.as_ref().map(|plan| plan.plan_version);
        let frames = self.read_all_events_after(tenant_id, run_id, 0).await?;
        if let ForkPoint::EventId(event_id) = point
            && !frames.iter().any(|frame| frame.id == event_id)
        {
            return Err(RuntimeError::InvalidInput {
                path: "$.at.eventId".into(),
                message: format!("the run has no frame {event_id}"),
            });
        }
        let completed_at: BTreeMap<String, u64> = frames
            .iter()
            .filter(|frame| frame.event_type == EventType::NodeComplete)
            .filter(|frame| Some(frame.plan_version) == current_version)
            .filter_map(|frame| frame.node_id.clone().map(|node_id| (node_id, frame.id)))
            .collect();
        let new_run_id = self.ids.new_id("run");
        let identity = NewRunIdentity {
            run_id: new_run_id.clone(),
            tenant_id: tenant_id.to_string(),
            correlation_id: self.ids.new_id("corr"),
            thread_id: source.state.thread_id.clone(),
        };
        let engine = self.engine();
        let decision = fork_run(
            &source.state,
            &completed_at,
            point,
            changes,
            identity,
            self.clock.now(),
            &engine,
        )
        .map_err(|refused| RuntimeError::InvalidInput {
            path: refused.path,
            message: refused.message,
        })?;
        self.store
            .create_run(
                &decision.state,
                decision.events,
                decision.outbox.clone(),
                None,
            )
            .await?;
        self.relay.send(&decision.outbox).await?;
        Ok(SubmittedRun {
            run_id: new_run_id,
            thread_id: decision.state.thread_id,
            status: decision.state.status,
            deduplicated: false,
            resumed: false,
        })
    }
}
