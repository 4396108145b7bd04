//! Consensus over a panel's scores (0–10).
//!
//! - `simple_average`: the mean of the included scores.
//! - `median`: the median of the included scores (mean of the two middle
//!   ones for an even count).
//! - `weighted_average`: `Σ wᵢ·sᵢ / Σ wᵢ` over the included judges. A
//!   judge's weight is its explicit weight when the request gives one;
//!   otherwise it comes from its reputation: `wᵢ = (averageRating / 10) ×
//!   successRate`, each defaulting to the neutral value when missing
//!   (rating 5, success rate 1); a judge with no reputation at all weighs 0.5.
//!   The reported weights are normalised to sum to 1.
//!
//! **Outliers** (when enabled, with at least three judges): the modified
//! z-score of Iglewicz and Hoaglin, `zᵢ = 0.6745 · (sᵢ − median) / MAD`
//! where MAD is the median absolute deviation; a judge with `|zᵢ| > 3.5` is
//! left out of the consensus (its score stays in `individualScores`). When
//! the MAD is 0 (most judges agree exactly), the mean absolute deviation
//! stands in: `zᵢ = (sᵢ − median) / (1.253314 · meanAD)`. At least two
//! judges always remain.
//!
//! **Variance** is the population variance of the included scores.
//! **Confidence** is `(1 − min(σ / 5, 1)) × n / (n + 1)`: 1 for many judges
//! who agree exactly, lower as the standard deviation σ of the included
//! scores grows toward half the scale, and lower for small panels.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How a panel's scores become one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ConsensusAlgorithm {
    SimpleAverage,
    WeightedAverage,
    Median,
}

impl ConsensusAlgorithm {
    pub fn as_str(self) -> &'static str {
        match self {
            ConsensusAlgorithm::SimpleAverage => "simple_average",
            ConsensusAlgorithm::WeightedAverage => "weighted_average",
            ConsensusAlgorithm::Median => "median",
        }
    }
}

/// One judge's score and what weighs it.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgeScore {
    pub agent_id: String,
    pub score: f64,
    /// The request's explicit weight for this judge, if any.
    pub explicit_weight: Option<f64>,
    /// `reputation.averageRating` (0–10), if known.
    pub average_rating: Option<f64>,
    /// `reputation.successRate` (0–1), if known.
    pub success_rate: Option<f64>,
}

impl JudgeScore {
    /// A score with nothing to weigh it but the neutral defaults.
    pub fn plain(agent_id: &str, score: f64) -> Self {
        JudgeScore {
            agent_id: agent_id.to_string(),
            score,
            explicit_weight: None,
            average_rating: None,
            success_rate: None,
        }
    }

    /// The weight before normalisation (see the module doc).
    pub fn raw_weight(&self) -> f64 {
        if let Some(weight) = self.explicit_weight {
            return weight.max(0.0);
        }
        if self.average_rating.is_none() && self.success_rate.is_none() {
            return 0.5;
        }
        let rating = self.average_rating.unwrap_or(5.0).clamp(0.0, 10.0);
        let success = self.success_rate.unwrap_or(1.0).clamp(0.0, 1.0);
        rating / 10.0 * success
    }
}

/// `ConsensusResult` (with the judges left out as outliers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConsensusResult {
    pub final_score: f64,
    pub algorithm: String,
    pub individual_scores: BTreeMap<String, f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<BTreeMap<String, f64>>,
    pub confidence: f64,
    pub variance: f64,
    pub convergence_rounds: u32,
    /// Judges whose scores were left out as outliers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excluded_outliers: Vec<String>,
}

/// Why no consensus could be formed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsensusError {
    NoScores,
    /// A score outside 0–10 (or not a number): the judge's id.
    ScoreOutOfRange(String),
    /// Every weight is zero.
    NoWeight,
}

impl std::fmt::Display for ConsensusError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConsensusError::NoScores => formatter.write_str("no judge scored"),
            ConsensusError::ScoreOutOfRange(agent) => {
                write!(formatter, "judge {agent} scored outside 0-10")
            }
            ConsensusError::NoWeight => formatter.write_str("every judge weighs 0"),
        }
    }
}

impl std::error::Error for ConsensusError {}

/// The median of `values` (sorted copy; None when empty).
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let count = sorted.len();
    match count {
        0 => None,
        _ if count % 2 == 1 => Some(sorted[count / 2]),
        _ => Some((sorted[count / 2 - 1] + sorted[count / 2]) / 2.0),
    }
}

/// Population variance.
pub fn variance(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let count = values.len() as f64;
    let mean = values.iter().sum::<f64>() / count;
    values
        .iter()
        .map(|value| (value - mean).powi(2))
        .sum::<f64>()
        / count
}

/// The agent ids the modified z-score rule leaves out (module doc).
pub fn outliers(scores: &[JudgeScore]) -> Vec<String> {
    if scores.len() < 3 {
        return Vec::new();
    }
    let values: Vec<f64> = scores.iter().map(|judge| judge.score).collect();
    let Some(center) = median(&values) else {
        return Vec::new();
    };
    let deviations: Vec<f64> = values.iter().map(|value| (value - center).abs()).collect();
    let mad = median(&deviations).unwrap_or(0.0);
    let scale = if mad > 0.0 {
        mad / 0.6745
    } else {
        let mean_deviation = deviations.iter().sum::<f64>() / deviations.len() as f64;
        1.253314 * mean_deviation
    };
    if scale <= 0.0 {
        return Vec::new();
    }
    let mut flagged: Vec<(f64, &JudgeScore)> = scores
        .iter()
        .map(|judge| ((judge.score - center).abs() / scale, judge))
        .filter(|(z, _)| *z > 3.5)
        .collect();
    // Keep at least two judges: drop the most extreme first.
    flagged.sort_by(|a, b| b.0.total_cmp(&a.0));
    flagged.truncate(scores.len().saturating_sub(2));
    flagged
        .into_iter()
        .map(|(_, judge)| judge.agent_id.clone())
        .collect()
}

/// The panel's consensus after `rounds` discussion rounds.
pub fn consensus(
    scores: &[JudgeScore],
    algorithm: ConsensusAlgorithm,
    outlier_detection: bool,
    rounds: u32,
) -> Result<ConsensusResult, ConsensusError> {
    if scores.is_empty() {
        return Err(ConsensusError::NoScores);
    }
    if let Some(judge) = scores
        .iter()
        .find(|judge| !(0.0..=10.0).contains(&judge.score))
    {
        return Err(ConsensusError::ScoreOutOfRange(judge.agent_id.clone()));
    }
    let excluded = if outlier_detection {
        outliers(scores)
    } else {
        Vec::new()
    };
    let included: Vec<&JudgeScore> = scores
        .iter()
        .filter(|judge| !excluded.contains(&judge.agent_id))
        .collect();
    let values: Vec<f64> = included.iter().map(|judge| judge.score).collect();
    let (final_score, weights) = match algorithm {
        ConsensusAlgorithm::SimpleAverage => {
            (values.iter().sum::<f64>() / values.len() as f64, None)
        }
        ConsensusAlgorithm::Median => (median(&values).unwrap_or(0.0), None),
        ConsensusAlgorithm::WeightedAverage => {
            let total: f64 = included.iter().map(|judge| judge.raw_weight()).sum();
            if total <= 0.0 {
                return Err(ConsensusError::NoWeight);
            }
            let weighted = included
                .iter()
                .map(|judge| judge.raw_weight() * judge.score)
                .sum::<f64>()
                / total;
            let weights = included
                .iter()
                .map(|judge| (judge.agent_id.clone(), judge.raw_weight() / total))
                .collect();
            (weighted, Some(weights))
        }
    };
    let spread = variance(&values);
    let count = values.len() as f64;
    let confidence = (1.0 - (spread.sqrt() / 5.0).min(1.0)) * count / (count + 1.0);
    Ok(ConsensusResult {
        final_score,
        algorithm: algorithm.as_str().to_string(),
        individual_scores: scores
            .iter()
            .map(|judge| (judge.agent_id.clone(), judge.score))
            .collect(),
        weights,
        confidence,
        variance: spread,
        convergence_rounds: rounds,
        excluded_outliers: excluded,
    })
}

/// Whether a discussion round is needed: the variance is still above the
/// threshold and rounds remain.
pub fn needs_discussion(
    scores: &[f64],
    convergence_threshold: f64,
    rounds_done: u32,
    max_rounds: u32,
) -> bool {
    rounds_done < max_rounds && variance(scores) > convergence_threshold
}
