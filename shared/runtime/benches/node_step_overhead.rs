//! Engine overhead per node step: a 5-node linear plan (strategy → writer →
//! review → writer → review) run to completion on the in-memory store and
//! queue with an instant in-process fake provider (a test double for the
//! model endpoint that returns a precomputed valid answer). Everything else
//! is the real engine: planning, claims, context bundles, validation,
//! commits, outbox, event log.
//!
//! The same plan runs on the in-memory store (group `engine`) and on the
//! embedded durable SQLite store (group `sqlite`: a file in a temporary
//! folder, WAL, `synchronous = FULL`), so the price of durability on a
//! laptop is the difference.
//!
//! Group `hundred_five_node_runs_at_once` runs a hundred of those runs at
//! once on one worker (the local runner: concurrent steps), so on SQLite
//! their commits share transactions (group commit).
//!
//! Group `traces` runs it as deployed (the model behind the router, which
//! opens each call's span) with traces off and on.
//!
//! `cargo bench -p baton-runtime --bench node_step_overhead`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

use std::sync::Arc;

use baton_core::state::run::RunStatus;
use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::ports::{LlmProvider, StepQueue};
use baton_runtime::workers::LocalRunner;
use baton_test_support::TestServices;
use baton_test_support::five_stages::{
    InstantFiveStageModel, five_stage_envelope, five_stage_registry,
};
use criterion::{Criterion, criterion_group, criterion_main};

/// The same allocator the shipped binaries use.
#[global_allocator]
static GLOBAL_ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn bench_node_steps(criterion: &mut Criterion) {
    let registry = Arc::new(five_stage_registry(&|role| format!("Act as the {role}.")));
    let provider: Arc<dyn LlmProvider> = Arc::new(InstantFiveStageModel::new(&registry, 0));
    // One compiled-schema cache for the process, as a deployed worker has.
    let validators = Arc::new(baton_core::basics::schema::ValidatorCache::new());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let envelope = five_stage_envelope();
    let state_folder = tempfile::tempdir().unwrap();
    let sqlite = Arc::new(
        baton_sqlite::SqliteStore::open(&state_folder.path().join("bench.sqlite3")).unwrap(),
    );
    for (group_name, durable) in [("engine", None), ("sqlite", Some(sqlite))] {
        let build_services = |queue: Arc<InMemoryStepQueue>| {
            let mut builder = TestServices::with_model(provider.clone())
                .registry(registry.clone())
                .validators(validators.clone())
                .queue(queue)
                .worker_id("bench");
            if let Some(store) = &durable {
                builder = builder
                    .store(store.clone())
                    .capability_directory(store.clone());
            }
            builder.build().services
        };
        let run_once = || async {
            let queue = Arc::new(InMemoryStepQueue::new());
            let services = build_services(queue.clone());
            let submitted = services.runs.submit("bench", &envelope).await.unwrap();
            let runner = LocalRunner {
                steps: services.steps,
                runs: services.runs,
                queue,
            };
            runner
                .run_until_settled("bench", &submitted.run_id)
                .await
                .unwrap()
        };
        assert_eq!(
            runtime.block_on(run_once()),
            RunStatus::Completed,
            "the bench plan must complete"
        );
        let plan_only = || async {
            let queue = Arc::new(InMemoryStepQueue::new());
            let services = build_services(queue.clone());
            services.runs.submit("bench", &envelope).await.unwrap();
            let plan_message = queue
                .receive(1, std::time::Duration::ZERO)
                .await
                .unwrap()
                .remove(0);
            services.steps.handle(&plan_message.message).await.unwrap()
        };
        // Ten or a hundred runs at once: their steps interleave (on
        // SQLite, their commits share transactions and syncs: group commit).
        let many_at_once = |runs: usize| {
            let (build_services, envelope) = (&build_services, &envelope);
            async move {
                let queue = Arc::new(InMemoryStepQueue::new());
                let services = build_services(queue.clone());
                let mut run_ids = Vec::with_capacity(runs);
                for _ in 0..runs {
                    run_ids.push(
                        services
                            .runs
                            .submit("bench", envelope)
                            .await
                            .unwrap()
                            .run_id,
                    );
                }
                let runner = LocalRunner {
                    steps: services.steps,
                    runs: services.runs,
                    queue,
                };
                runner.drain().await.unwrap();
                run_ids.len()
            }
        };
        let mut group = criterion.benchmark_group(group_name);
        group.bench_function("five_node_run_submit_to_complete", |bencher| {
            bencher.iter(|| runtime.block_on(run_once()))
        });
        group.sample_size(10);
        group.bench_function("ten_five_node_runs_at_once", |bencher| {
            bencher.iter(|| runtime.block_on(many_at_once(10)))
        });
        group.bench_function("hundred_five_node_runs_at_once", |bencher| {
            bencher.iter(|| runtime.block_on(many_at_once(100)))
        });
        group.sample_size(100);
        group.bench_function("submit_and_plan_step_only", |bencher| {
            bencher.iter(|| runtime.block_on(plan_only()))
        });
        group.finish();
    }
    bench_traces(
        criterion,
        &runtime,
        provider,
        &registry,
        &validators,
        &envelope,
    );
    bench_the_sync_floor(criterion, state_folder.path());
    println!("per node step = (five_node_run_submit_to_complete - submit_and_plan_step_only) / 5");
    println!(
        "per node step at N runs at once = (N_five_node_runs_at_once / N - submit_and_plan_step_only) / 5"
    );
    println!(
        "a SQLite node step = the in-memory node step + one sync (sync_floor) + the rest (SQLite's own work)"
    );
}

/// Group `sync_floor`: what one durable commit cannot go below on this
/// disk, in the folder the SQLite bench's file is in: a 4 KiB page
/// appended to a file and synced with `fdatasync` (`File::sync_data`, what
/// the bundled SQLite calls, built with `HAVE_FDATASYNC`), and with `fsync`
/// (`File::sync_all`, what it called before).
fn bench_the_sync_floor(criterion: &mut Criterion, folder: &std::path::Path) {
    use std::io::Write;
    let page = [7u8; 4096];
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(folder.join("sync-floor.bin"))
        .unwrap();
    let mut group = criterion.benchmark_group("sync_floor");
    group.bench_function("append_a_page_and_fdatasync", |bencher| {
        bencher.iter(|| {
            file.write_all(&page).unwrap();
            file.sync_data().unwrap();
        })
    });
    group.bench_function("append_a_page_and_fsync", |bencher| {
        bencher.iter(|| {
            file.write_all(&page).unwrap();
            file.sync_all().unwrap();
        })
    });
    group.finish();
}

/// Test double for a trace collector: takes every batch and drops it (the
/// cost measured is the process's: spans built, ended and handed to the
/// batch processor, as with the OTLP exporter, minus its network send on
/// the processor's own thread).
#[derive(Debug)]
struct DiscardingExporter;

impl opentelemetry_sdk::trace::SpanExporter for DiscardingExporter {
    async fn export(
        &self,
        _batch: Vec<opentelemetry_sdk::trace::SpanData>,
    ) -> opentelemetry_sdk::error::OTelSdkResult {
        Ok(())
    }
}

/// Group `traces`: the in-memory run as deployed (its model behind the
/// `ModelRouter`, which opens each call's `gen_ai.chat` span), traces off
/// (no layer: the default) and on (the functions' layer and filter over a
/// batch processor).
fn bench_traces(
    criterion: &mut Criterion,
    runtime: &tokio::runtime::Runtime,
    provider: Arc<dyn LlmProvider>,
    registry: &Arc<baton_core::catalog::registry::Registry>,
    validators: &Arc<baton_core::basics::schema::ValidatorCache>,
    envelope: &serde_json::Value,
) {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    let routed: Arc<dyn LlmProvider> =
        Arc::new(baton_runtime::models::router::ModelRouter::new(provider));
    let build_services = |queue: Arc<InMemoryStepQueue>| {
        TestServices::with_model(routed.clone())
            .registry(registry.clone())
            .validators(validators.clone())
            .queue(queue)
            .worker_id("bench")
            .build()
            .services
    };
    let run_once = || async {
        let queue = Arc::new(InMemoryStepQueue::new());
        let services = build_services(queue.clone());
        let submitted = services.runs.submit("bench", envelope).await.unwrap();
        let runner = LocalRunner {
            steps: services.steps,
            runs: services.runs,
            queue,
        };
        runner
            .run_until_settled("bench", &submitted.run_id)
            .await
            .unwrap()
    };
    let plan_only = || async {
        let queue = Arc::new(InMemoryStepQueue::new());
        let services = build_services(queue.clone());
        services.runs.submit("bench", envelope).await.unwrap();
        let plan_message = queue
            .receive(1, std::time::Duration::ZERO)
            .await
            .unwrap()
            .remove(0);
        services.steps.handle(&plan_message.message).await.unwrap()
    };
    let mut group = criterion.benchmark_group("traces");
    group.bench_function("off_five_node_run", |bencher| {
        bencher.iter(|| runtime.block_on(run_once()))
    });
    group.bench_function("off_submit_and_plan_step_only", |bencher| {
        bencher.iter(|| runtime.block_on(plan_only()))
    });
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(DiscardingExporter)
        .with_id_generator(baton_traces::TraceExport::id_generator())
        .build();
    let export = baton_traces::TraceExport::with_provider(provider);
    let exported = tracing_subscriber::filter::Targets::new()
        .with_target("baton", tracing_subscriber::filter::LevelFilter::INFO);
    {
        // This thread (the current-thread runtime's) exports while it lives.
        let _traced = tracing::subscriber::set_default(
            tracing_subscriber::registry().with(export.layer().with_filter(exported)),
        );
        assert_eq!(runtime.block_on(run_once()), RunStatus::Completed);
        group.bench_function("on_five_node_run", |bencher| {
            bencher.iter(|| runtime.block_on(run_once()))
        });
        group.bench_function("on_submit_and_plan_step_only", |bencher| {
            bencher.iter(|| runtime.block_on(plan_only()))
        });
    }
    group.finish();
    export.shutdown();
}

criterion_group!(benches, bench_node_steps);
criterion_main!(benches);
