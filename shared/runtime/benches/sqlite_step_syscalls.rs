//! The system calls of one SQLite node step: how many times it syncs
//! (`fsync`, `fdatasync`) and writes (`write`, `pwrite64`). The bench runs
//! itself under `strace -f`: a planned five-node run on a SQLite file (WAL,
//! `synchronous = FULL`), then its first node step between two marker lines
//! on stderr; the calls of every thread between the markers are the
//! step's (the set-up's and the exit's are not). The counts are printed and
//! written to `<target>/gungraun/sqlite_step_syscalls.json`, which
//! `baton-instruction-gate` holds to the budgets beside the instruction
//! counts.
//!
//! The model is the five-stage workload's instant test double.
//!
//! `cargo bench -p baton-runtime --bench sqlite_step_syscalls` (needs
//! `strace`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench code

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::ports::StepQueue;
use baton_test_support::TestServices;
use baton_test_support::five_stages::{
    InstantFiveStageModel, five_stage_envelope, five_stage_registry,
};

/// The system calls counted.
const COUNTED: [&str; 4] = ["fsync", "fdatasync", "write", "pwrite64"];

/// In the child: a planned run on the SQLite file at `database`, then its
/// first node step between the markers.
fn child(database: &Path) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let registry = Arc::new(five_stage_registry(&|role| format!("Act as the {role}.")));
    let queue = Arc::new(InMemoryStepQueue::new());
    let store = Arc::new(baton_sqlite::SqliteStore::open(database).unwrap());
    let services = TestServices::with_model(Arc::new(InstantFiveStageModel::new(&registry, 0)))
        .registry(registry)
        .queue(queue.clone())
        .store(store.clone())
        .capability_directory(store)
        .worker_id("bench")
        .build()
        .services;
    runtime.block_on(async {
        services
            .runs
            .submit("bench", &five_stage_envelope())
            .await
            .unwrap();
        let plan = queue
            .receive(1, std::time::Duration::ZERO)
            .await
            .unwrap()
            .remove(0);
        services.steps.handle(&plan.message).await.unwrap();
        queue.acknowledge(&plan.receipt).await.unwrap();
        let node = queue
            .receive(1, std::time::Duration::ZERO)
            .await
            .unwrap()
            .remove(0);
        // One `write` each (`eprintln!` may make two).
        use std::io::Write;
        std::io::stderr()
            .write_all(format!("{BEGIN}\n").as_bytes())
            .unwrap();
        services.steps.handle(&node.message).await.unwrap();
        std::io::stderr()
            .write_all(format!("{END}\n").as_bytes())
            .unwrap();
    });
}

const BEGIN: &str = "BATON_SYSCALLS_BEGIN";
const END: &str = "BATON_SYSCALLS_END";

/// The counted calls of `strace -f`'s log between the markers (a call
/// split by another thread's is counted at its start, never at
/// `<... resumed>`; the 8-byte `write`s that wake the async runtime's
/// threads through an eventfd are not I/O, and are not counted).
fn calls_between_markers(log: &str) -> BTreeMap<String, u64> {
    let mut calls: BTreeMap<String, u64> =
        COUNTED.iter().map(|name| (name.to_string(), 0)).collect();
    let mut inside = false;
    for line in log.lines() {
        if line.contains(BEGIN) {
            inside = true;
            continue;
        }
        if line.contains(END) {
            return calls;
        }
        // `[pid] name(arguments) = result`
        let call = line
            .split_whitespace()
            .find(|word| word.contains('('))
            .and_then(|word| word.split('(').next());
        let wake_up = line.contains(r#""\1\0\0\0\0\0\0\0", 8)"#);
        if inside
            && !wake_up
            && let Some(name) = call
            && let Some(count) = calls.get_mut(name)
        {
            *count += 1;
        }
    }
    panic!("the traced step never reached its end marker:\n{log}");
}

fn traced_step() -> BTreeMap<String, u64> {
    let folder = tempfile::tempdir().unwrap();
    let log = folder.path().join("strace.log");
    let status = std::process::Command::new("strace")
        .args(["-f", "-e"])
        .arg(format!("trace={}", COUNTED.join(",")))
        .arg("-o")
        .arg(&log)
        .arg(std::env::current_exe().unwrap())
        .env(
            "BATON_SYSCALL_DATABASE",
            folder.path().join("bench.sqlite3"),
        )
        .status()
        .expect("strace runs (apt-get install strace)");
    assert!(status.success(), "the traced child failed: {status}");
    calls_between_markers(&std::fs::read_to_string(log).unwrap())
}

/// `<target>/gungraun`, beside the instruction counts.
fn output_folder() -> PathBuf {
    let executable = std::env::current_exe().unwrap();
    // `<target>/<profile>/deps/<bench>`
    let target = executable
        .ancestors()
        .nth(3)
        .expect("the bench runs from <target>/<profile>/deps");
    target.join("gungraun")
}

fn main() {
    if let Some(database) = std::env::var_os("BATON_SYSCALL_DATABASE") {
        child(Path::new(&database));
        return;
    }
    let step = traced_step();
    println!("one SQLite node step's system calls (every thread's, between the markers):");
    for (name, count) in &step {
        println!("  {name:<10} {count}");
    }
    let folder = output_folder();
    std::fs::create_dir_all(&folder).unwrap();
    let file = folder.join("sqlite_step_syscalls.json");
    std::fs::write(&file, serde_json::to_string_pretty(&step).unwrap()).unwrap();
    println!("written to {}", file.display());
}
