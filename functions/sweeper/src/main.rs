//! Lambda function `sweeper`: runs on a schedule. Re-drives stalled runs:
//! a step message no step has consumed from the outbox, quiet for
//! `BATON_SWEEP_AFTER_SECONDS` (default two node leases) with no live lease
//! in its run, is re-sent, and the next re-send waits twice as long (a
//! crash between commit and send, a step Lambda that died between the
//! queue's receive and its first hold, a message waiting in a backlog; a
//! duplicate is harmless). Then
//! reads the step queue's dead-letter queue (`BATON_DEAD_LETTER_QUEUE_URL`)
//! and ends the run of each step message found there, `step_failed`. Then
//! retention's pass: the items of ended runs that their ending commit could
//! not reach are stamped with the run's expiry, so DynamoDB's TTL deletes
//! the run whole (`RetentionPass::SWEEPER_FUNCTION`: batches until 15 s
//! before the invocation's deadline, 45 s at most). Then the schedules' keeper tick: a schedule whose change
//! EventBridge Scheduler did not take is handed to it again until the two
//! agree. Then the served evaluations' passes while any runs (every 2 s for
//! 30 s at most, `EvaluationPasses::SWEEPER_FUNCTION`): settled examples
//! scored, the next started (the api function ran each one's first pass).
//! Node leases need no sweeping: a claim past its expiry is simply taken
//! over.
//! Links neither a model client nor the HTTP router.

use baton_bootstrap::{Configuration, process_environment};
use lambda_runtime::{LambdaEvent, service_fn};

#[global_allocator]
static GLOBAL_ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Quiet outbox entries looked at per invocation at most.
const SWEEP_LIMIT: usize = 1000;

/// Dead-lettered messages read per invocation at most.
const DEAD_LETTER_LIMIT: usize = 100;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let configuration = Configuration::from_variables(&process_environment)?;
    baton_bootstrap::init_json_logging(&configuration, "info", "baton-sweeper")?;
    let (sweeper, retention) = baton_bootstrap::cloud_sweeper(&configuration).await?;
    let (sweeper, retention) = (&sweeper, &retention);
    let services = baton_bootstrap::cloud_services_without_model(&configuration, "sweeper").await?;
    let dead_letters =
        baton_bootstrap::dead_letter_reader(&configuration, services.steps.clone()).await;
    let dead_letters = &dead_letters;
    let evaluations =
        baton_bootstrap::evaluations::cloud_evaluations(&configuration, &services, Ok(())).await?;
    let evaluations = &evaluations;
    let services = &services;
    let sweep_after = configuration.sweep_after;
    lambda_runtime::run(service_fn(
        move |scheduled: LambdaEvent<serde_json::Value>| async move {
            let deadline = scheduled.context.deadline();
            let swept = sweeper.sweep(sweep_after, SWEEP_LIMIT).await;
            let read = match dead_letters {
                Some(reader) => Some(reader.read(DEAD_LETTER_LIMIT).await),
                None => None,
            };
            let schedules = services.schedules.fire_due().await;
            let evaluated =
                baton_runtime::services::dataset_evaluations::EvaluationPasses::SWEEPER_FUNCTION
                    .run(evaluations)
                    .await;
            let left = deadline
                .duration_since(std::time::SystemTime::now())
                .unwrap_or_default();
            let stamped = baton_runtime::services::RetentionPass::SWEEPER_FUNCTION
                .ending_before(left)
                .run(retention.as_ref(), &baton_runtime::clock::SystemClock)
                .await;
            baton_bootstrap::flush_traces().await;
            let swept = swept?;
            let read = read.transpose()?.unwrap_or_default();
            let stamped = stamped?;
            let schedules = schedules?;
            let evaluated = evaluated.map_err(Box::new)?;
            Ok::<_, lambda_runtime::Error>(serde_json::json!({
                "resent": swept.resent,
                "quietButHeld": swept.held,
                "resendsFailed": swept.failed,
                "deadLetteredRunsEnded": read.runs_ended,
                "deadLettersStale": read.stale_dropped,
                "deadLettersLeft": read.left,
                "endedRunsStamped": stamped.runs,
                "itemsStamped": stamped.items,
                "endedRunsLeft": stamped.more,
                "schedulesInStep": schedules.triggers_settled,
                "schedulesOutOfStep": schedules.triggers_out_of_step,
                "evaluationsAdvanced": evaluated.advanced,
                "evaluationsEnded": evaluated.ended,
                "evaluationPassesFailed": evaluated.failed,
                "evaluationsLeft": evaluated.left,
            }))
        },
    ))
    .await
}
