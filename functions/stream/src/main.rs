//! Lambda function `stream`: the SSE routes (`POST /run.stream`,
//! `GET /runs/{id}/events`) through a function URL with
//! `InvokeMode: RESPONSE_STREAM`. The same router as `api`; frames are
//! relayed as they are committed, with heartbeats, until the run settles.

use std::sync::Arc;

#[global_allocator]
static GLOBAL_ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    baton_bootstrap::init_json_logging("info");
    let worker_id = std::env::var("AWS_LAMBDA_LOG_STREAM_NAME").unwrap_or_else(|_| "stream".into());
    let orchestrator = baton_bootstrap::cloud_orchestrator_from_environment(worker_id).await?;
    let authenticator = baton_bootstrap::authenticator_from_environment(None)?;
    let app = baton_http::router(baton_http::ApiState {
        orchestrator,
        authenticator: Arc::new(authenticator),
        settings: baton_http::HttpSettings::default(),
    });
    lambda_http::run_with_streaming_response(app).await
}
