//! The tenant history bench's measurement, shared by the SQLite and the
//! DynamoDB (moto) bench: on a store where the bench seeded a tenant's past
//! runs, it times a submission (a live-run and a submission-rate limit
//! set), the live-run check and a page of one status, and counts the store
//! calls each makes (every call through the store's port, counted by
//! [`ThrottlingStore`] armed with no fault). The figures at 10 and at
//! 100,000 past runs are what the bench compares. For reference it also
//! counts what the check cost before the counter: paging the whole runs
//! list.

use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_core::state::listing::{MAX_RUNS_PER_PAGE, RunListQuery};
use baton_core::state::run::RunStatus;
use baton_runtime::ports::{RunQueries, RunStore};
use baton_runtime::services::{OrchestratorSettings, PerTenantLimit, TenantLimits};

use crate::fault_injection::ThrottlingStore;

/// One operation's figures.
#[derive(Debug, Clone)]
pub struct OperationFigures {
    pub operation: &'static str,
    /// Store calls one operation made (the same every round).
    pub store_calls: usize,
    /// What the adapter sent for them, when the bench counts it (DynamoDB
    /// requests through the bench's counting proxy).
    pub requests: Option<usize>,
    pub median: Duration,
}

/// Submissions the bench may make: far above what it makes, so neither
/// limit refuses, and both are checked.
const GENEROUS_LIMIT: usize = 1_000_000;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Measures `rounds` of each operation for `tenant` on `store`.
/// `requests_sent`, when given, reads a running count of what the adapter
/// sent (requests to DynamoDB); `with_reference` adds the paging reference.
pub async fn measure_tenant_operations(
    store: Arc<dyn RunStore>,
    tenant: &str,
    rounds: usize,
    requests_sent: Option<&(dyn Fn() -> usize + Sync)>,
    with_reference: bool,
) -> Vec<OperationFigures> {
    let sent = || requests_sent.map(|read| read());
    let counted = Arc::new(ThrottlingStore::new(store));
    let services = crate::TestServices::with_model(Arc::new(crate::schema_shaped_model::NoModel(
        "the tenant history bench",
    )))
    .store(counted.clone())
    .settings(OrchestratorSettings {
        tenant_limits: TenantLimits {
            live_runs: PerTenantLimit {
                every_tenant: Some(GENEROUS_LIMIT),
                ..PerTenantLimit::default()
            },
            submissions_per_minute: PerTenantLimit {
                every_tenant: Some(GENEROUS_LIMIT),
                ..PerTenantLimit::default()
            },
        },
        ..OrchestratorSettings::default()
    })
    .build()
    .services;
    let envelope = crate::plain_example_envelope("seed-10.1-sample-envelope.json");
    let mut figures = Vec::new();
    let mut timed = |operation: &'static str,
                     calls: Vec<usize>,
                     requests: Vec<Option<usize>>,
                     samples: Vec<Duration>| {
        assert!(
            calls.windows(2).all(|pair| pair[0] == pair[1]),
            "{operation}: every round makes the same store calls ({calls:?})"
        );
        figures.push(OperationFigures {
            operation,
            store_calls: calls[0],
            // The most any round sent (a retried conditional write sends more).
            requests: requests.into_iter().max().flatten(),
            median: median(samples),
        });
    };

    let (mut calls, mut requests, mut samples) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let before = counted.calls_seen();
        let sent_before = sent();
        let started = Instant::now();
        services.runs.submit(tenant, &envelope).await.unwrap();
        samples.push(started.elapsed());
        calls.push(counted.calls_seen() - before);
        requests.push(
            sent()
                .zip(sent_before)
                .map(|(after, before)| after - before),
        );
    }
    timed(
        "submit (live-run and rate limits set)",
        calls,
        requests,
        samples,
    );

    let (mut calls, mut requests, mut samples) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let before = counted.calls_seen();
        let sent_before = sent();
        let started = Instant::now();
        let live = counted.live_runs(tenant).await.unwrap();
        samples.push(started.elapsed());
        calls.push(counted.calls_seen() - before);
        requests.push(
            sent()
                .zip(sent_before)
                .map(|(after, before)| after - before),
        );
        assert!(live >= rounds as u64, "the submitted runs are at work");
    }
    timed("live-run check", calls, requests, samples);

    let (mut calls, mut requests, mut samples) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let before = counted.calls_seen();
        let sent_before = sent();
        let started = Instant::now();
        let page = counted
            .list_runs(
                tenant,
                &RunListQuery {
                    status: Some(RunStatus::Queued),
                    limit: 20,
                    cursor: None,
                    forked_from: None,
                },
            )
            .await
            .unwrap();
        samples.push(started.elapsed());
        calls.push(counted.calls_seen() - before);
        requests.push(
            sent()
                .zip(sent_before)
                .map(|(after, before)| after - before),
        );
        assert!(
            page.runs.iter().all(|run| run.status == RunStatus::Queued)
                && page.runs.len() == rounds.min(20),
            "the page lists the queued runs alone"
        );
    }
    timed(
        "GET /runs?status=queued (one page)",
        calls,
        requests,
        samples,
    );

    // Reference: the live-run count as it was taken before the counter,
    // every page of the runs list (one round: it is the slow one).
    if !with_reference {
        return figures;
    }
    let before = counted.calls_seen();
    let sent_before = sent();
    let started = Instant::now();
    let mut cursor = None;
    loop {
        let page = counted
            .list_runs(
                tenant,
                &RunListQuery {
                    status: None,
                    limit: MAX_RUNS_PER_PAGE,
                    cursor,
                    forked_from: None,
                },
            )
            .await
            .unwrap();
        match page
            .next_cursor
            .as_deref()
            .and_then(baton_core::state::listing::ListCursor::parse)
        {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    timed(
        "reference: counting by paging the runs list (before)",
        vec![counted.calls_seen() - before],
        vec![
            sent()
                .zip(sent_before)
                .map(|(after, before)| after - before),
        ],
        vec![started.elapsed()],
    );
    figures
}

/// Prints one size's figures as a table.
pub fn print_figures(store: &str, past_runs: usize, figures: &[OperationFigures]) {
    for figure in figures {
        let requests = figure
            .requests
            .map(|sent| format!("  {sent:>6} requests"))
            .unwrap_or_default();
        println!(
            "{store:<8} {past_runs:>7} past runs  {:<55} {:>6} store calls{requests}  median {:>9.2} ms",
            figure.operation,
            figure.store_calls,
            figure.median.as_secs_f64() * 1000.0
        );
    }
}
