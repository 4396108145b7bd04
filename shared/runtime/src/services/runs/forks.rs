//! Forks and a run's history (`baton_core::engine::fork_run`): the
//! checkpoints a run can be forked from, read off its event log, and the
//! new run a fork creates. The source run is only read.

use baton_core::basics::ids::RunKey;
use baton_core::engine::{ForkChanges, ForkPoint, NewRunIdentity, fork_base, fork_run};
use baton_core::wire::event::EventType;

use super::{RunService, SubmittedRun};
use crate::error::RuntimeError;
use crate::services::admission::{NewRun, TenantLimitCheck, UnsentFirstSteps};

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
        if self
            .run_log
            .load_run(RunKey::new(tenant_id, run_id))
            .await?
            .is_none()
        {
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
        let Some(source) = self
            .run_log
            .load_run(RunKey::new(tenant_id, run_id))
            .await?
        else {
            return Err(RuntimeError::RunNotFound {
                path: "runId".into(),
                run_id: run_id.into(),
            });
        };
        self.check_inputs(&changes.inputs)?;
        // A fork is a new run: the tenant's limits hold for it too, checked
        // before the source's history is read.
        let limits = self.admission.check_tenant_limits(tenant_id).await?;
        let frames = self.read_all_events_after(tenant_id, run_id, 0).await?;
        let superseded = self.superseded_plans(tenant_id, run_id).await?;
        let refused = |refused: baton_core::engine::ForkRefused| RuntimeError::InvalidInput {
            path: refused.path,
            message: refused.message,
        };
        let base = fork_base(&source.state, &frames, &superseded, point).map_err(refused)?;
        let new_run_id = self.ids.new_id("run");
        let identity = NewRunIdentity {
            run_id: new_run_id.clone(),
            tenant_id: tenant_id.to_string(),
            correlation_id: self.ids.new_id("corr"),
            thread_id: source.state.thread_id.clone(),
            trace: Some(crate::observe::run_traces::new_run_trace(None)),
            submitted_by: None,
        };
        let engine = self.engine();
        let decision = fork_run(
            &source.state,
            &base,
            point,
            changes,
            identity,
            self.clock.now(),
            &engine,
        )
        .map_err(refused)?;
        let admitted = self
            .admission
            .admit(NewRun {
                decision,
                idempotency_key: None,
                limits: TenantLimitCheck::Passed(limits),
                unsent: UnsentFirstSteps::LeftToTheSweeper,
            })
            .await?;
        Ok(SubmittedRun::from(admitted))
    }
}
