//! `baton chat`: talk with the orchestrator's chat agent (or a specialist,
//! `--agent`). With `-m`, one message: its frames as `baton run` prints
//! them, then the thread id (on stderr) to continue with `--thread`. With
//! no `-m`, an interactive session: each line you type is a message on the
//! same thread; an empty line gets the agent's clarifying question; `exit`
//! or end of input stops.

use std::path::PathBuf;
use std::sync::Arc;

use baton_runtime::RuntimeError;
use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::services::{ChatRequest, Services};
use tokio::io::AsyncBufReadExt;

use crate::terminal::OutputFormat;
use baton_bootstrap::stores::{LeftOverSteps, StoreChoice};

use crate::failure::{CommandError, Ended, Outcome, invalid};
use crate::run_and_plan::drive_and_print;
use crate::setup::{LOCAL_TENANT, configuration, embedded_services, load_registry};

/// What `baton chat` was asked.
pub struct ChatOptions {
    pub message: Option<String>,
    pub thread: Option<String>,
    pub agent: Option<String>,
    pub context_type: Option<String>,
    /// A JSON file of facet values.
    pub inputs: Option<PathBuf>,
    pub entity_id: Option<String>,
    pub multitask_strategy: baton_core::records::thread_lane::MultitaskStrategy,
    pub format: OutputFormat,
    pub store: StoreChoice,
    pub registry: Option<PathBuf>,
}

pub async fn chat(options: ChatOptions) -> Outcome {
    let configuration = configuration()?;
    let registry = load_registry(options.registry.clone(), &configuration)?;
    let (services, queue) = embedded_services(
        registry,
        &configuration,
        &options.store,
        LeftOverSteps::None,
    )
    .await?;
    let inputs = options
        .inputs
        .as_deref()
        .map(read_inputs)
        .transpose()?
        .unwrap_or_default();
    let mut request = ChatRequest {
        message: String::new(),
        thread_id: options.thread.clone(),
        agent: options.agent.clone(),
        context_type: options.context_type.clone(),
        inputs,
        entity_id: options.entity_id.clone(),
        multitask_strategy: options.multitask_strategy,
        user: None,
    };
    if let Some(message) = options.message {
        request.message = message;
        return say(&services, queue, &request, options.format).await.0;
    }
    // An interactive session goes on after a refused message (shown at
    // once); its exit code is the last run's.
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut code = Ok(Ended::Completed);
    let prompt = std::io::IsTerminal::is_terminal(&std::io::stdin());
    loop {
        if prompt {
            eprint!("you> ");
        }
        let Ok(Some(line)) = lines.next_line().await else {
            if prompt {
                eprintln!();
            }
            return code;
        };
        if line.trim() == "exit" {
            return code;
        }
        request.message = line;
        let (said, thread) = say(&services, queue.clone(), &request, options.format).await;
        match said {
            Ok(ended) => code = Ok(ended),
            Err(error) => eprintln!("baton: {error}"),
        }
        if thread.is_some() {
            request.thread_id = thread;
        }
    }
}

/// Sends one message and prints its run; the exit code and the thread.
async fn say(
    services: &Services,
    queue: Arc<InMemoryStepQueue>,
    request: &ChatRequest,
    format: OutputFormat,
) -> (Outcome, Option<String>) {
    let submitted = match services.runs.submit_chat(LOCAL_TENANT, request).await {
        Ok(submitted) => submitted,
        Err(RuntimeError::InvalidInput { path, message }) => {
            return (Err(invalid(format!("{path}: {message}"))), None);
        }
        Err(RuntimeError::ThreadNotFound(thread)) => {
            return (
                Err(invalid(format!(
                    "no thread `{thread}` in this store (threads are kept by --store sqlite; leave --thread out to start one)"
                ))),
                None,
            );
        }
        Err(RuntimeError::ThreadBusy {
            thread_id,
            active_run_id,
            why,
        }) => {
            return (
                Err(invalid(format!(
                    "thread {thread_id} is still answering in run {active_run_id}: {why} (--multitask-strategy enqueue waits for it)"
                ))),
                None,
            );
        }
        Err(error) => return (Err(invalid(error)), None),
    };
    let code = drive_and_print(services, queue, &submitted.run_id, 0, format).await;
    eprintln!("baton: thread {}", submitted.thread_id);
    (code, Some(submitted.thread_id))
}

/// `--inputs FILE`: a JSON object of facet values.
fn read_inputs(
    path: &std::path::Path,
) -> Result<serde_json::Map<String, serde_json::Value>, CommandError> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| invalid(format!("cannot read {}: {error}", path.display())))?;
    match serde_json::from_str(&text) {
        Ok(serde_json::Value::Object(inputs)) => Ok(inputs),
        Ok(_) => Err(invalid(format!(
            "{}: the inputs must be a JSON object of facet values",
            path.display()
        ))),
        Err(error) => Err(invalid(format!(
            "{}: not valid JSON: {error}",
            path.display()
        ))),
    }
}
