//! Before a node step: whether the node's capability is still alive. A
//! registry file's capability always is (nothing is looked up); a tenant's
//! registration is active only while its heartbeat is within its timeout,
//! and not at all once deregistered. An inactive one is handed to the
//! engine (`EngineContext::unavailable_capabilities`), which escalates the
//! node without calling it.

use std::collections::BTreeSet;

use baton_core::planning::normalization::is_normalization_node;
use baton_core::planning::plan::NodeExecutor;
use baton_core::state::run::{RunState, StepCommand};

use super::StepService;
use crate::error::RuntimeError;

impl StepService {
    /// The capability of `command`'s node when it is a registration that is
    /// not active now; empty for any other step.
    pub(super) async fn unavailable_capability(
        &self,
        state: &RunState,
        command: &StepCommand,
    ) -> Result<BTreeSet<String>, RuntimeError> {
        let StepCommand::ExecuteNode { node_id, .. } = command else {
            return Ok(BTreeSet::new());
        };
        let Some(node) = state.plan.as_ref().and_then(|plan| plan.node(node_id)) else {
            return Ok(BTreeSet::new());
        };
        // The orchestrator's own nodes (a join, a normalization, a chat
        // run's agent) and the registry files' capabilities are not
        // registrations: nothing to look up.
        let orchestrator_made = node.builtin().is_some()
            || matches!(node.executor, NodeExecutor::Chat(_))
            || is_normalization_node(node);
        if orchestrator_made || self.registry.capability(&node.capability_id).is_some() {
            return Ok(BTreeSet::new());
        }
        self.capabilities
            .inactive_among(&state.tenant_id, &[node.capability_id.as_str()])
            .await
    }
}
