//! What the hooks rendering needs beyond the stored frames: a model's
//! system instructions live in the plan, not in each `node_start` (a frame
//! per node would hold them once per run), so a `node_start` rendered as
//! `provider:request` gets them filled in from the run's plan when read;
//! a judge's call (`progress` with `judgeCall`) gets the judge's messages
//! from its panel round, an entry beside the run.

use baton_core::basics::ids::RunKey;
use baton_core::records::entries::{EntryBody, EntryKey};
use baton_core::wire::event::{EventFrame, EventType};
use serde_json::json;

use super::RunService;

impl RunService {
    /// Fills in an AI or agent `node_start`'s `instructions` from the
    /// run's plan (the version the frame was written under, if the run
    /// still has it). Other frames, and a run or node no longer found, are
    /// left as they are.
    pub async fn fill_model_instructions(&self, tenant_id: &str, frame: &mut EventFrame) {
        if frame.event_type == EventType::Progress {
            self.fill_judge_messages(tenant_id, frame).await;
            return;
        }
        if frame.event_type != EventType::NodeStart {
            return;
        }
        let (Some(node_id), Some(payload)) = (&frame.draft.node_id, frame.draft.payload.as_mut())
        else {
            return;
        };
        let is_model = matches!(payload["executorType"].as_str(), Some("ai" | "agent"));
        if !is_model || !payload["instructions"].is_null() {
            return;
        }
        let Ok(Some(stored)) = self
            .run_log
            .load_run(RunKey::new(tenant_id, &frame.run_id))
            .await
        else {
            return;
        };
        let Some(plan) = stored.state.plan.as_ref() else {
            return;
        };
        if plan.plan_version != frame.draft.plan_version {
            return;
        }
        if let Some(node) = plan.node(node_id) {
            payload.edit(|payload| {
                payload["instructions"] = serde_json::Value::String(node.instructions.to_string());
            });
        }
    }

    /// Fills in a judge call's `messages` (`judgeCall.messages`: the
    /// judge's system prompt and question) from its panel round, kept
    /// beside the run.
    async fn fill_judge_messages(&self, tenant_id: &str, frame: &mut EventFrame) {
        let (Some(node_id), Some(payload)) = (&frame.draft.node_id, frame.draft.payload.as_mut())
        else {
            return;
        };
        let call = &payload["judgeCall"];
        let (Some(judge_id), Some(round), Some(attempt)) = (
            call["judgeId"].as_str().map(str::to_string),
            call["round"]
                .as_u64()
                .and_then(|round| u32::try_from(round).ok()),
            call["attempt"]
                .as_u64()
                .and_then(|attempt| u32::try_from(attempt).ok()),
        ) else {
            return;
        };
        let prefix = EntryKey::PanelRound {
            node_id: node_id.clone(),
            attempt,
            round,
        }
        .storage_key();
        let Ok(entries) = self
            .run_log
            .read_entries(RunKey::new(tenant_id, &frame.run_id), &prefix)
            .await
        else {
            return;
        };
        let asked = entries.iter().find_map(|entry| match &entry.body {
            EntryBody::PanelRound(calls) => calls.iter().find(|call| call.judge_id == judge_id),
            _ => None,
        });
        if let Some(asked) = asked {
            payload.edit(|payload| {
                payload["judgeCall"]["messages"] = json!([
                    {"role": "system", "content": asked.system_prompt},
                    {"role": "user", "content": asked.user_message},
                ]);
            });
        }
    }
}
