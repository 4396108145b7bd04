//! Lambda function `step`: SQS-triggered. Each record is one step message;
//! the batch is performed concurrently and the records to redeliver are
//! reported as `batchItemFailures`.

use baton_bootstrap::{Configuration, process_environment};
use baton_lambda_glue::run_sqs_batch_function;
use baton_runtime::worker::process_step_batch;

#[global_allocator]
static GLOBAL_ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let configuration = Configuration::from_variables(&process_environment)?;
    baton_bootstrap::init_json_logging(&configuration, "info");
    let services =
        baton_bootstrap::cloud_services(&configuration, &process_environment, "step").await?;
    let steps = services.steps;
    run_sqs_batch_function(|records| process_step_batch(&steps, records)).await
}
