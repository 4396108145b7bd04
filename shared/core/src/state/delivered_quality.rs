//! The quality of a run's delivered output, as `complete` reports it and
//! the run keeps it: a reviewer's score when one scored the drafts, else
//! the output contract's constraints scored on the output.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where a run's quality score comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum QualitySource {
    /// A reviewer scored the drafts (`constraints.qualityThreshold` set and
    /// a reviewer in the plan): the delivered draft's score.
    Reviewer,
    /// No reviewer scored: the output contract's constraints, weighted, on
    /// the delivered output (1 when the contract has none).
    Constraints,
}

/// The quality of the delivered output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QualityReport {
    /// The score (0–1).
    pub score: f64,
    /// Where the score comes from.
    pub source: QualitySource,
    /// `constraints.qualityThreshold`, when the envelope sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    /// The score meets the threshold (true when there is none).
    pub passed: bool,
    /// Drafts reviewed (0 when no reviewer scored).
    pub drafts: usize,
    pub execution_depth: u32,
    /// Every draft's score, in order.
    pub draft_scores: Vec<f64>,
}
