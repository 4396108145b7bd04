//! `baton`: the command-line entry point. Runs and plans task envelopes in
//! one local process on the embedded default (in-memory store and queue).
//!
//! Each subcommand lives in its module (a folder for a group); each returns
//! an `Outcome`, which `failure` alone turns into the exit code: 0 the run
//! completed with contract-valid output; 1 an evaluation regressed; 2
//! invalid input or configuration (the message names the JSON path or
//! variable); 3 the run failed or its plan was rejected; 4 the run is
//! parked for a person.

mod chat_and_fork;
mod eval;
mod failure;
mod mcp_command;
mod people;
mod registry_check;
mod run_and_plan;
mod serve;
mod setup;
mod store_commands;
mod terminal;

use baton_bootstrap::stores::StoreChoice;
use std::path::PathBuf;

use crate::failure::{CommandError, exit_code, failed, invalid};
use crate::setup::parse_store;
use crate::terminal::{OutputFormat, TaskFormat};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc: the engine allocates many small JSON values per step; it cuts
/// the per-step overhead by about a third against glibc malloc (see the bench).
#[global_allocator]
static GLOBAL_ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "baton",
    version,
    about = "Plan-driven multi-agent orchestrator"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum RegistryCommand {
    /// Check a registry folder: every file against its JSON Schema, then
    /// the registry as Baton loads it; each error names its file and JSON
    /// path (exit 2).
    Check {
        /// The folder (default: `registry`).
        #[arg(default_value = "registry")]
        directory: PathBuf,
    },
}

#[derive(Subcommand)]
enum JudgeCommand {
    /// Check an evaluation output's (or a transcript's) hash chain; exit 3
    /// naming the first broken link.
    Verify { output: PathBuf },
}

#[derive(Subcommand)]
enum Command {
    /// Run an envelope end to end and print every event frame.
    Run {
        /// Path to the task envelope JSON.
        envelope: PathBuf,
        /// Registry directory (default: $BATON_REGISTRY_DIR, else the registry built into baton).
        #[arg(long)]
        registry: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = OutputFormat::Pretty)]
        format: OutputFormat,
        /// Print nothing but the validated output (the exit code says how
        /// the run ended; errors go to stderr).
        #[arg(long, conflicts_with = "format")]
        output_only: bool,
        /// Where the run is kept: `sqlite` (default: a file under the data
        /// directory, so a parked run outlives the process), `sqlite:PATH`,
        /// or `memory`.
        #[arg(long, default_value = "sqlite", value_parser = parse_store)]
        store: StoreChoice,
    },
    /// Draft an envelope in a conversation (the developer sandbox's
    /// builder): each `--message`, or each paragraph on stdin (ended by an
    /// empty line), gets a reply; once you confirm a draft that passes
    /// the plan checks (`yes`), it is written to `--out` or stdout.
    Draft {
        /// A message of yours, in order (repeat; omit to type them).
        #[arg(short = 'm', long = "message")]
        messages: Vec<String>,
        /// Where the finished envelope goes (stdout when absent).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Each turn as a JSON line on stdout (as the API answers it).
        #[arg(long)]
        json: bool,
        #[arg(long)]
        registry: Option<PathBuf>,
    },
    /// Talk with the orchestrator's chat agent (or a specialist): one
    /// message with `-m` (the thread id is printed on stderr; continue with
    /// `--thread`), else an interactive session on one thread.
    Chat {
        /// The message (omit for an interactive session).
        #[arg(short = 'm', long)]
        message: Option<String>,
        /// The thread to continue.
        #[arg(long)]
        thread: Option<String>,
        /// A registered capability to talk to instead of the orchestrator.
        #[arg(long)]
        agent: Option<String>,
        /// A context type of the registry (`registry/contexts/`).
        #[arg(long = "context-type")]
        context_type: Option<String>,
        /// A JSON file of facet values (`{"facet": value}`) for the plans
        /// the conversation creates.
        #[arg(long)]
        inputs: Option<PathBuf>,
        /// The entity the conversation is about.
        #[arg(long = "entity")]
        entity_id: Option<String>,
        /// What the message does if the thread is still answering another:
        /// reject, enqueue (the default), interrupt or rollback.
        #[arg(long = "multitask-strategy", default_value = "enqueue", value_parser = parse_multitask_strategy)]
        multitask_strategy: baton_core::records::thread_lane::MultitaskStrategy,
        #[arg(long)]
        registry: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = OutputFormat::Pretty)]
        format: OutputFormat,
        /// Where runs and threads are kept (as for `run`).
        #[arg(long, default_value = "sqlite", value_parser = parse_store)]
        store: StoreChoice,
    },
    /// Plan an envelope and print the validated plan, without calling any model.
    Plan {
        envelope: PathBuf,
        #[arg(long)]
        registry: Option<PathBuf>,
        /// `json`: the plan and its diagnostics; `mermaid` or `dot`: the
        /// plan as a picture (diagnostics on stderr when it is rejected).
        #[arg(long, value_enum, default_value_t = run_and_plan::PlanFormat::Json)]
        format: run_and_plan::PlanFormat,
    },
    /// List the tasks parked runs wait on a person for (SQLite store).
    Tasks {
        #[arg(long, default_value = "sqlite", value_parser = parse_store)]
        store: StoreChoice,
        #[arg(long, value_enum, default_value_t = TaskFormat::Pretty)]
        format: TaskFormat,
    },
    /// The checkpoints of a run a fork can start from: each plan version
    /// and each node's completion, with its event id.
    History {
        run_id: String,
        #[arg(long)]
        registry: Option<PathBuf>,
        #[arg(long, default_value = "sqlite", value_parser = parse_store)]
        store: StoreChoice,
    },
    /// A new run from a point of an earlier one (its plan version, or an
    /// event id), reusing the nodes completed there, with inputs or node
    /// outputs changed; only what is downstream of a change runs again.
    Fork {
        run_id: String,
        /// Fork at this plan version (the run's current one).
        #[arg(long = "at", conflicts_with = "at_event")]
        at: Option<u32>,
        /// Fork after this event id (`baton history` lists them).
        #[arg(long = "at-event")]
        at_event: Option<u64>,
        /// A JSON file of input facets to set anew.
        #[arg(long)]
        inputs: Option<PathBuf>,
        /// `NODE=FILE`: a node's corrected output (repeatable), checked
        /// against its output contract.
        #[arg(long = "node-output")]
        node_output: Vec<String>,
        #[arg(long)]
        registry: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = OutputFormat::Pretty)]
        format: OutputFormat,
        #[arg(long, default_value = "sqlite", value_parser = parse_store)]
        store: StoreChoice,
    },
    /// Remove ended runs past their retention (`BATON_RETENTION_DAYS`,
    /// default 30; a tenant's own in `registry/tenants.json`) from the
    /// store, in batches: SQLite deletes them with everything of them;
    /// DynamoDB's items are stamped for its TTL. A run that works or waits
    /// is never touched. Prints `{"runs": N, "items": M}`.
    Gc {
        #[arg(long, default_value = "sqlite", value_parser = parse_store)]
        store: StoreChoice,
    },
    /// Run every example of an evaluation dataset (JSONL; its schema in
    /// registry/schemas/dataset.schema.json) on the embedded default or a
    /// deployed API; score each by its deterministic checks (status,
    /// contract, assertions, mentions, cost, duration) and a judge panel
    /// when one is named. Writes a results line per example; exits 0 when
    /// the pass rate meets the threshold, 1 when not. `compare` compares
    /// two results files.
    Eval(eval::EvalArguments),
    /// Schedules: an envelope started by the clock. `baton serve` on the
    /// same store fires them.
    Schedule {
        #[command(subcommand)]
        action: store_commands::schedule_command::ScheduleCommand,
        /// `sqlite` (default file), `sqlite:PATH` or `dynamodb`.
        #[arg(long, default_value = "sqlite", value_parser = parse_store, global = true)]
        store: StoreChoice,
        /// Whose schedules (default `local`, `baton serve`'s tenant without tokens).
        #[arg(long, default_value = "local", global = true)]
        tenant: String,
        #[arg(long, global = true)]
        registry: Option<PathBuf>,
    },
    /// A tenant's memory across runs: items kept, read, listed, searched
    /// and forgotten (a namespace's parts joined by `/`).
    Memory {
        #[command(subcommand)]
        command: store_commands::memory_command::MemoryCommand,
        /// `sqlite` (default file), `sqlite:PATH` or `dynamodb`.
        #[arg(long, default_value = "sqlite", value_parser = parse_store, global = true)]
        store: StoreChoice,
        /// Whose memory (default `local`, `baton serve`'s tenant without tokens).
        #[arg(long, default_value = "local", global = true)]
        tenant: String,
        #[arg(long, global = true)]
        registry: Option<PathBuf>,
    },
    /// A tenant's audit trail, newest first: who submitted, cancelled,
    /// answered, approved, registered or scheduled what, and how it went.
    Audit {
        /// `sqlite` (default file), `sqlite:PATH` or `dynamodb`.
        #[arg(long, default_value = "sqlite", value_parser = parse_store)]
        store: StoreChoice,
        /// Whose trail (default `local`, `baton serve`'s tenant without tokens).
        #[arg(long, default_value = "local")]
        tenant: String,
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Every record kept, not only the newest `--limit`.
        #[arg(long)]
        all: bool,
        #[arg(long, value_enum, default_value_t = people::audit_command::AuditFormat::Pretty)]
        format: people::audit_command::AuditFormat,
    },
    /// List the most recent runs kept in the store, newest first (SQLite store).
    Runs {
        #[arg(long, default_value = "sqlite", value_parser = parse_store)]
        store: StoreChoice,
        #[arg(long, value_enum, default_value_t = TaskFormat::Pretty)]
        format: TaskFormat,
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// Continue a parked run, then run on (frames and exit codes as `run`):
    /// a human node's output (`--output`), the answer to a clarifying
    /// question (`--answer`), or neither to resume a paused run.
    Resume {
        run_id: String,
        /// The node's output (JSON), checked against its output contract.
        #[arg(long, conflicts_with = "answer")]
        output: Option<PathBuf>,
        /// The answer to the run's clarifying question.
        #[arg(long)]
        answer: Option<String>,
        /// The waiting node, when the run waits on several.
        #[arg(long)]
        node: Option<String>,
        #[arg(long)]
        registry: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = OutputFormat::Pretty)]
        format: OutputFormat,
        #[arg(long, default_value = "sqlite", value_parser = parse_store)]
        store: StoreChoice,
    },
    /// Approve or reject a parked run's approval request, then run on
    /// (frames and exit codes as `run`).
    Resolve {
        run_id: String,
        #[arg(long, conflicts_with = "reject", required_unless_present = "reject")]
        approve: bool,
        #[arg(long)]
        reject: bool,
        /// The request (default: the pending one).
        #[arg(long)]
        request: Option<String>,
        #[arg(long)]
        note: Option<String>,
        #[arg(long)]
        registry: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = OutputFormat::Pretty)]
        format: OutputFormat,
        #[arg(long, default_value = "sqlite", value_parser = parse_store)]
        store: StoreChoice,
    },
    /// Run a judge panel on a request (JSON: `request`, `config`) and print
    /// its evaluation; `verify` recomputes an evaluation's hash chain.
    #[command(args_conflicts_with_subcommands = true)]
    Judge {
        /// The panel request.
        request: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = OutputFormat::Pretty)]
        format: OutputFormat,
        #[command(subcommand)]
        command: Option<JudgeCommand>,
    },
    /// Work with a registry folder.
    Registry {
        #[command(subcommand)]
        command: RegistryCommand,
    },
    /// Serve Baton's MCP tools on stdio (start_run, plan, list_capabilities,
    /// get_run, list_tasks, answer_task, send_chat_message), with the step
    /// worker in-process; everything is tenant `local`'s.
    Mcp {
        /// Where runs are kept: `memory`, `sqlite` (a file under the data
        /// directory), `sqlite:PATH`, or `dynamodb` (with SQS).
        #[arg(long, default_value = "memory", value_parser = parse_store)]
        store: StoreChoice,
        #[arg(long)]
        registry: Option<PathBuf>,
    },
    /// Serve the HTTP API and SSE streams on localhost, with the step worker in-process.
    Serve {
        /// Where runs are kept: `memory`, `sqlite` (a file under the data
        /// directory), `sqlite:PATH`, or `dynamodb` (with SQS).
        #[arg(long, default_value = "memory", value_parser = parse_store)]
        store: StoreChoice,
        #[arg(long, default_value = "127.0.0.1:8080")]
        addr: std::net::SocketAddr,
        #[arg(long)]
        registry: Option<PathBuf>,
    },
}

/// A `--multitask-strategy` that names no strategy.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not a strategy: reject, enqueue, interrupt or rollback")]
struct NotAStrategy(String);

fn parse_multitask_strategy(
    text: &str,
) -> Result<baton_core::records::thread_lane::MultitaskStrategy, NotAStrategy> {
    text.parse().map_err(|_| NotAStrategy(text.to_string()))
}

/// Logs on stderr (`BATON_LOG`, default `warn`) and, when the `OTEL_*`
/// variables ask for it, traces (a configuration the commands refuse
/// later is left to them to report).
fn init_logging_and_traces() -> Result<(), CommandError> {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let configuration =
        baton_bootstrap::Configuration::from_variables(&baton_bootstrap::process_environment).ok();
    let filter = match &configuration {
        Some(configuration) => baton_bootstrap::log_filter(configuration, "warn"),
        None => tracing_subscriber::EnvFilter::new("warn"),
    };
    let traces = match &configuration {
        Some(configuration) => {
            baton_bootstrap::start_trace_export(configuration, "baton").map_err(invalid)?
        }
        None => None,
    };
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_filter(filter),
        )
        .with(traces.map(|export| {
            export
                .layer()
                .with_filter(baton_bootstrap::exported_spans())
        }))
        .init();
    Ok(())
}

fn main() -> ExitCode {
    if let Err(error) = init_logging_and_traces() {
        return ExitCode::from(exit_code(Err(error)));
    }
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            return ExitCode::from(exit_code(Err(failed(format!(
                "cannot start the async runtime: {error}"
            )))));
        }
    };
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Run {
                envelope,
                registry,
                format,
                output_only,
                store,
            } => {
                let format = if output_only {
                    OutputFormat::Output
                } else {
                    format
                };
                run_and_plan::run(&envelope, registry, format, store).await
            }
            Command::Plan {
                envelope,
                registry,
                format,
            } => run_and_plan::plan(&envelope, registry, format),
            Command::Draft {
                messages,
                out,
                json,
                registry,
            } => {
                chat_and_fork::draft_command::draft(chat_and_fork::draft_command::DraftOptions {
                    messages,
                    out,
                    json,
                    registry,
                })
                .await
            }
            Command::Chat {
                message,
                thread,
                agent,
                context_type,
                inputs,
                entity_id,
                multitask_strategy,
                registry,
                format,
                store,
            } => {
                chat_and_fork::chat_command::chat(chat_and_fork::chat_command::ChatOptions {
                    message,
                    thread,
                    agent,
                    context_type,
                    inputs,
                    entity_id,
                    multitask_strategy,
                    format,
                    store,
                    registry,
                })
                .await
            }
            Command::Tasks { store, format } => people::tasks(store, format).await,
            Command::Gc { store } => store_commands::gc_command::gc(store).await,
            Command::Memory {
                command,
                store,
                tenant,
                registry,
            } => store_commands::memory_command::memory(command, store, tenant, registry).await,
            Command::Eval(arguments) => eval::eval(arguments).await,
            Command::Schedule {
                action,
                store,
                tenant,
                registry,
            } => {
                store_commands::schedule_command::schedule(action.into(), store, tenant, registry)
                    .await
            }
            Command::Runs {
                store,
                format,
                limit,
            } => people::runs(store, format, limit).await,
            Command::Audit {
                store,
                tenant,
                limit,
                all,
                format,
            } => people::audit_command::audit(store, tenant, limit, all, format).await,
            Command::History {
                run_id,
                registry,
                store,
            } => chat_and_fork::fork_command::history(&run_id, &store, registry).await,
            Command::Fork {
                run_id,
                at,
                at_event,
                inputs,
                node_output,
                registry,
                format,
                store,
            } => {
                chat_and_fork::fork_command::fork(chat_and_fork::fork_command::ForkOptions {
                    run_id,
                    plan_version: at,
                    event_id: at_event,
                    inputs,
                    node_outputs: node_output,
                    format,
                    store,
                    registry,
                })
                .await
            }
            Command::Resume {
                run_id,
                output,
                answer,
                node,
                registry,
                format,
                store,
            } => {
                people::resume(people::ResumeRequest {
                    run_id,
                    node_id: node,
                    output,
                    answer,
                    registry,
                    format,
                    store,
                })
                .await
            }
            Command::Resolve {
                run_id,
                approve,
                reject: _,
                request,
                note,
                registry,
                format,
                store,
            } => {
                people::resolve(people::ResolveRequest {
                    run_id,
                    decision: if approve {
                        baton_core::engine::ApprovalDecision::Approve
                    } else {
                        baton_core::engine::ApprovalDecision::Reject
                    },
                    request_id: request,
                    note,
                    registry,
                    format,
                    store,
                })
                .await
            }
            Command::Judge {
                command: Some(JudgeCommand::Verify { output }),
                ..
            } => eval::judge::verify(&output),
            Command::Judge {
                request: Some(request),
                format,
                command: None,
            } => eval::judge::run(&request, format).await,
            Command::Judge { .. } => Err(invalid(
                "baton judge: give a panel request (JSON), or `verify EVALUATION.json`",
            )),
            Command::Registry {
                command: RegistryCommand::Check { directory },
            } => registry_check::check(&directory),
            Command::Serve {
                store,
                addr,
                registry,
            } => serve::serve(store, addr, registry).await,
            Command::Mcp { store, registry } => mcp_command::mcp(store, registry).await,
        }
    });
    // Spans still batched are sent before the process ends.
    baton_bootstrap::shutdown_traces();
    ExitCode::from(exit_code(outcome))
}
