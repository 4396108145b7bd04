//! The judge panel of `baton eval`: the panel request file named by
//! `--judges` or the dataset's `judges`, run in process by the runtime's
//! `PanelJudge` through the model the command line picks. Each panel's
//! whole output, with its hash-chained transcript, is kept in a file in
//! the folder beside the results (`TranscriptFolder::beside`), as `baton
//! judge verify` reads it.

use std::path::Path;
use std::sync::Arc;

use baton_core::catalog::registry::Registry;
use baton_runtime::clock::SystemClock;
use baton_runtime::memory::TranscriptFolder;
use baton_runtime::services::dataset_evaluations::PanelJudge;
use serde_json::Value;

use crate::failure::{CommandError, invalid};

/// Reads and checks the panel file (a panel request: its judges, criteria
/// and configuration; its `content` is replaced per example), refusing it
/// naming the file and the JSON path.
pub fn load_judge(
    path: &Path,
    registry: &Registry,
    results: &Path,
) -> Result<PanelJudge, CommandError> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| invalid(format!("{}: {error}", path.display())))?;
    let template: Value = serde_json::from_str(&text)
        .map_err(|error| invalid(format!("{}: not valid JSON: {error}", path.display())))?;
    let llm = crate::setup::model_choice::routed_model_for_cli(
        registry,
        &baton_bootstrap::process_environment,
        // A judge panel is models only: no remote agent, no secret.
        Arc::new(baton_runtime::ports::NoSecrets),
    )
    .map_err(|error| invalid(format!("{}: {error}", path.display())))?;
    PanelJudge::from_template(
        template,
        registry,
        llm,
        Arc::new(SystemClock),
        Arc::new(TranscriptFolder::beside(results)),
    )
    .map_err(|(at, message)| invalid(format!("{}: {at}: {message}", path.display())))
}
