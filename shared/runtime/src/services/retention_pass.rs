//! Retention's pass as an upkeep runs it: batches of ended runs, one after
//! another, until none is left, a number of batches is reached, or a time
//! budget is spent (a scheduled function must end before its timeout, and
//! a long-running process's upkeep must leave the store to the steps).

use std::time::Duration;

use crate::error::StoreError;
use crate::ports::{Clock, ExpiredRunsBatch, RetentionUpkeep};

/// How one upkeep works off retention's backlog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionPass {
    /// Ended runs per batch.
    pub batch: usize,
    /// Batches per pass at most.
    pub most_batches: usize,
    /// No batch starts once this much time has gone by since the first.
    pub budget: Duration,
}

impl RetentionPass {
    /// The deployment's scheduled `sweeper` function (60 s timeout, once a
    /// minute, after the outbox and the dead letters): batches of 200 ended
    /// runs for up to 45 s (less when the invocation's deadline is nearer:
    /// [`Self::ending_before`]), so 1,000 runs ending a minute are kept up
    /// with (measured over moto in `baton-aws`'s `tests/retention_rate.rs`).
    pub const SWEEPER_FUNCTION: RetentionPass = RetentionPass {
        batch: 200,
        most_batches: 100,
        budget: Duration::from_secs(45),
    };

    /// `baton serve`'s minutely upkeep on its own store: batches of 100 (one
    /// write transaction each on SQLite, so steps' commits take the
    /// connection between batches), 50 at most.
    pub const SERVE: RetentionPass = RetentionPass {
        batch: 100,
        most_batches: 50,
        budget: Duration::from_secs(30),
    };

    /// The same pass, its budget cut so that no batch starts later than
    /// [`Self::LAST_BATCH_MARGIN`] before a deadline `left` away.
    pub fn ending_before(self, left: Duration) -> RetentionPass {
        RetentionPass {
            budget: self
                .budget
                .min(left.saturating_sub(Self::LAST_BATCH_MARGIN)),
            ..self
        }
    }

    /// Time left for the last batch a pass starts (200 ended runs took
    /// about 9 s over moto).
    pub const LAST_BATCH_MARGIN: Duration = Duration::from_secs(15);

    /// Runs the pass on `upkeep` at `clock`'s time: what all its batches
    /// did together (`more`: the last batch left some for the next pass).
    pub async fn run(
        &self,
        upkeep: &dyn RetentionUpkeep,
        clock: &dyn Clock,
    ) -> Result<ExpiredRunsBatch, StoreError> {
        let started = tokio::time::Instant::now();
        let mut total = ExpiredRunsBatch::default();
        for _ in 0..self.most_batches {
            let batch = upkeep.expire_ended_runs(clock.now(), self.batch).await?;
            total.runs += batch.runs;
            total.items += batch.items;
            total.more = batch.more;
            if !batch.more || started.elapsed() >= self.budget {
                break;
            }
            tokio::task::yield_now().await;
        }
        Ok(total)
    }
}
