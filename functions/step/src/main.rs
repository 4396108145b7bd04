//! Lambda function `step`: SQS-triggered. Each record is one step message;
//! the batch is performed concurrently and the records to redeliver are
//! reported as `batchItemFailures`.

use baton_bootstrap::{Configuration, process_environment};
use baton_core::basics::instant::Instant;
use baton_lambda_glue::run_sqs_batch_function;
use baton_runtime::workers::{QueueBatch, QueuedRecord, process_step_queue_batch};

#[global_allocator]
static GLOBAL_ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let configuration = Configuration::from_variables(&process_environment)?;
    baton_bootstrap::init_json_logging(&configuration, "info", "baton-step")?;
    let ports = baton_bootstrap::cloud_ports(&configuration).await?;
    let queue = ports.queue.clone();
    let secrets = baton_bootstrap::secret_store::secret_store(
        &configuration,
        baton_bootstrap::config::SecretSourceChoice::Aws,
    )
    .await;
    let services = baton_bootstrap::cloud_services_over(
        &configuration,
        &process_environment,
        ports,
        secrets,
        "step",
    )?;
    let (steps, queue) = (services.steps, queue.as_ref());
    run_sqs_batch_function(|batch| {
        let records = batch
            .records
            .into_iter()
            .map(|record| QueuedRecord {
                message_id: record.message_id,
                body: record.body,
                receipt: record.receipt_handle,
                receive_count: record.receive_count,
            })
            .collect();
        let batch = QueueBatch {
            records,
            deadline: Some(Instant::from_unix_millis(batch.deadline_unix_millis)),
            redelivery: Some(queue),
        };
        let steps = &steps;
        async move {
            let failed = process_step_queue_batch(steps, batch).await;
            // The execution environment may be frozen once this returns.
            baton_bootstrap::flush_traces().await;
            failed
        }
    })
    .await
}
