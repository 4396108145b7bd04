//! What the terminal shows: event frames in the four formats and
//! `--output-only` (`output`), colours and the progress line (`progress`).

pub mod output;
pub mod progress;

use clap::ValueEnum;

/// How `baton run` prints event frames.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum OutputFormat {
    /// Human-readable lines, deltas inline, the validated output at the end.
    Pretty,
    /// One JSON frame per line.
    Ndjson,
    /// Server-Sent Events, exactly as the HTTP stream sends them.
    Sse,
    /// One hook event per line (`{event, data, runId, id}`): the frames as an
    /// agent orchestrator's hook events (`prompt:submit` … `orchestrator:complete`).
    Hooks,
    /// `--output-only`: nothing but the validated output (a JSON document).
    #[value(skip)]
    Output,
}

/// How `baton tasks` and `baton runs` print.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum TaskFormat {
    /// One block per task, with the command that answers it.
    Pretty,
    /// A JSON array of tasks (`taskId`, `runId`, `nodeId`, `capabilityId`,
    /// `planVersion`, `outputSchema`, ...).
    Json,
}
