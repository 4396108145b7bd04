//! `baton serve`: the HTTP API and SSE streams on localhost, with the step
//! worker, the schedules and the store's upkeep in the same process;
//! `/metrics` (`metrics_route`) and `/evaluations` (`serve_evaluations`).

pub mod metrics_route;
pub mod serve_evaluations;

use std::path::PathBuf;
use std::sync::Arc;

use baton_bootstrap::stores::StoreChoice;

use crate::failure::{Ended, Outcome, invalid};
use crate::setup::{configuration, load_registry, services_on, startup};

/// `baton serve`: the HTTP API and the step worker in one local process.
pub async fn serve(
    store: StoreChoice,
    address: std::net::SocketAddr,
    registry: Option<PathBuf>,
) -> Outcome {
    let configuration = configuration()?;
    let registry = load_registry(registry, &configuration)?;
    // `/metrics` names the registry files' capabilities, never a tenant's
    // registration.
    let counters = Arc::new(baton_runtime::observe::telemetry::RunCounters::naming_only(
        registry
            .capabilities()
            .map(|capability| capability.capability_id.clone()),
    ));
    let (services, queue, sweeper) =
        services_on(&store, registry.clone(), &configuration, counters.clone()).await?;
    let authenticator = match baton_bootstrap::authenticator_from(&configuration, Some("local")) {
        Ok(authenticator) => authenticator,
        Err(error) => return Err(startup(error)),
    };
    if authenticator.is_anonymous() {
        eprintln!(
            "baton serve: BATON_API_TOKENS is not set: every request is accepted as tenant `local` (local development only)"
        );
    }
    let listener = match tokio::net::TcpListener::bind(address).await {
        Ok(listener) => listener,
        Err(error) => return Err(invalid(format!("cannot listen on {address}: {error}"))),
    };
    let bound = listener
        .local_addr()
        .map(|bound| bound.to_string())
        .unwrap_or_else(|_| address.to_string());
    eprintln!("baton serve: listening on http://{bound}/api/v1/flex (store: {store:?})");
    let metrics_access = metrics_route::MetricsAccess::of(
        configuration.metrics_token.as_deref(),
        authenticator.is_anonymous(),
    );
    if metrics_access == metrics_route::MetricsAccess::Refused {
        eprintln!(
            "baton serve: /metrics is refused until BATON_METRICS_TOKEN is set (its own token; the API's tokens do not read it)"
        );
    }
    let app = baton_bootstrap::api_router(&services, authenticator, &configuration).merge(
        metrics_route::metrics_router(counters.clone(), metrics_access),
    );
    // `/api/v1/flex/evaluations`: datasets run here, kept in the store.
    let records = serve_evaluations::evaluation_records(&store, &configuration)
        .await
        .map_err(|error| invalid(format!("the evaluations' store: {error}")))?;
    let evaluations = serve_evaluations::served_evaluations(
        &services,
        registry.clone(),
        configuration
            .retention()
            .with_tenant_settings(registry.tenant_settings()),
        records,
    )
    .await
    .map_err(|error| invalid(format!("the evaluations' store: {error}")))?;
    let app = app.layer(axum::Extension(evaluations));
    let (stop_sender, mut stop_receiver) = tokio::sync::watch::channel(false);
    let sweeping = sweeper
        .with_memory(services.memory.clone())
        .spawn(&configuration, stop_receiver.clone());
    // `serve` keeps the store's schedules: it fires each one when it is due.
    let mut stop_for_schedules = stop_receiver.clone();
    let schedules = services.schedules.clone();
    let keeping_schedules = tokio::spawn(async move {
        baton_runtime::workers::keep_schedules_until(
            &schedules,
            baton_runtime::workers::SCHEDULE_TICK,
            async move {
                let _ = stop_for_schedules.changed().await;
            },
        )
        .await;
    });
    let worker = tokio::spawn(baton_runtime::workers::run_worker_with_bound(
        services.steps.clone(),
        queue,
        async move {
            let _ = stop_receiver.changed().await;
        },
        configuration.worker_max_steps_in_flight,
    ));
    baton_http::server::serve_with_limits(
        listener,
        app,
        baton_http::server::ConnectionLimits {
            header_read_timeout: configuration.header_read_timeout,
            max_header_bytes: configuration.max_header_bytes,
        },
        async move {
            stop_signal().await;
            // The worker takes no new step from now on (its steps in
            // flight finish) while the server closes its connections.
            let _ = stop_sender.send(true);
        },
    )
    .await;
    let _ = worker.await;
    let _ = keeping_schedules.await;
    sweeping.abort();
    Ok(Ended::Completed)
}

/// Ctrl-C (SIGINT) or SIGTERM (a container's stop): `baton serve` stops
/// taking requests, finishes its steps and flushes its spans.
async fn stop_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut terminate) => {
                terminate.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate => {}
    }
}
