//! `baton mcp`: Baton's MCP server (`baton_http::protocols::mcp`) on stdio, with the
//! step worker (and, on DynamoDB + SQS, the sweepers) in-process.

use crate::failure::{Ended, Outcome};
use std::path::PathBuf;
use std::sync::Arc;

use baton_bootstrap::stores::StoreChoice;

/// `baton mcp`: Baton's MCP tools on stdio (JSON-RPC on stdin and stdout;
/// nothing else is written to stdout), the step worker in-process, every
/// call tenant `local`'s. Ends when the client closes stdin.
pub async fn mcp(store: StoreChoice, registry: Option<PathBuf>) -> Outcome {
    use rmcp::ServiceExt;
    let configuration = crate::setup::configuration()?;
    let registry = crate::setup::load_registry(registry, &configuration)?;
    let counters = Arc::new(baton_runtime::observe::telemetry::RunCounters::default());
    let (services, queue, sweeper) =
        crate::setup::services_on(&store, registry, &configuration, counters).await?;
    // The stdio transport has no tokens: the server serves tenant `local`.
    let authenticator = match baton_http::TokenAuthenticator::from_configuration("") {
        Ok(authenticator) => {
            authenticator.allowing_anonymous_when_unconfigured(crate::setup::LOCAL_TENANT)
        }
        Err(error) => return Err(crate::failure::invalid(error)),
    };
    let state = baton_bootstrap::api_state(&services, authenticator, &configuration);
    let (stop_sender, mut stop_receiver) = tokio::sync::watch::channel(false);
    let stop_receiver_for_sweeper = stop_receiver.clone();
    let worker = tokio::spawn(baton_runtime::workers::run_worker_with_bound(
        services.steps.clone(),
        queue,
        async move {
            let _ = stop_receiver.changed().await;
        },
        configuration.worker_max_steps_in_flight,
    ));
    eprintln!("baton mcp: serving Baton's tools on stdio (store: {store:?})");
    let server =
        baton_http::protocols::mcp::BatonMcpServer::for_tenant(state, crate::setup::LOCAL_TENANT);
    let sweeping = sweeper.spawn(&configuration, stop_receiver_for_sweeper);
    let code = match server.serve(rmcp::transport::stdio()).await {
        Ok(running) => match running.waiting().await {
            Ok(_) => Ok(Ended::Completed),
            Err(error) => Err(crate::failure::failed(format!("mcp: {error}"))),
        },
        Err(error) => Err(crate::failure::invalid(format!(
            "mcp: the client did not start a session: {error}"
        ))),
    };
    let _ = stop_sender.send(true);
    let _ = worker.await;
    sweeping.abort();
    code
}
