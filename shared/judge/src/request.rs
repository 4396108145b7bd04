//! The panel request: `{request, config}` as callers send it. Fields the
//! panel does not use (payments, ledger accounts, avatars) are accepted and
//! ignored. Errors name the JSON path.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::consensus::{ConsensusAlgorithm, JudgeScore};

/// A judge's track record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Reputation {
    #[serde(default)]
    pub total_reviews: Option<u64>,
    #[serde(default)]
    pub average_rating: Option<f64>,
    #[serde(default)]
    pub success_rate: Option<f64>,
}

/// What a judge is: its prompt and model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JudgeCapabilities {
    #[serde(default)]
    pub system_prompt: Option<String>,
    #[serde(default)]
    pub model_name: Option<String>,
    #[serde(default)]
    pub model_provider: Option<String>,
    #[serde(default)]
    pub specialties: Vec<String>,
}

/// One selected judge (`Agent`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Judge {
    pub id: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub reputation: Option<Reputation>,
    #[serde(default)]
    pub capabilities: Option<JudgeCapabilities>,
}

/// `JudgmentRequest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JudgmentRequest {
    pub id: String,
    pub content: String,
    #[serde(default)]
    pub criteria: Vec<String>,
    pub selected_agents: Vec<Judge>,
    #[serde(default)]
    pub requested_by: Option<String>,
}

/// `OrchestratorConfig`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PanelConfig {
    pub max_discussion_rounds: u32,
    /// Milliseconds a judge has to answer in a round.
    pub round_timeout: u64,
    pub consensus_algorithm: ConsensusAlgorithm,
    pub enable_discussion: bool,
    pub convergence_threshold: f64,
    pub outlier_detection: bool,
}

/// The whole request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PanelRequest {
    pub request: JudgmentRequest,
    pub config: PanelConfig,
    /// Explicit weights by judge id (`weighted_average`); reputation otherwise.
    #[serde(default)]
    pub weights: BTreeMap<String, f64>,
}

/// A refused request: the JSON path and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidPanelRequest {
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for InvalidPanelRequest {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}: {}", self.path, self.message)
    }
}

impl std::error::Error for InvalidPanelRequest {}

fn invalid(path: impl Into<String>, message: impl Into<String>) -> InvalidPanelRequest {
    InvalidPanelRequest {
        path: path.into(),
        message: message.into(),
    }
}

/// At most this many discussion rounds (each is a model call per judge).
pub const MAX_DISCUSSION_ROUNDS: u32 = 10;

/// At most this many judges on a panel: a round keeps each judge's answer
/// in the run's commit, and 50 is what is shown to complete on DynamoDB
/// (whose transaction takes 100 items) with three rounds. One more is
/// refused when the panel is asked for, not when its round is stored.
pub const MAX_JUDGES: usize = 50;

impl PanelRequest {
    /// Parses and checks a request.
    pub fn parse(value: &Value) -> Result<Self, InvalidPanelRequest> {
        let parsed: PanelRequest =
            serde_path_to_error::deserialize(value.clone()).map_err(|error| {
                let inner = error.path().to_string();
                let message = error.into_inner().to_string();
                let mut path = if inner.is_empty() || inner == "." {
                    "$".to_string()
                } else {
                    format!("$.{inner}")
                };
                // A missing field is named by the message, not the path.
                if let Some(name) = message
                    .strip_prefix("missing field `")
                    .and_then(|rest| rest.split('`').next())
                {
                    path = format!("{path}.{name}");
                }
                invalid(path, message)
            })?;
        let judges = &parsed.request.selected_agents;
        if judges.is_empty() {
            return Err(invalid(
                "$.request.selectedAgents",
                "a panel needs at least one judge",
            ));
        }
        if judges.len() > MAX_JUDGES {
            return Err(invalid(
                "$.request.selectedAgents",
                format!("{} judges: a panel has at most {MAX_JUDGES}", judges.len()),
            ));
        }
        for (index, judge) in judges.iter().enumerate() {
            if judges[..index].iter().any(|other| other.id == judge.id) {
                return Err(invalid(
                    format!("$.request.selectedAgents[{index}].id"),
                    format!("judge `{}` is selected twice", judge.id),
                ));
            }
        }
        if parsed.request.content.trim().is_empty() {
            return Err(invalid("$.request.content", "nothing to evaluate"));
        }
        let config = &parsed.config;
        if config.max_discussion_rounds > MAX_DISCUSSION_ROUNDS {
            return Err(invalid(
                "$.config.maxDiscussionRounds",
                format!("at most {MAX_DISCUSSION_ROUNDS}"),
            ));
        }
        if config.round_timeout == 0 {
            return Err(invalid("$.config.roundTimeout", "must be positive (ms)"));
        }
        if !config.convergence_threshold.is_finite() || config.convergence_threshold < 0.0 {
            return Err(invalid(
                "$.config.convergenceThreshold",
                "must be a variance, 0 or more",
            ));
        }
        for (judge, weight) in &parsed.weights {
            if !weight.is_finite() || *weight < 0.0 {
                return Err(invalid(
                    format!("$.weights.{judge}"),
                    "a weight is 0 or more",
                ));
            }
            if !judges.iter().any(|selected| &selected.id == judge) {
                return Err(invalid(
                    format!("$.weights.{judge}"),
                    "weighs a judge that is not selected",
                ));
            }
        }
        Ok(parsed)
    }

    /// `score` of `judge_id` with what weighs it.
    pub fn judge_score(&self, judge_id: &str, score: f64) -> JudgeScore {
        let reputation = self
            .request
            .selected_agents
            .iter()
            .find(|judge| judge.id == judge_id)
            .and_then(|judge| judge.reputation.clone())
            .unwrap_or_default();
        JudgeScore {
            agent_id: judge_id.to_string(),
            score,
            explicit_weight: self.weights.get(judge_id).copied(),
            average_rating: reputation.average_rating,
            success_rate: reputation.success_rate,
        }
    }
}
