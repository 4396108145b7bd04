//! Lambda function `step`: SQS-triggered. Each record is one step message;
//! the batch is performed concurrently and the records to redeliver are
//! reported as `batchItemFailures` (the event source mapping needs
//! `ReportBatchItemFailures`).

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{LambdaEvent, service_fn};

#[global_allocator]
static GLOBAL_ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    baton_bootstrap::init_json_logging("info");
    let worker_id = std::env::var("AWS_LAMBDA_LOG_STREAM_NAME").unwrap_or_else(|_| "step".into());
    let orchestrator = baton_bootstrap::cloud_orchestrator_from_environment(worker_id).await?;
    lambda_runtime::run(service_fn(|event: LambdaEvent<SqsEvent>| {
        let orchestrator = orchestrator.clone();
        async move {
            let records = event
                .payload
                .records
                .into_iter()
                .filter_map(|record| Some((record.message_id?, record.body.unwrap_or_default())))
                .collect();
            let failed = baton_runtime::worker::process_step_batch(&orchestrator, records).await;
            let mut response = SqsBatchResponse::default();
            for message_id in failed {
                response.add_failure(message_id);
            }
            Ok::<_, lambda_runtime::Error>(response)
        }
    }))
    .await
}
