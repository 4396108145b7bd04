//! Calling models: one model port over many providers (`router`), the
//! OpenTelemetry span of each call (`spans`), and judge panels run in
//! process (`panels`).

pub mod panels;
pub mod router;
mod spans;
