//! Lambda function `ingest`: SQS-triggered. Other services start runs by
//! sending `{"tenantId", "envelope"}`; an `idempotencyKey` in the envelope
//! makes a re-sent submission return the same run. Records that cannot be
//! submitted are reported as failures, so they end in the dead-letter queue.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{LambdaEvent, service_fn};

#[global_allocator]
static GLOBAL_ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    baton_bootstrap::init_json_logging("info");
    let orchestrator =
        baton_bootstrap::cloud_orchestrator_from_environment("ingest".into()).await?;
    lambda_runtime::run(service_fn(|event: LambdaEvent<SqsEvent>| {
        let orchestrator = orchestrator.clone();
        async move {
            let records = event
                .payload
                .records
                .into_iter()
                .filter_map(|record| Some((record.message_id?, record.body.unwrap_or_default())))
                .collect();
            let failed = baton_runtime::worker::process_ingest_batch(&orchestrator, records).await;
            let mut response = SqsBatchResponse::default();
            for message_id in failed {
                response.add_failure(message_id);
            }
            Ok::<_, lambda_runtime::Error>(response)
        }
    }))
    .await
}
