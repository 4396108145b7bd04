//! Lambda function `sweeper`: runs on a schedule. Re-sends step messages
//! that a crash between commit and send left in the outbox (older than
//! `BATON_SWEEP_AFTER_SECONDS`, default 60). Node leases need no sweeping:
//! a claim past its expiry is simply taken over.

use std::time::Duration;

use lambda_runtime::{LambdaEvent, service_fn};

#[global_allocator]
static GLOBAL_ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    baton_bootstrap::init_json_logging("info");
    let sweep_after = std::env::var("BATON_SWEEP_AFTER_SECONDS")
        .ok()
        .map(|text| {
            text.parse::<u64>().map_err(|_| {
                format!("BATON_SWEEP_AFTER_SECONDS must be whole seconds (got `{text}`)")
            })
        })
        .transpose()?
        .unwrap_or(60);
    let orchestrator =
        baton_bootstrap::cloud_orchestrator_from_environment("sweeper".into()).await?;
    lambda_runtime::run(service_fn(|_scheduled: LambdaEvent<serde_json::Value>| {
        let orchestrator = orchestrator.clone();
        async move {
            let resent = baton_runtime::worker::sweep_stale_outbox(
                &orchestrator,
                Duration::from_secs(sweep_after),
                1000,
            )
            .await?;
            Ok::<_, lambda_runtime::Error>(serde_json::json!({ "resent": resent }))
        }
    }))
    .await
}
