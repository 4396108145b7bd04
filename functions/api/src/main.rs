//! Lambda function `api`: the REST routes of `/api/v1/flex` (buffered
//! responses). Thin: build everything once, then hand each request to the
//! shared router.

use std::sync::Arc;

#[global_allocator]
static GLOBAL_ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    baton_bootstrap::init_json_logging("info");
    let worker_id = std::env::var("AWS_LAMBDA_LOG_STREAM_NAME").unwrap_or_else(|_| "api".into());
    let orchestrator = baton_bootstrap::cloud_orchestrator_from_environment(worker_id).await?;
    let authenticator = baton_bootstrap::authenticator_from_environment(None)?;
    let app = baton_http::router(baton_http::ApiState {
        orchestrator,
        authenticator: Arc::new(authenticator),
        settings: baton_http::HttpSettings::default(),
    });
    lambda_http::run(app).await
}
