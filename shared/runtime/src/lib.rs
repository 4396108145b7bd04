//! `baton-runtime`: the imperative shell around `baton-core`.
//!
//! It owns the narrow ports (run store, step queue, LLM provider, clock, ids),
//! the use cases that drive them (submit a run, perform one durable step, run
//! a worker until a run settles), the registry loader that reads `registry/`
//! from disk, and the in-memory adapters that make up the embedded default.
//!
//! Invariants:
//! - Every step is idempotent: a stale or duplicate step message changes
//!   nothing but re-sending the run's pending outbox.
//! - A node's model is called at most once per claimed attempt; a version
//!   conflict re-applies the same result instead of calling again.
//! - No wire or database types here: adapters live in their own crates.

pub mod capability_cache;
pub mod clock;
#[cfg(any(test, feature = "testing"))]
pub mod conformance;
pub mod error;
#[cfg(any(test, feature = "testing"))]
pub mod fault_injection;
pub mod follow;
pub mod memory;
pub mod ports;
pub mod registry_loader;
pub mod services;
pub mod worker;

pub use error::RuntimeError;
