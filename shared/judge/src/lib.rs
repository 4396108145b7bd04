//! `baton-judge`: judge panels without I/O. It owns the panel request in
//! its published shape (`request` with the content, criteria and selected
//! judges; `config` with rounds, timeout, algorithm, convergence threshold
//! and outlier detection), the consensus over the judges' scores (three
//! algorithms, a robust outlier rule, confidence; formulas in `consensus`)
//! and the evaluation transcript as a hash chain (`transcript`).
//!
//! Invariants:
//! - No I/O, no clock, no randomness: every figure replays in a test.
//! - Scores are on one scale, 0–10; a score outside it is refused, never clamped.
//! - A transcript message's hash covers its canonical JSON (RFC 8785) and the
//!   previous message's hash, so any change to any message is detected.
//! - Payment and ledger fields of the request (accounts, payment
//!   configuration, …) are accepted and ignored.

pub mod consensus;
pub mod panel;
pub mod request;
pub mod transcript;
