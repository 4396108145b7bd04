//! Two results files paired by example id: what changed per example and in
//! aggregate, and which changes are regressions under [`FailOn`].
//!
//! Pass/fail flips are exact (the deterministic checks do not vary from
//! run to run of one output) and always listed. A judge-score change is a
//! regression only when the mean drop exceeds its threshold and the paired
//! bootstrap's 95 % interval lies wholly below zero (the sign test's
//! p-value is reported beside it).

use serde::{Deserialize, Serialize};

use crate::results::ExampleResult;
use crate::statistics::{MeanInterval, SignTest, paired_bootstrap, sign_test};
use crate::summary::Summary;

/// The thresholds past which a change is a regression.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FailOn {
    /// The largest pass-rate drop tolerated (0 to 1; default 0: any drop).
    pub pass_rate_drop: f64,
    /// The largest drop of the mean judge score tolerated (default 0.5).
    pub score_drop: f64,
    /// The largest rise of the paired examples' total cost tolerated, as a
    /// fraction (default 0.25: a quarter more).
    pub cost_rise: f64,
}

impl Default for FailOn {
    fn default() -> Self {
        Self {
            pass_rate_drop: 0.0,
            score_drop: 0.5,
            cost_rise: 0.25,
        }
    }
}

/// What is wrong with a `--fail-on` part (the part, as written).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FailOnProblem {
    #[error("`{0}`: expected NAME=NUMBER")]
    NotNameEqualsNumber(String),
    #[error("`{part}`: `{value}` is not a number")]
    NotANumber { part: String, value: String },
    #[error("`{0}`: a threshold is a number of at least 0")]
    Negative(String),
    #[error("`{0}`: a pass rate is 0 to 1")]
    PassRateAboveOne(String),
    #[error("`{0}`: not a threshold (pass-rate-drop, score-drop, cost-rise)")]
    UnknownThreshold(String),
}

impl FailOn {
    /// Reads `pass-rate-drop=0.1,score-drop=1,cost-rise=0.2` (any subset;
    /// the rest keep their defaults), naming what is wrong.
    pub fn parse(text: &str) -> Result<Self, FailOnProblem> {
        let mut fail_on = Self::default();
        for part in text.split(',').filter(|part| !part.trim().is_empty()) {
            let (name, value) = part
                .split_once('=')
                .ok_or_else(|| FailOnProblem::NotNameEqualsNumber(part.to_string()))?;
            let number: f64 = value
                .trim()
                .parse()
                .map_err(|_| FailOnProblem::NotANumber {
                    part: part.to_string(),
                    value: value.to_string(),
                })?;
            if !number.is_finite() || number < 0.0 {
                return Err(FailOnProblem::Negative(part.to_string()));
            }
            match name.trim() {
                "pass-rate-drop" if number <= 1.0 => fail_on.pass_rate_drop = number,
                "pass-rate-drop" => return Err(FailOnProblem::PassRateAboveOne(part.to_string())),
                "score-drop" => fail_on.score_drop = number,
                "cost-rise" => fail_on.cost_rise = number,
                other => return Err(FailOnProblem::UnknownThreshold(other.to_string())),
            }
        }
        Ok(fail_on)
    }
}

/// How one example changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Change {
    /// Passed in the baseline, fails in the candidate.
    Broke,
    /// Failed in the baseline, passes in the candidate.
    Fixed,
    /// Passes or fails on both sides.
    Same,
    /// In the baseline only (counted as failing in the candidate).
    Missing,
    /// In the candidate only (not paired).
    New,
}

/// One example on both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExampleChange {
    pub id: String,
    pub change: Change,
    pub baseline: Option<ExampleResult>,
    pub candidate: Option<ExampleResult>,
}

impl ExampleChange {
    fn score(side: &Option<ExampleResult>) -> Option<f64> {
        side.as_ref()?.judge.as_ref().map(|judge| judge.score)
    }

    pub fn baseline_score(&self) -> Option<f64> {
        Self::score(&self.baseline)
    }

    pub fn candidate_score(&self) -> Option<f64> {
        Self::score(&self.candidate)
    }
}

/// The judge scores of the examples scored on both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScoreChange {
    /// Candidate minus baseline, mean over the pairs, with its 95 % paired
    /// bootstrap interval.
    pub difference: MeanInterval,
    pub sign_test: Option<SignTest>,
    /// The interval lies wholly below zero.
    pub significant_drop: bool,
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Comparison {
    pub baseline: Summary,
    pub candidate: Summary,
    pub examples: Vec<ExampleChange>,
    pub score: Option<ScoreChange>,
    /// The paired examples' total cost, candidate over baseline, minus 1
    /// (`None` when the baseline cost nothing).
    pub cost_rise: Option<f64>,
    pub fail_on: FailOn,
    /// Each regression, in words; empty when none.
    pub regressions: Vec<String>,
}

impl Comparison {
    /// The ids of the examples with this change.
    pub fn ids(&self, change: Change) -> Vec<&str> {
        self.examples
            .iter()
            .filter(|example| example.change == change)
            .map(|example| example.id.as_str())
            .collect()
    }
}

/// Compares `candidate` with `baseline` (examples in the baseline's order,
/// then the candidate's new ones).
pub fn compare(
    baseline: &[ExampleResult],
    candidate: &[ExampleResult],
    fail_on: FailOn,
) -> Comparison {
    let mut examples: Vec<ExampleChange> = baseline
        .iter()
        .map(|before| {
            let after = candidate.iter().find(|after| after.id == before.id);
            let change = match after {
                None => Change::Missing,
                Some(after) if before.passed && !after.passed => Change::Broke,
                Some(after) if !before.passed && after.passed => Change::Fixed,
                Some(_) => Change::Same,
            };
            ExampleChange {
                id: before.id.clone(),
                change,
                baseline: Some(before.clone()),
                candidate: after.cloned(),
            }
        })
        .collect();
    examples.extend(
        candidate
            .iter()
            .filter(|after| !baseline.iter().any(|before| before.id == after.id))
            .map(|after| ExampleChange {
                id: after.id.clone(),
                change: Change::New,
                baseline: None,
                candidate: Some(after.clone()),
            }),
    );
    let score_pairs: Vec<(f64, f64)> = examples
        .iter()
        .filter_map(|example| Some((example.baseline_score()?, example.candidate_score()?)))
        .collect();
    let score = paired_bootstrap(&score_pairs).map(|difference| ScoreChange {
        difference,
        sign_test: sign_test(&score_pairs),
        significant_drop: difference.high < 0.0,
    });
    let cost_pairs: Vec<(f64, f64)> = examples
        .iter()
        .filter_map(|example| {
            Some((
                example.baseline.as_ref()?.cost_usd?,
                example.candidate.as_ref()?.cost_usd?,
            ))
        })
        .collect();
    let cost_before = cost_pairs
        .iter()
        .fold(0.0, |total, (before, _)| total + before);
    let cost_after = cost_pairs
        .iter()
        .fold(0.0, |total, (_, after)| total + after);
    let cost_rise = (cost_before > 0.0).then(|| cost_after / cost_before - 1.0);
    // The candidate's pass rate over the baseline's examples: a missing one fails.
    let paired_passed = examples
        .iter()
        .filter(|example| example.change != Change::New)
        .filter(|example| example.candidate.as_ref().is_some_and(|after| after.passed))
        .count();
    let baseline_summary = Summary::of(baseline);
    let candidate_rate = if baseline.is_empty() {
        0.0
    } else {
        paired_passed as f64 / baseline.len() as f64
    };
    let mut regressions = Vec::new();
    let drop = baseline_summary.pass_rate - candidate_rate;
    if drop > fail_on.pass_rate_drop + 1e-9 {
        let mut named: Vec<String> = Vec::new();
        for example in &examples {
            match example.change {
                Change::Broke => named.push(format!(
                    "{} ({})",
                    example.id,
                    example
                        .candidate
                        .as_ref()
                        .map(|after| after.failures().join("; "))
                        .unwrap_or_default()
                )),
                Change::Missing => named.push(format!("{} (missing)", example.id)),
                _ => {}
            }
        }
        regressions.push(format!(
            "pass rate fell from {:.0}% to {:.0}% (more than {:.0}%): broke {}",
            baseline_summary.pass_rate * 100.0,
            candidate_rate * 100.0,
            fail_on.pass_rate_drop * 100.0,
            named.join(", ")
        ));
    }
    if let Some(score) = &score
        && -score.difference.mean > fail_on.score_drop
        && score.significant_drop
    {
        regressions.push(format!(
            "judge score fell by {:.2} (95% CI {:.2} to {:.2}, more than {} and beyond noise)",
            -score.difference.mean, score.difference.low, score.difference.high, fail_on.score_drop
        ));
    }
    if let Some(rise) = cost_rise
        && rise > fail_on.cost_rise
    {
        regressions.push(format!(
            "cost rose by {:.0}% (${cost_before:.6} to ${cost_after:.6}, more than {:.0}%)",
            rise * 100.0,
            fail_on.cost_rise * 100.0
        ));
    }
    Comparison {
        baseline: baseline_summary,
        candidate: Summary::of(candidate),
        examples,
        score,
        cost_rise,
        fail_on,
        regressions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::completed_example;

    fn result(id: &str, passed: bool, score: Option<f64>, cost: f64) -> ExampleResult {
        completed_example(id, passed, score, Some(cost), "does not hold")
    }

    #[test]
    fn a_broken_example_is_named_and_is_a_regression() {
        let baseline = [result("a", true, None, 0.01), result("b", true, None, 0.01)];
        let candidate = [
            result("a", true, None, 0.01),
            result("b", false, None, 0.01),
        ];
        let comparison = compare(&baseline, &candidate, FailOn::default());
        assert_eq!(comparison.ids(Change::Broke), vec!["b"]);
        assert_eq!(
            comparison.regressions.len(),
            1,
            "{:?}",
            comparison.regressions
        );
        assert!(
            comparison.regressions[0].contains("from 100% to 50%")
                && comparison.regressions[0].contains("b (assertions[0]: does not hold)"),
            "{:?}",
            comparison.regressions
        );
        let tolerant = FailOn::parse("pass-rate-drop=0.5").unwrap();
        assert!(
            compare(&baseline, &candidate, tolerant)
                .regressions
                .is_empty()
        );
    }

    #[test]
    fn judge_noise_is_not_a_regression_and_a_clear_drop_is() {
        let before = [7.0, 7.4, 6.8, 7.2, 7.1, 6.9];
        let noisy = [7.2, 7.0, 7.1, 6.8, 7.3, 7.0];
        let baseline: Vec<_> = before
            .iter()
            .enumerate()
            .map(|(at, score)| result(&format!("e{at}"), true, Some(*score), 0.01))
            .collect();
        let candidate: Vec<_> = noisy
            .iter()
            .enumerate()
            .map(|(at, score)| result(&format!("e{at}"), true, Some(*score), 0.01))
            .collect();
        let comparison = compare(&baseline, &candidate, FailOn::default());
        assert!(
            comparison.regressions.is_empty(),
            "{:?}",
            comparison.regressions
        );
        assert!(!comparison.score.as_ref().unwrap().significant_drop);
        let dropped: Vec<_> = before
            .iter()
            .enumerate()
            .map(|(at, score)| result(&format!("e{at}"), true, Some(score - 2.0), 0.01))
            .collect();
        let comparison = compare(&baseline, &dropped, FailOn::default());
        assert_eq!(
            comparison.regressions.len(),
            1,
            "{:?}",
            comparison.regressions
        );
        assert!(comparison.regressions[0].starts_with("judge score fell by 2.00"));
        let sign = comparison.score.unwrap().sign_test.unwrap();
        assert_eq!((sign.better, sign.worse), (0, 6));
    }

    #[test]
    fn a_missing_example_fails_and_cost_rises_are_measured() {
        let baseline = [result("a", true, None, 0.01), result("b", true, None, 0.01)];
        let candidate = [result("a", true, None, 0.02), result("c", true, None, 0.01)];
        let comparison = compare(&baseline, &candidate, FailOn::default());
        assert_eq!(comparison.ids(Change::Missing), vec!["b"]);
        assert_eq!(comparison.ids(Change::New), vec!["c"]);
        assert!((comparison.cost_rise.unwrap() - 1.0).abs() < 1e-9);
        assert_eq!(
            comparison.regressions.len(),
            2,
            "{:?}",
            comparison.regressions
        );
        assert!(comparison.regressions[0].contains("b (missing)"));
        assert!(comparison.regressions[1].starts_with("cost rose by 100%"));
    }

    #[test]
    fn thresholds_are_read_naming_what_is_wrong() {
        let read = FailOn::parse("score-drop=1, cost-rise=0.1").unwrap();
        assert_eq!(
            (read.pass_rate_drop, read.score_drop, read.cost_rise),
            (0.0, 1.0, 0.1)
        );
        assert_eq!(
            FailOn::parse("speed=1").unwrap_err().to_string(),
            "`speed`: not a threshold (pass-rate-drop, score-drop, cost-rise)"
        );
        assert_eq!(
            FailOn::parse("score-drop"),
            Err(FailOnProblem::NotNameEqualsNumber("score-drop".into()))
        );
        assert_eq!(
            FailOn::parse("cost-rise=-1"),
            Err(FailOnProblem::Negative("cost-rise=-1".into()))
        );
        assert_eq!(
            FailOn::parse("pass-rate-drop=2"),
            Err(FailOnProblem::PassRateAboveOne("pass-rate-drop=2".into()))
        );
    }
}
