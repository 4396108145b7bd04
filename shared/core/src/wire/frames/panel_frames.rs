//! A judge panel node's frames: `progress` after each round opened, each
//! judge's call (with what it cost) and the conclusion.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{FrameStamp, ModelResponseSummary, to_payload};
use crate::wire::event::{EventDraft, EventType};

/// `progress`: a judge panel's `EvaluationProgress` (status, round, scores
/// received, variance) on a panel node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProgressPayload {
    /// `scoring`, `discussing` or `completed`.
    pub status: String,
    pub current_round: u32,
    pub total_rounds: u32,
    pub scores_received: usize,
    pub total_agents: usize,
    pub topic_id: String,
    /// Each judge's latest score (0–10).
    pub current_scores: std::collections::BTreeMap<String, f64>,
    /// Population variance of the latest scores.
    pub variance: f64,
    /// The judge's model call this report follows (a judge answered, or
    /// its answer was refused); absent for a round opened or closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_call: Option<JudgeCallSummary>,
}

/// One judge's model call: who, in which round, the model's answer (model
/// and usage) and what came of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JudgeCallSummary {
    pub judge_id: String,
    pub round: u32,
    pub attempt: u32,
    /// Absent when the model failed before answering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<ModelResponseSummary>,
    /// The score given (0–10), when the answer was a judgement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// Why the judge was left out of the round, when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl From<&baton_judge::panel::EvaluationProgress> for ProgressPayload {
    fn from(progress: &baton_judge::panel::EvaluationProgress) -> Self {
        ProgressPayload {
            status: progress.status.clone(),
            current_round: progress.current_round,
            total_rounds: progress.total_rounds,
            scores_received: progress.scores_received,
            total_agents: progress.total_agents,
            topic_id: progress.topic_id.clone(),
            current_scores: progress.current_scores.clone(),
            variance: progress.variance,
            judge_call: None,
        }
    }
}

/// A panel node's `progress`.
pub fn progress(stamp: &FrameStamp, node_id: &str, payload: &ProgressPayload) -> EventDraft {
    stamp
        .draft(EventType::Progress)
        .node(node_id)
        .payload(to_payload(payload))
}
