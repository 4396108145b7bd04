//! The driver of a deployment without long-running processes (the sweeper
//! function, on its schedule): while any evaluation runs, a pass over each
//! one every [`EvaluationPasses::every`], for at most
//! [`EvaluationPasses::budget`] of the invocation. Between invocations an
//! evaluation waits (the runs it started go on): the schedule's period
//! less the budget.

use std::time::{Duration, Instant};

use super::{DatasetEvaluations, EvaluationError, PassesReport};

/// How often, and how long, passes run in one invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvaluationPasses {
    pub every: Duration,
    pub budget: Duration,
}

impl EvaluationPasses {
    /// The sweeper function's (a 60 s timeout, every minute): a pass every
    /// 2 s for 30 s, the rest of the invocation left to retention.
    pub const SWEEPER_FUNCTION: EvaluationPasses = EvaluationPasses {
        every: Duration::from_secs(2),
        budget: Duration::from_secs(30),
    };

    /// Passes over every running evaluation until none runs or the
    /// budget is spent; what they did, summed (`left` is the last
    /// round's).
    pub async fn run(
        &self,
        evaluations: &DatasetEvaluations,
    ) -> Result<PassesReport, EvaluationError> {
        let started = Instant::now();
        let mut report = PassesReport::default();
        loop {
            let left = self.budget.saturating_sub(started.elapsed());
            let round = evaluations.advance_every_running(left).await?;
            report.advanced += round.advanced;
            report.ended += round.ended;
            report.failed += round.failed;
            report.left = round.left;
            let still_running = round.advanced > round.ended || round.left > 0;
            if !still_running || started.elapsed() + self.every >= self.budget {
                return Ok(report);
            }
            tokio::time::sleep(self.every).await;
        }
    }
}
