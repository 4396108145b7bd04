//! Lambda function `ingest`: SQS-triggered. Other services start runs by
//! sending `{"tenantId", "envelope"}`; an `idempotencyKey` in the envelope
//! makes a re-sent submission return the same run. Records that cannot be
//! submitted are reported as failures, so they end in the dead-letter queue.
//! EventBridge Scheduler sends schedules' fires here too
//! (`{"tenantId", "scheduleFire": {"scheduleId", "fireTime"}}`): each starts
//! the schedule's envelope once per fire time.

use baton_bootstrap::{Configuration, process_environment};
use baton_lambda_glue::run_sqs_batch_function;
use baton_runtime::workers::process_ingest_batch;

#[global_allocator]
static GLOBAL_ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let configuration = Configuration::from_variables(&process_environment)?;
    baton_bootstrap::init_json_logging(&configuration, "info", "baton-ingest")?;
    let services = baton_bootstrap::cloud_services_without_model(&configuration, "ingest").await?;
    let (runs, schedules) = (services.runs, services.schedules);
    run_sqs_batch_function(|batch| {
        let records = batch
            .records
            .into_iter()
            .map(|record| (record.message_id, record.body))
            .collect();
        let (runs, schedules) = (&runs, &schedules);
        async move {
            let failed = process_ingest_batch(runs, schedules, records).await;
            baton_bootstrap::flush_traces().await;
            failed
        }
    })
    .await
}
