//! Calling models: one model port over many providers (`router`), the one
//! call-with-retries skeleton every provider shares (`retries`), the
//! OpenTelemetry span of each call (`spans`), and judge panels run in
//! process (`panels`).

pub mod panels;
pub mod retries;
pub mod router;
mod spans;
