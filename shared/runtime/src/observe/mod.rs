//! What the runtime tells its operator: counters read off committed frames
//! (`telemetry`), one structured log line per durable lifecycle event
//! (`lifecycle_log`), and a run's trace carried through its steps
//! (`run_traces`); the specification's metric names as aliases
//! (`metric_names`).

pub mod lifecycle_log;
pub mod metric_names;
pub mod run_traces;
pub mod telemetry;
