//! Lambda function `api`: the REST routes of `/api/v1/flex` (buffered
//! responses). Thin: read the configuration, build the services once, hand
//! each request to the shared router. Served evaluations run their first
//! pass in the request that accepts them; the sweeper runs the others.

use baton_bootstrap::{Configuration, process_environment};
use baton_lambda_glue::{HttpResponses, run_http_function};

#[global_allocator]
static GLOBAL_ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    let configuration = Configuration::from_variables(&process_environment)?;
    baton_bootstrap::init_json_logging(&configuration, "info", "baton-api")?;
    let services = baton_bootstrap::cloud_services_without_model(&configuration, "api").await?;
    let authenticator = baton_bootstrap::authenticator_from(&configuration, None)?;
    // Evaluations: the first pass here, the others in the sweeper.
    let evaluations =
        baton_bootstrap::evaluations::cloud_evaluations(&configuration, &services, Ok(())).await?;
    let router = baton_bootstrap::evaluations::serving_evaluations(
        baton_bootstrap::api_router(&services, authenticator, &configuration),
        baton_bootstrap::evaluations::served_by_passes(evaluations),
    );
    let router = baton_bootstrap::flushing_traces_after_each_response(router);
    run_http_function(router, HttpResponses::Buffered).await
}
