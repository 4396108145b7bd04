//! One example of a dataset, run and scored: [`run_example`] runs its
//! envelope where [`ExampleRuns`] says, waits for it to settle, and scores
//! it by its deterministic checks and, when a judge is given, by the judge
//! (`baton-evaluation` decides; this runs). [`EmbeddedExampleRuns`] runs
//! envelopes on this process's services, under one tenant.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use baton_core::contracts::dataset::ResolvedExample;
use baton_evaluation::checks::{
    JudgeFailure, SettledRun, Unjudged, deterministic_checks, judge_check,
};
use baton_evaluation::results::{Check, ExampleResult, JudgeOutcome, Tokens};
use serde_json::Value;

use crate::ports::evaluation_ports::{ExampleJudge, ExampleRuns, FinishedRun, NotFinished};
use crate::services::RunService;

/// How long one example's run may take when the example sets no bound.
pub const DEFAULT_EXAMPLE_LIMIT: Duration = Duration::from_secs(1800);

/// Why an example's run is cancelled when it has not settled in its time.
pub const PAST_ITS_LIMIT: &str = "the evaluation's example ran past its time limit";

/// How often a run not yet settled is looked at again.
const POLL_EVERY: Duration = Duration::from_millis(50);

/// Envelopes run on this process's services, submitted as `tenant`'s (so
/// the runs are the tenant's: listed, shown in the viewer, counted by its
/// limits). A step worker must be draining the services' queue. A run not
/// settled within its example's limit is cancelled ([`PAST_ITS_LIMIT`]).
pub struct EmbeddedExampleRuns {
    pub runs: std::sync::Arc<RunService>,
    pub tenant: String,
}

#[async_trait]
impl ExampleRuns for EmbeddedExampleRuns {
    fn api(&self) -> Option<String> {
        None
    }

    async fn run(&self, envelope: &Value, limit: Duration) -> Result<FinishedRun, NotFinished> {
        let started = Instant::now();
        let submitted = self
            .runs
            .submit(&self.tenant, envelope)
            .await
            .map_err(|error| NotFinished::new(None, "submitted", error.to_string()))?;
        let run_id = submitted.run_id;
        let state = settled_run(&self.runs, &self.tenant, &run_id, started, limit).await?;
        Ok(finished_run(run_id, &state))
    }
}

/// A settled run as an example's checks read it: its duration from its
/// creation to its last change, whoever waited for it.
pub(super) fn finished_run(
    run_id: String,
    state: &baton_core::state::run::RunState,
) -> FinishedRun {
    let usage = state.total_usage();
    FinishedRun {
        status: state.status().as_str().to_string(),
        output: state.output.clone().unwrap_or(Value::Null),
        cost_usd: state.total_cost_usd(),
        tokens: Tokens {
            prompt: usage.prompt_tokens,
            completion: usage.completion_tokens,
        },
        duration_ms: u64::try_from(state.updated_at.since(state.created_at).as_millis())
            .unwrap_or(u64::MAX),
        model_by_node: state
            .nodes
            .iter()
            .filter_map(|(node, record)| {
                record
                    .model
                    .as_ref()
                    .map(|model| (node.clone(), model.to_string()))
            })
            .collect(),
        run_id,
    }
}

/// How long an example's run may take: twice its `maxDurationMs` (at
/// least a second), or [`DEFAULT_EXAMPLE_LIMIT`].
pub(super) fn example_limit(example: &ResolvedExample) -> Duration {
    example
        .expect
        .max_duration_ms
        .map_or(DEFAULT_EXAMPLE_LIMIT, |bound| {
            Duration::from_millis(bound).max(Duration::from_secs(1)) * 2
        })
}

/// Waits for run `run_id` of `tenant` to settle (ended, or waiting for a
/// person) until `limit` after `started`; past it the run is cancelled
/// ([`PAST_ITS_LIMIT`]), not left spending, and the failed check says so.
pub(super) async fn settled_run(
    runs: &RunService,
    tenant: &str,
    run_id: &str,
    started: Instant,
    limit: Duration,
) -> Result<baton_core::state::run::RunState, NotFinished> {
    loop {
        let stored = runs.load(tenant, run_id).await.map_err(|error| {
            NotFinished::new(Some(run_id.to_string()), "loaded", error.to_string())
        })?;
        match stored {
            Some(stored) if stored.state.status().is_settled() => return Ok(stored.state),
            _ if started.elapsed() > limit => {
                let cancelled = runs
                    .cancel(tenant, run_id, PAST_ITS_LIMIT)
                    .await
                    .map_or_else(
                        |error| format!("; cancelling it failed: {error}"),
                        |_| "; it was cancelled".to_string(),
                    );
                return Err(NotFinished::new(
                    Some(run_id.to_string()),
                    "settled",
                    format!(
                        "the run had not settled after {} s{cancelled}",
                        limit.as_secs()
                    ),
                ));
            }
            _ => tokio::time::sleep(POLL_EVERY).await,
        }
    }
}

/// Runs one example to where it settles, then scores it: its results line.
pub async fn run_example(
    runs: &dyn ExampleRuns,
    judge: Option<&dyn ExampleJudge>,
    example: &ResolvedExample,
) -> ExampleResult {
    let finished = match runs.run(&example.envelope, example_limit(example)).await {
        Ok(finished) => finished,
        Err(NotFinished { run_id, failed }) => {
            let mut result = ExampleResult::not_run(&example.id, example.line, run_id, failed);
            result.api = runs.api();
            return result;
        }
    };
    let panel = match judge {
        Some(judge) if finished.status == "completed" => {
            let objective = example.envelope["objective"].as_str().unwrap_or_default();
            PanelAnswer::Answered(
                judge
                    .judge(
                        &example.id,
                        objective,
                        &finished.output,
                        example.expect.reference.as_ref(),
                    )
                    .await,
            )
        }
        Some(_) => PanelAnswer::RunNotCompleted,
        None => PanelAnswer::NotAsked,
    };
    scored_example(example, finished, panel, runs.api())
}

/// What the judge panel said of an example's output.
pub(super) enum PanelAnswer {
    /// No panel judges this evaluation.
    NotAsked,
    /// A panel judges it, but the run did not complete: nothing to judge.
    RunNotCompleted,
    /// The panel's outcome, or why it gave none.
    Answered(Result<JudgeOutcome, JudgeFailure>),
}

/// An example's results line: its settled run checked by the example's
/// deterministic checks and the panel's answer.
pub(super) fn scored_example(
    example: &ResolvedExample,
    finished: FinishedRun,
    panel: PanelAnswer,
    api: Option<String>,
) -> ExampleResult {
    let settled = SettledRun {
        status: finished.status.clone(),
        output: finished.output.clone(),
        cost_usd: finished.cost_usd,
        duration_ms: finished.duration_ms,
    };
    let expect = &example.expect;
    let mut checks = deterministic_checks(expect, &settled);
    let mut judged = None;
    match panel {
        PanelAnswer::Answered(Ok(outcome)) => {
            checks.extend(judge_check(expect, Ok(outcome.score)));
            judged = Some(outcome);
        }
        PanelAnswer::Answered(Err(failure)) => {
            // A panel that was asked and failed fails the example,
            // whether or not it sets a minimum score.
            let reason = Unjudged::Failed(failure);
            checks.extend(judge_check(expect, Err(&reason)));
            if expect.min_judge_score.is_none() {
                checks.push(Check::new("judged", false, reason.to_string()));
            }
        }
        PanelAnswer::RunNotCompleted => checks.extend(judge_check(
            expect,
            Err(&Unjudged::RunEnded(finished.status.clone())),
        )),
        PanelAnswer::NotAsked => checks.extend(judge_check(expect, Err(&Unjudged::NoPanel))),
    }
    ExampleResult {
        id: example.id.clone(),
        line: example.line,
        run_id: Some(finished.run_id),
        api,
        passed: checks.iter().all(|check| check.passed),
        status: Some(finished.status),
        checks,
        cost_usd: finished.cost_usd,
        tokens: finished.tokens,
        duration_ms: finished.duration_ms,
        model_by_node: finished.model_by_node,
        judge: judged,
    }
}
