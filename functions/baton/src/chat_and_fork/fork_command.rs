//! `baton history RUN` (the checkpoints a fork can start from) and `baton
//! fork RUN --at V | --at-event N [--inputs FILE] [--node-output NODE=FILE]`
//! (a new run from one of them, reusing what was done there; its frames as
//! `baton run` prints them). Runs are read from the store (`--store`,
//! SQLite by default), like `baton resume`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use baton_core::engine::{ForkChanges, ForkPoint};
use baton_runtime::RuntimeError;

use crate::failure::{Ended, Outcome, invalid};
use crate::people::{open_run, read_output};
use crate::run_and_plan::drive_and_print;
use crate::setup::LOCAL_TENANT;
use baton_bootstrap::stores::StoreChoice;

use crate::terminal::OutputFormat;

/// `baton history RUN`: one line per checkpoint.
pub async fn history(run_id: &str, store: &StoreChoice, registry: Option<PathBuf>) -> Outcome {
    let (services, _, _) = open_run(run_id, registry, store).await?;
    let checkpoints = match services.runs.history(LOCAL_TENANT, run_id).await {
        Ok(checkpoints) => checkpoints,
        Err(error) => return Err(invalid(error)),
    };
    for point in checkpoints {
        match &point.node_id {
            Some(node_id) => println!(
                "event {:>5}  plan v{}  node {node_id} completed",
                point.event_id, point.plan_version
            ),
            None => println!(
                "event {:>5}  plan v{}  plan generated",
                point.event_id, point.plan_version
            ),
        }
    }
    Ok(Ended::Completed)
}

/// What `baton fork` was asked.
pub struct ForkOptions {
    pub run_id: String,
    pub plan_version: Option<u32>,
    pub event_id: Option<u64>,
    /// A JSON file of input facets to set anew.
    pub inputs: Option<PathBuf>,
    /// `NODE=FILE`: a node's corrected output.
    pub node_outputs: Vec<String>,
    pub format: OutputFormat,
    pub store: StoreChoice,
    pub registry: Option<PathBuf>,
}

pub async fn fork(options: ForkOptions) -> Outcome {
    let point = match (options.plan_version, options.event_id) {
        (Some(version), None) => ForkPoint::PlanVersion(version),
        (None, Some(event_id)) => ForkPoint::EventId(event_id),
        _ => {
            return Err(invalid(
                "give exactly one of --at PLAN_VERSION and --at-event EVENT_ID",
            ));
        }
    };
    let mut changes = ForkChanges::default();
    if let Some(path) = &options.inputs {
        match read_output(path) {
            Ok(serde_json::Value::Object(inputs)) => changes.inputs = inputs,
            Ok(_) => {
                return Err(invalid(format!(
                    "{}: the inputs must be a JSON object",
                    path.display()
                )));
            }
            Err(error) => return Err(error),
        }
    }
    let mut node_outputs = BTreeMap::new();
    for given in &options.node_outputs {
        let Some((node_id, path)) = given.split_once('=') else {
            return Err(invalid(format!(
                "--node-output {given}: write it NODE=FILE"
            )));
        };
        match read_output(std::path::Path::new(path)) {
            Ok(output) => {
                node_outputs.insert(node_id.to_string(), output);
            }
            Err(error) => return Err(error),
        }
    }
    changes.node_outputs = node_outputs;
    let (services, queue, _) =
        open_run(&options.run_id, options.registry.clone(), &options.store).await?;
    let forked = match services
        .runs
        .fork(LOCAL_TENANT, &options.run_id, point, &changes)
        .await
    {
        Ok(forked) => forked,
        Err(RuntimeError::InvalidInput { path, message }) => {
            return Err(invalid(format!("{path}: {message}")));
        }
        Err(error) => return Err(invalid(error)),
    };
    eprintln!(
        "baton: run {} forked from {}",
        forked.run_id, options.run_id
    );
    drive_and_print(&services, queue, &forked.run_id, 0, options.format).await
}
