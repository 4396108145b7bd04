//! Lambda function `sweeper`: runs on a schedule. Re-sends, once, step
//! messages no step has consumed from the outbox (older than
//! `BATON_SWEEP_AFTER_SECONDS`, default 300): a crash between commit and
//! send, or a message waiting in a backlog (a duplicate is harmless). Node leases need no sweeping:
//! a claim past its expiry is simply taken over. Links neither a model
//! client nor the HTTP router.

use baton_bootstrap::{Configuration, process_environment};
use lambda_runtime::{LambdaEvent, service_fn};

#[global_allocator]
static GLOBAL_ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Outbox entries re-sent per invocation at most.
const SWEEP_LIMIT: usize = 1000;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let configuration = Configuration::from_variables(&process_environment)?;
    baton_bootstrap::init_json_logging(&configuration, "info", "baton-sweeper")?;
    let sweeper = baton_bootstrap::cloud_sweeper(&configuration).await?;
    let sweeper = &sweeper;
    let sweep_after = configuration.sweep_after;
    lambda_runtime::run(service_fn(
        move |_scheduled: LambdaEvent<serde_json::Value>| async move {
            let resent = sweeper.sweep(sweep_after, SWEEP_LIMIT).await;
            baton_bootstrap::flush_traces().await;
            let resent = resent?;
            Ok::<_, lambda_runtime::Error>(serde_json::json!({ "resent": resent }))
        },
    ))
    .await
}
