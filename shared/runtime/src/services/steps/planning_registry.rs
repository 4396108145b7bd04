//! The registry a step is decided against, and, for a plan, the
//! candidates' relevance to the run's objective.
//!
//! A plan is drafted and judged against the tenant's capability snapshot
//! (the registry files plus its active registrations); once planned, nodes
//! carry their own compiled contracts, so every other step uses the
//! registry files alone. A plan ranks the candidates its policy leaves
//! level by relevance to the objective: fused with embeddings here when
//! the deployment has a model; the planner ranks by words itself otherwise.

use std::sync::Arc;

use baton_core::catalog::registry::Registry;
use baton_core::planning::relevance::relevance_query;
use baton_core::state::run::{RunState, StepCommand};

use super::StepService;
use crate::error::RuntimeError;

pub(super) struct PlanningRegistry {
    pub(super) registry: Arc<Registry>,
    /// Capability ids, best first (`None`: not a plan step, or no
    /// embedding model to fuse with).
    pub(super) relevance: Option<Vec<String>>,
}

impl StepService {
    pub(super) async fn planning_registry(
        &self,
        tenant_id: &str,
        state: &RunState,
        command: &StepCommand,
    ) -> Result<PlanningRegistry, RuntimeError> {
        match command {
            StepCommand::Plan | StepCommand::Replan { .. } => {
                let registry = Box::pin(self.capabilities.snapshot(tenant_id))
                    .await?
                    .registry;
                let relevance = Box::pin(
                    self.capabilities
                        .relevance_for_planning(&registry, relevance_query(&state.envelope)),
                )
                .await;
                Ok(PlanningRegistry {
                    registry,
                    relevance,
                })
            }
            StepCommand::ExecuteNode { .. }
            | StepCommand::AskJudge { .. }
            | StepCommand::AgentTurn { .. }
            | StepCommand::RunTool { .. }
            | StepCommand::ChildRunEnded { .. }
            | StepCommand::FireTimer { .. }
            | StepCommand::CancelRun { .. }
            | StepCommand::ReleaseThreadLane { .. }
            | StepCommand::Notify { .. }
            | StepCommand::Remember { .. } => Ok(PlanningRegistry {
                registry: self.registry.clone(),
                relevance: None,
            }),
        }
    }
}
