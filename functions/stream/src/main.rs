//! Lambda function `stream`: the SSE routes (`POST /run.stream`,
//! `GET /runs/{id}/events`) through a function URL with
//! `InvokeMode: RESPONSE_STREAM`. The same router as `api`; frames are
//! relayed as they are committed, with heartbeats, until the run settles.

use baton_bootstrap::{Configuration, process_environment};
use baton_lambda_glue::{HttpResponses, run_http_function};

#[global_allocator]
static GLOBAL_ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    let configuration = Configuration::from_variables(&process_environment)?;
    baton_bootstrap::init_json_logging(&configuration, "info", "baton-stream")?;
    let services = baton_bootstrap::cloud_services_without_model(&configuration, "stream").await?;
    let authenticator = baton_bootstrap::authenticator_from(&configuration, None)?;
    let router = baton_bootstrap::api_router(&services, authenticator, &configuration);
    let router = baton_bootstrap::flushing_traces_after_each_response(router);
    run_http_function(router, HttpResponses::Streamed).await
}
