//! `baton-runtime`: the imperative shell around `baton-core`.
//!
//! It owns the narrow ports (`ports`: run store, step queue, model,
//! clock, ids) and, grouped by concept:
//! - `services`: what drives the ports (runs, steps, capabilities, people,
//!   the outbox relay and sweeper, the one event follower, the capability
//!   cache; with the `evaluations` feature, the evaluations a server runs);
//! - `workers`: the long-running worker pool and the queue-triggered batch;
//! - `queue`: what happens to a step message (its disposition after a step,
//!   the dead-letter queue's reader);
//! - `models`: the model router over providers, its spans, judge panels;
//! - `observe`: counters read off committed frames (Prometheus text and
//!   CloudWatch EMF), lifecycle logs, run traces;
//! - `memory`: the in-memory adapters that make up the embedded default
//!   (and the evaluations' file store);
//! - `registry_loader`: a registry folder, or the one built into the binary.
//!
//! The store conformance suites and the fault-injecting decorators live in
//! the test-support crate (`tests/support`); the named crash points of the
//! kill tests (`crash_points`) do nothing without the `crash-points`
//! feature.
//!
//! Invariants:
//! - Every step is idempotent: a stale or duplicate step message changes
//!   nothing but re-sending the run's pending outbox.
//! - A node's model is called at most once per claimed attempt; a version
//!   conflict re-applies the same result instead of calling again.
//! - A step message leaves its queue (acknowledged, or dead-lettered by the
//!   redrive policy) only when its step has an outcome or its run's end is
//!   recorded: at its last receive a failing step ends its run
//!   (`queue::disposition`), a busy node's message is replaced by a fresh copy,
//!   and the dead-letter queue's reader ends the run of whatever got there
//!   unless the run has moved past that step (`queue::dead_letters`).
//! - A worker holds a received message hidden one node lease at a time
//!   (`workers::holding_message`): a dead holder's message is back within a
//!   lease, whatever the queue's visibility timeout.
//! - No wire or database types here: adapters live in their own crates.
//! - The shell performs the engine's effects and commits its decisions; it
//!   never decides what a node means.

pub mod clock;
pub mod crash_points;
pub mod error;
pub mod memory;
pub mod models;
pub mod observe;
pub mod ports;
pub mod queue;
pub mod registry_loader;
pub mod services;
pub mod workers;

pub use error::RuntimeError;
