//! Instruction counts of the hot paths, under Valgrind's Callgrind
//! (`gungraun`): exact and repeatable on a noisy machine, so `.ci/run`
//! holds each path to its budget (`benches/instruction_budgets.json`,
//! checked by `baton-instruction-gate`). Each benchmark's set-up (services,
//! a submitted run, a planned run) runs outside the count; only the path
//! itself is counted, and what it returns is dropped outside it too.
//!
//! - `plan_step`: the plan step of a five-node run (in memory);
//! - `node_step`: its first node step (in memory);
//! - `five_node_run`: a whole five-node run, submit to complete (in memory),
//!   the first in its process (the contracts' schemas are compiled in it);
//! - `five_node_run_warm`: the same run again in a process that has run it
//!   once (outside the count): what each run costs a serving process;
//! - `sqlite_node_step`: the first node step on a SQLite file (WAL,
//!   `synchronous = FULL`); its system calls are counted by the
//!   `sqlite_step_syscalls` bench;
//! - `judge_round`: one scoring round of a five-judge panel.
//!
//! The model is a test double answering instantly from a table (and the
//! judges' a fixed verdict). `BATON_BENCH_EXTRA_WORK` (a count, default 0)
//! makes the double spend that many rounds of hashing per call: the gate's
//! own test slows the step with it and expects the gate to fail.
//!
//! `cargo bench -p baton-runtime --bench instructions` (needs `valgrind`
//! and `gungraun-runner` 0.19.4: `.ci/run` installs both).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench code

use std::hint::black_box;
use std::sync::Arc;

use async_trait::async_trait;
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunStatus, StepMessage, TokenUsage};
use baton_runtime::error::LlmError;
use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta, StepQueue};
use baton_runtime::services::{Services, StepOutcome};
use baton_runtime::workers::LocalRunner;
use baton_test_support::TestServices;
use baton_test_support::five_stages::{
    InstantFiveStageModel, five_stage_envelope, five_stage_registry, spend_work,
};
use gungraun::Callgrind;
use gungraun::prelude::*;
use serde_json::json;
use tokio::sync::mpsc::UnboundedSender;

/// The same allocator the shipped binaries use.
#[global_allocator]
static GLOBAL_ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn extra_work() -> u64 {
    std::env::var("BATON_BENCH_EXTRA_WORK")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(0)
}

/// Everything a path needs, built outside the count; returned by the
/// benchmark so it is dropped outside the count as well.
struct Prepared {
    runtime: tokio::runtime::Runtime,
    services: Services,
    queue: Arc<InMemoryStepQueue>,
    /// The step to count, when the path is one step.
    message: Option<StepMessage>,
    /// A SQLite file's folder, kept until the end.
    _folder: Option<tempfile::TempDir>,
}

fn services(queue: Arc<InMemoryStepQueue>, sqlite: Option<&std::path::Path>) -> Services {
    let registry = Arc::new(five_stage_registry(&|role| format!("Act as the {role}.")));
    let provider: Arc<dyn LlmProvider> =
        Arc::new(InstantFiveStageModel::new(&registry, extra_work()));
    let mut builder = TestServices::with_model(provider)
        .registry(registry)
        .queue(queue)
        .worker_id("bench");
    if let Some(path) = sqlite {
        let store = Arc::new(baton_sqlite::SqliteStore::open(path).unwrap());
        builder = builder.store(store.clone()).capability_directory(store);
    }
    builder.build().services
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A submitted run; with `planned`, its plan step done. The next step's
/// message is taken from the queue.
fn prepared_run(planned: bool, on_sqlite: bool) -> Prepared {
    let runtime = runtime();
    let folder = on_sqlite.then(|| tempfile::tempdir().unwrap());
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = services(
        queue.clone(),
        folder
            .as_ref()
            .map(|folder| folder.path().join("bench.sqlite3"))
            .as_deref(),
    );
    let message = runtime.block_on(async {
        services
            .runs
            .submit("bench", &five_stage_envelope())
            .await
            .unwrap();
        let mut next = queue.receive(1, std::time::Duration::ZERO).await.unwrap();
        if planned {
            let plan = next.remove(0);
            services.steps.handle(&plan.message).await.unwrap();
            queue.acknowledge(&plan.receipt).await.unwrap();
            next = queue.receive(1, std::time::Duration::ZERO).await.unwrap();
        }
        next.remove(0).message
    });
    Prepared {
        runtime,
        services,
        queue,
        message: Some(message),
        _folder: folder,
    }
}

fn prepared_plan_step() -> Prepared {
    prepared_run(false, false)
}

fn prepared_node_step() -> Prepared {
    prepared_run(true, false)
}

fn prepared_sqlite_node_step() -> Prepared {
    prepared_run(true, true)
}

fn prepared_services() -> Prepared {
    let queue = Arc::new(InMemoryStepQueue::new());
    Prepared {
        runtime: runtime(),
        services: services(queue.clone(), None),
        queue,
        message: None,
        _folder: None,
    }
}

fn one_step(prepared: Prepared) -> (StepOutcome, Prepared) {
    let message = prepared.message.as_ref().unwrap();
    let outcome = prepared
        .runtime
        .block_on(prepared.services.steps.handle(black_box(message)))
        .unwrap();
    (outcome, prepared)
}

#[library_benchmark]
#[bench::five_node_run(setup = prepared_plan_step)]
fn plan_step(prepared: Prepared) -> (StepOutcome, Prepared) {
    one_step(prepared)
}

#[library_benchmark]
#[bench::first_of_five(setup = prepared_node_step)]
fn node_step(prepared: Prepared) -> (StepOutcome, Prepared) {
    one_step(prepared)
}

#[library_benchmark]
#[bench::first_of_five(setup = prepared_sqlite_node_step)]
fn sqlite_node_step(prepared: Prepared) -> (StepOutcome, Prepared) {
    one_step(prepared)
}

/// Services that have run the five-node run once already.
fn prepared_warm_services() -> Prepared {
    let prepared = prepared_services();
    let (status, prepared) = whole_run(prepared);
    assert_eq!(status, RunStatus::Completed);
    prepared
}

#[library_benchmark]
#[bench::submit_to_complete(setup = prepared_services)]
fn five_node_run(prepared: Prepared) -> (RunStatus, Prepared) {
    whole_run(prepared)
}

#[library_benchmark]
#[bench::second_in_process(setup = prepared_warm_services)]
fn five_node_run_warm(prepared: Prepared) -> (RunStatus, Prepared) {
    whole_run(prepared)
}

fn whole_run(prepared: Prepared) -> (RunStatus, Prepared) {
    let status = prepared.runtime.block_on(async {
        let submitted = prepared
            .services
            .runs
            .submit("bench", black_box(&five_stage_envelope()))
            .await
            .unwrap();
        let runner = LocalRunner {
            steps: prepared.services.steps.clone(),
            runs: prepared.services.runs.clone(),
            queue: prepared.queue.clone(),
        };
        runner
            .run_until_settled("bench", &submitted.run_id)
            .await
            .unwrap()
    });
    assert_eq!(status, RunStatus::Completed);
    (status, prepared)
}

/// Test double for the judges' model: a fixed verdict, at once.
struct InstantJudge {
    extra_work: u64,
}

#[async_trait]
impl LlmProvider for InstantJudge {
    fn model_name(&self) -> String {
        "instant-judge".into()
    }
    async fn complete(
        &self,
        _request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        spend_work(self.extra_work);
        Ok(ModelAnswer {
            content: json!({"score": 8.0, "feedback": "fine", "strengths": [], "improvements": []})
                .to_string(),
            usage: TokenUsage::default(),
            model: "instant-judge".into(),
        })
    }
}

struct PreparedPanel {
    runtime: tokio::runtime::Runtime,
    runner: baton_runtime::models::panels::PanelRunner,
    request: baton_judge::request::PanelRequest,
}

fn prepared_panel() -> PreparedPanel {
    PreparedPanel {
        runtime: runtime(),
        runner: baton_runtime::models::panels::PanelRunner::new(
            Arc::new(InstantJudge {
                extra_work: extra_work(),
            }),
            Arc::new(baton_runtime::clock::SystemClock),
        ),
        request: baton_judge::request::PanelRequest::parse(&json!({
            "request": {"id": "bench", "content": "A document.",
                        "selectedAgents": [{"id": "a"}, {"id": "b"}, {"id": "c"}, {"id": "d"}, {"id": "e"}]},
            "config": {"maxDiscussionRounds": 0, "roundTimeout": 5000, "consensusAlgorithm": "median",
                       "enableDiscussion": false, "convergenceThreshold": 0.5, "outlierDetection": true}
        }))
        .unwrap(),
    }
}

#[library_benchmark]
#[bench::five_judges(setup = prepared_panel)]
fn judge_round(prepared: PreparedPanel) -> (usize, PreparedPanel) {
    let output = prepared
        .runtime
        .block_on(
            prepared
                .runner
                .run(black_box(prepared.request.clone()), "bench", |_| {}),
        )
        .unwrap();
    (output.individual_results.len(), prepared)
}

library_benchmark_group!(
    name = hot_paths,
    benchmarks = [
        plan_step,
        node_step,
        five_node_run,
        five_node_run_warm,
        sqlite_node_step,
        judge_round
    ]
);

main!(
    config = LibraryBenchmarkConfig::default()
        .pass_through_envs(["BATON_BENCH_EXTRA_WORK"])
        .tool(Callgrind::with_args(["--cache-sim=no"])),
    library_benchmark_groups = hot_paths
);
