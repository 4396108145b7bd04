//! What the hooks rendering needs beyond the stored frames: a model's
//! system instructions live in the plan, not in each `node_start` (a frame
//! per node would hold them once per run), so a `node_start` rendered as
//! `provider:request` gets them filled in from the run's plan when read.

use baton_core::event::{EventFrame, EventType};

use super::RunService;

impl RunService {
    /// Fills in an AI or agent `node_start`'s `instructions` from the
    /// run's plan (the version the frame was written under, if the run
    /// still has it). Other frames, and a run or node no longer found, are
    /// left as they are.
    pub async fn fill_model_instructions(&self, tenant_id: &str, frame: &mut EventFrame) {
        if frame.event_type != EventType::NodeStart {
            return;
        }
        let (Some(node_id), Some(payload)) = (&frame.node_id, frame.payload.as_mut()) else {
            return;
        };
        let is_model = matches!(payload["executorType"].as_str(), Some("ai" | "agent"));
        if !is_model || !payload["instructions"].is_null() {
            return;
        }
        let Ok(Some(stored)) = self.store.load_run(tenant_id, &frame.run_id).await else {
            return;
        };
        let Some(plan) = stored.state.plan.as_ref() else {
            return;
        };
        if plan.plan_version != frame.plan_version {
            return;
        }
        if let Some(node) = plan.node(node_id) {
            payload["instructions"] = serde_json::Value::String(node.instructions.to_string());
        }
    }
}
