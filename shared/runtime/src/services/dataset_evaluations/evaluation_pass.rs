//! One pass over a running evaluation, a bounded step that never waits:
//! the first `concurrency` examples without a result are looked at; an
//! example whose run has not started is submitted (idempotency key
//! `{evaluationId}.{line}`, so a pass that did not see the run another
//! pass started takes it up); one whose run settled is scored, its panel
//! started or read first when a panel judges; one past its time limit is
//! cancelled. The pass answers what it found: the results of the examples
//! that ended and the examples still at work, with their run ids. The
//! caller writes them to the record; a pass repeated, or two at once, find
//! the same runs and write the same results.

use std::sync::Arc;

use baton_core::contracts::dataset::ResolvedExample;
use baton_evaluation::results::ExampleResult;
use baton_evaluation::served::ExampleInFlight;
use serde_json::Value;

use super::example_runs::{PanelAnswer, example_limit, finished_run, scored_example};
use super::run_panel_judge::{PanelLook, RunPanelJudge, held_by_limits, unavailable};
use super::{EvaluationError, PAST_ITS_LIMIT};
use crate::ports::Clock;
use crate::ports::evaluation_ports::NotFinished;
use crate::services::RunService;

/// Where one example stands after a look.
pub(super) enum ExampleLook {
    /// It ended: its results line.
    Ended(ExampleResult),
    /// Its run (or its panel's) is at work.
    Working(ExampleInFlight),
    /// The tenant's limits hold its run's start: the next pass tries again.
    Held,
}

/// What one pass looks at examples with.
pub(super) struct EvaluationPass<'a> {
    pub runs: &'a Arc<RunService>,
    pub tenant_id: &'a str,
    pub evaluation_id: &'a str,
    pub judge: Option<&'a RunPanelJudge>,
    pub clock: &'a dyn Clock,
}

impl EvaluationPass<'_> {
    /// Looks at one example; `flight` is what the last pass left of it.
    pub(super) async fn look(
        &self,
        example: &ResolvedExample,
        flight: Option<ExampleInFlight>,
    ) -> Result<ExampleLook, EvaluationError> {
        let run_id = match flight.as_ref() {
            Some(flight) => flight.run_id.clone(),
            None => {
                let mut envelope: Value = example.envelope.clone();
                // One run per example, whichever pass starts it; the
                // envelope's own key (if any) would make every example one.
                envelope["idempotencyKey"] =
                    Value::String(format!("{}.{}", self.evaluation_id, example.line));
                match self.runs.submit(self.tenant_id, &envelope).await {
                    Ok(submitted) => submitted.run_id,
                    Err(error) if error.is_retryable() => return Err(unavailable(error)),
                    Err(error) if held_by_limits(&error) => return Ok(ExampleLook::Held),
                    Err(error) => {
                        return Ok(ExampleLook::Ended(not_run(
                            example,
                            NotFinished::new(None, "submitted", error.to_string()),
                        )));
                    }
                }
            }
        };
        let Some(stored) = self
            .runs
            .load(self.tenant_id, &run_id)
            .await
            .map_err(unavailable)?
        else {
            return Ok(ExampleLook::Ended(not_run(
                example,
                NotFinished::new(Some(run_id), "loaded", "the run is no longer kept"),
            )));
        };
        let state = stored.state;
        let limit = example_limit(example);
        if !state.status().is_settled() {
            if self.clock.now().since(state.created_at) <= limit {
                return Ok(ExampleLook::Working(in_flight(example, run_id, None)));
            }
            let cancelled = self
                .runs
                .cancel(self.tenant_id, &run_id, PAST_ITS_LIMIT)
                .await
                .map_or_else(
                    |error| format!("; cancelling it failed: {error}"),
                    |_| "; it was cancelled".to_string(),
                );
            return Ok(ExampleLook::Ended(not_run(
                example,
                NotFinished::new(
                    Some(run_id),
                    "settled",
                    format!(
                        "the run had not settled after {} s{cancelled}",
                        limit.as_secs()
                    ),
                ),
            )));
        }
        let finished = finished_run(run_id.clone(), &state);
        let panel = match self.judge {
            None => PanelAnswer::NotAsked,
            Some(_) if finished.status != "completed" => PanelAnswer::RunNotCompleted,
            Some(judge) => {
                let panel_run = flight.and_then(|flight| flight.judge_run_id);
                match judge
                    .look(example, &finished.output, panel_run, self.clock)
                    .await?
                {
                    PanelLook::Working(panel_run) => {
                        return Ok(ExampleLook::Working(in_flight(example, run_id, panel_run)));
                    }
                    PanelLook::Ended(outcome) => PanelAnswer::Answered(outcome),
                }
            }
        };
        Ok(ExampleLook::Ended(scored_example(
            example, finished, panel, None,
        )))
    }
}

fn in_flight(
    example: &ResolvedExample,
    run_id: String,
    judge_run_id: Option<String>,
) -> ExampleInFlight {
    ExampleInFlight {
        id: example.id.clone(),
        line: example.line,
        run_id,
        judge_run_id,
    }
}

fn not_run(example: &ResolvedExample, not: NotFinished) -> ExampleResult {
    ExampleResult::not_run(&example.id, example.line, not.run_id, not.failed)
}
