//! `baton-runtime`: the imperative shell around `baton-core`.
//!
//! It owns the narrow ports (run store, step queue, LLM provider, clock, ids),
//! the services that drive them (`services`: runs, steps, capabilities, the
//! outbox relay and sweeper), the one event follower (`follow`), the workers,
//! the registry loader (a folder, or the registry built into the binary),
//! the counters read off committed frames (`telemetry`: Prometheus text and
//! CloudWatch EMF), and the in-memory adapters that make up the embedded
//! default. The store
//! conformance suite and the fault-injecting decorators are behind the
//! `testing` feature; the named crash points of the kill tests
//! (`crash_points`) do nothing without the `crash-points` feature.
//!
//! Invariants:
//! - Every step is idempotent: a stale or duplicate step message changes
//!   nothing but re-sending the run's pending outbox.
//! - A node's model is called at most once per claimed attempt; a version
//!   conflict re-applies the same result instead of calling again.
//! - A step message leaves its queue (acknowledged, or dead-lettered by the
//!   redrive policy) only when its step has an outcome or its run's end is
//!   recorded: at its last receive a failing step ends its run
//!   (`disposition`), a busy node's message is replaced by a fresh copy,
//!   and the dead-letter queue's reader ends the run of whatever got there
//!   (`dead_letters`).
//! - A worker holds a received message hidden one node lease at a time
//!   (`worker::holding_message`): a dead holder's message is back within a
//!   lease, whatever the queue's visibility timeout.
//! - No wire or database types here: adapters live in their own crates.
//! - The shell performs the engine's effects and commits its decisions; it
//!   never decides what a node means.

pub mod capability_cache;
pub mod clock;
#[cfg(any(test, feature = "testing"))]
pub mod conformance;
pub mod crash_points;
pub mod dead_letters;
pub mod disposition;
pub mod error;
#[cfg(any(test, feature = "testing"))]
pub mod fault_injection;
pub mod follow;
pub mod lifecycle_log;
pub mod memory;
mod memory_queue;
mod memory_threads;
pub mod model_router;
mod model_spans;
pub mod panels;
pub mod ports;
pub mod registry_loader;
pub mod run_traces;
pub mod services;
pub mod telemetry;
pub mod worker;

pub use error::RuntimeError;
