//! The summary of one results file: what `baton eval` prints and returns
//! its exit code from.

use serde::{Deserialize, Serialize};

use crate::results::ExampleResult;
use crate::statistics::{MeanInterval, bootstrap_mean, percentile};

/// Pass rate, judge score, cost and duration of one evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub total: usize,
    pub passed: usize,
    /// `passed / total` (0 for an empty file).
    pub pass_rate: f64,
    /// The mean judge score with its 95 % bootstrap interval, over the
    /// examples a panel scored.
    pub judge_score: Option<MeanInterval>,
    pub duration_ms_p50: Option<f64>,
    pub duration_ms_p95: Option<f64>,
    /// Over the examples with a priced model call.
    pub cost_usd_total: f64,
    pub cost_usd_p50: Option<f64>,
    pub cost_usd_p95: Option<f64>,
    pub priced: usize,
    /// Prompt plus completion tokens over every example.
    pub tokens_total: u64,
}

impl Summary {
    pub fn of(results: &[ExampleResult]) -> Self {
        let total = results.len();
        let passed = results.iter().filter(|result| result.passed).count();
        let scores: Vec<f64> = results
            .iter()
            .filter_map(|result| result.judge.as_ref().map(|judge| judge.score))
            .collect();
        let durations: Vec<f64> = results
            .iter()
            .filter(|result| result.status.is_some())
            .map(|result| result.duration_ms as f64)
            .collect();
        let costs: Vec<f64> = results
            .iter()
            .filter_map(|result| result.cost_usd)
            .collect();
        Self {
            total,
            passed,
            pass_rate: if total == 0 {
                0.0
            } else {
                passed as f64 / total as f64
            },
            judge_score: bootstrap_mean(&scores),
            duration_ms_p50: percentile(&durations, 0.5),
            duration_ms_p95: percentile(&durations, 0.95),
            // A fold from +0.0: an empty float sum is -0.0 ("$-0.000000").
            cost_usd_total: costs.iter().fold(0.0, |total, cost| total + cost),
            cost_usd_p50: percentile(&costs, 0.5),
            cost_usd_p95: percentile(&costs, 0.95),
            priced: costs.len(),
            tokens_total: results
                .iter()
                .map(|result| result.tokens.prompt + result.tokens.completion)
                .sum(),
        }
    }

    /// Whether the pass rate reaches `minimum` (0 to 1).
    pub fn meets(&self, minimum: f64) -> bool {
        self.pass_rate + 1e-9 >= minimum
    }

    /// The summary as aligned lines (`passed`, `judge`, `duration`, `cost`).
    pub fn lines(&self, minimum_pass_rate: f64) -> Vec<String> {
        let mut lines = vec![format!(
            "passed       {}/{} ({:.0}%, threshold {:.0}%)",
            self.passed,
            self.total,
            self.pass_rate * 100.0,
            minimum_pass_rate * 100.0
        )];
        if let Some(score) = &self.judge_score {
            lines.push(format!(
                "judge score  mean {:.2} (95% CI {:.2} to {:.2}, {} scored)",
                score.mean, score.low, score.high, score.count
            ));
        }
        lines.push(format!(
            "duration     p50 {:.0} ms, p95 {:.0} ms",
            self.duration_ms_p50.unwrap_or(0.0),
            self.duration_ms_p95.unwrap_or(0.0)
        ));
        lines.push(format!(
            "cost         total ${:.6}, p50 ${:.6}, p95 ${:.6} ({} priced), {} tokens",
            self.cost_usd_total,
            self.cost_usd_p50.unwrap_or(0.0),
            self.cost_usd_p95.unwrap_or(0.0),
            self.priced,
            self.tokens_total
        ));
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::completed_example;

    fn result(id: &str, passed: bool, score: Option<f64>, cost: Option<f64>) -> ExampleResult {
        completed_example(id, passed, score, cost, "")
    }

    #[test]
    fn the_summary_counts_passes_scores_and_prices() {
        let summary = Summary::of(&[
            result("a", true, Some(8.0), Some(0.01)),
            result("b", false, Some(6.0), None),
            result("c", true, None, Some(0.03)),
        ]);
        assert_eq!((summary.passed, summary.total), (2, 3));
        assert!(!summary.meets(1.0) && summary.meets(0.66));
        let score = summary.judge_score.unwrap();
        assert_eq!((score.mean, score.count), (7.0, 2));
        assert!((summary.cost_usd_total - 0.04).abs() < 1e-12);
        assert_eq!(summary.priced, 2);
        let unpriced = Summary::of(&[result("d", true, None, None)]);
        assert!(
            unpriced
                .lines(1.0)
                .join("\n")
                .contains("cost         total $0.000000")
        );
        let printed = summary.lines(1.0).join("\n");
        assert!(
            printed.contains("passed       2/3 (67%, threshold 100%)"),
            "{printed}"
        );
        assert!(
            printed.contains("judge score  mean 7.00 (95% CI 6.00 to 8.00, 2 scored)"),
            "{printed}"
        );
    }
}
