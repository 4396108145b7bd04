//! `baton-test-support`: what every test suite needs, in one place.
//!
//! - [`repository_path`], [`example_envelope`], [`repository_registry`]: the
//!   repository's files, wherever the test binary runs from.
//! - [`TestServices`]: one builder of the real services over test ports
//!   (in-memory by default; any store, queue or model double can be set).
//! - [`assert_frames_match_schemas`]: every frame a test sees validates
//!   against `events/schemas/frames/<type>.schema.json`.
//!
//! - [`conformance`]: one conformance suite per store port (run store,
//!   capability directory, thread store), run against every adapter;
//!   [`fault_injection`]: decorators that throttle a store or drop, delay
//!   and duplicate a queue's messages.
//! - [`agent_session`]: doubles of a model and a tool endpoint for a long
//!   agent session, and the registry of one agent capability.
//! - [`mcp_server::WordCountServer`]: a test double for an MCP tool server
//!   (the `mcp-test-server` binary serves it over stdio).
//! - [`otlp_receiver::OtlpReceiver`]: a test double for an OpenTelemetry
//!   collector (OTLP/HTTP protobuf traces).
//!
//! Test doubles for external services (the model endpoint) live in
//! `scripted-llm`; nothing here stands in for the code under test.

#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test support: a broken fixture ends the test

pub mod agent_session;
pub mod conformance;
pub mod crash_checks;
pub mod double_texting;
pub mod fault_injection;
pub mod five_stages;
pub mod lambda_runtime;
pub mod mcp_server;
pub mod otlp_receiver;
pub mod schema_shaped_model;
pub mod tenant_history;

pub use schema_shaped_model::SchemaShapedModel;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use baton_core::basics::schema::{
    SharedValidator, ValidatorCache, collect_violations, compile_schema,
};
use baton_core::catalog::registry::Registry;
use baton_core::wire::event::EventFrame;
use baton_core::wire::frames::FRAME_SCHEMA_DIRECTORY;
use baton_runtime::clock::{RandomIds, SystemClock};
use baton_runtime::memory::{InMemoryCapabilityDirectory, InMemoryRunStore, InMemoryStepQueue};
use baton_runtime::ports::{CapabilityDirectory, Clock, LlmProvider, RunStore, StepQueue};
use baton_runtime::registry_loader::load_registry;
use baton_runtime::services::{OrchestratorSettings, ServicePorts, Services};
use serde_json::Value;

/// The repository root (this crate lives in `tests/support`).
pub fn repository_root() -> PathBuf {
    // Read when the test runs (cargo sets it to the running test's package,
    // and every package of the workspace sits two folders down), so a
    // binary built in another clone sharing the target directory reads the
    // clone it runs for.
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("../..")
}

/// A file or folder of the repository.
pub fn repository_path(relative: &str) -> PathBuf {
    repository_root().join(relative)
}

/// `registry/examples/<name>` as JSON.
pub fn example_envelope(name: &str) -> Value {
    let path = repository_path(&format!("registry/examples/{name}"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// `registry/examples/<name>` without the legacy policy keys the
/// specifications' samples carry (`hitlRequiredFor`, `requiresHitlApproval`,
/// `persona`, `brandVoice`, `variantCount`: an approval gate on the final
/// output, variants fanned out over nodes, `legacy_policy_normalized`
/// warnings), for tests about something else that run the example to its
/// end. The legacy keys are tested with the examples as they are
/// (`shared/runtime/tests/envelope_fields.rs`, the CLI's every-example test).
pub fn plain_example_envelope(name: &str) -> Value {
    let mut envelope = example_envelope(name);
    if let Some(policies) = envelope.get_mut("policies").and_then(Value::as_object_mut) {
        for key in baton_core::contracts::legacy_policies::LEGACY_POLICY_KEYS {
            policies.remove(key);
        }
    }
    envelope
}

/// [`plain_example_envelope`] written to a file (for tests that hand a
/// path to the `baton` binary): one per process, under the temporary folder.
pub fn plain_example_file(name: &str) -> PathBuf {
    envelope_file(name, || plain_example_envelope(name))
}

/// [`plain_example_envelope`] with `policies.fallbackCapability: "none"`,
/// written to a file: a node no capability can take over fails the run
/// instead of going to the shipped catch-all (a person's task), for tests
/// of how a run fails.
pub fn fail_fast_example_file(name: &str) -> PathBuf {
    envelope_file(&format!("fail-fast-{name}"), || {
        let mut envelope = plain_example_envelope(name);
        envelope["policies"]["fallbackCapability"] = Value::String("none".into());
        envelope
    })
}

/// `envelope()` written as `file_name` in this process's folder under the
/// temporary folder, once.
fn envelope_file(file_name: &str, envelope: impl FnOnce() -> Value) -> PathBuf {
    let directory =
        std::env::temp_dir().join(format!("baton-plain-examples-{}", std::process::id()));
    std::fs::create_dir_all(&directory)
        .unwrap_or_else(|error| panic!("{}: {error}", directory.display()));
    let path = directory.join(file_name);
    if !path.exists() {
        // Written aside then renamed, so a concurrent test never reads half.
        let partial = directory.join(format!(
            "{file_name}.{:?}.partial",
            std::thread::current().id()
        ));
        std::fs::write(&partial, envelope().to_string())
            .unwrap_or_else(|error| panic!("{}: {error}", partial.display()));
        std::fs::rename(&partial, &path)
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    }
    path
}

/// The repository's `registry/`, loaded once per test binary.
pub fn repository_registry() -> Arc<Registry> {
    static REGISTRY: OnceLock<Arc<Registry>> = OnceLock::new();
    REGISTRY
        .get_or_init(|| {
            Arc::new(
                load_registry(&repository_path("registry"))
                    .unwrap_or_else(|error| panic!("repository registry: {error}")),
            )
        })
        .clone()
}

/// The real services over test ports. Unset ports are in-memory; settings
/// default to [`OrchestratorSettings::default`] with a short busy retry.
pub struct TestServices {
    llm: Arc<dyn LlmProvider>,
    store: Option<Arc<dyn RunStore>>,
    queue: Option<Arc<dyn StepQueue>>,
    capability_directory: Option<Arc<dyn CapabilityDirectory>>,
    clock: Option<Arc<dyn Clock>>,
    registry: Option<Arc<Registry>>,
    settings: OrchestratorSettings,
    worker_id: String,
    validators: Option<Arc<ValidatorCache>>,
    transcripts: Option<Arc<dyn baton_runtime::ports::TranscriptPublisher>>,
    tools: Option<Arc<dyn baton_runtime::ports::ToolRunner>>,
    threads: Option<Arc<dyn baton_runtime::ports::ThreadStore>>,
    notifier: Option<Arc<dyn baton_runtime::ports::CompletionNotifier>>,
    stream_leases: Option<Arc<dyn baton_runtime::ports::StreamLeases>>,
    schedules: Option<Arc<dyn baton_runtime::ports::ScheduleBook>>,
    schedule_triggers: Option<Arc<dyn baton_runtime::ports::ScheduleTriggers>>,
    memory: Option<Arc<dyn baton_runtime::ports::MemoryStore>>,
    embedder: Option<Arc<dyn baton_runtime::ports::TextEmbedder>>,
}

/// What [`TestServices::build`] wired, with the in-memory parts kept typed.
pub struct BuiltServices {
    pub services: Services,
    pub store: Arc<dyn RunStore>,
    pub queue: Arc<dyn StepQueue>,
}

impl TestServices {
    /// Services calling `llm` (a test double for the model endpoint).
    pub fn with_model(llm: Arc<dyn LlmProvider>) -> Self {
        TestServices {
            llm,
            store: None,
            queue: None,
            capability_directory: None,
            clock: None,
            registry: None,
            settings: OrchestratorSettings {
                busy_retry_delay: Duration::from_millis(20),
                ..OrchestratorSettings::default()
            },
            worker_id: "test-worker".into(),
            validators: None,
            transcripts: None,
            tools: None,
            threads: None,
            notifier: None,
            stream_leases: None,
            schedules: None,
            schedule_triggers: None,
            memory: None,
            embedder: None,
        }
    }

    /// Keeps the tenants' memory in `store` (default: in memory), its
    /// search fused with `embedder`'s vectors when one is given (a test
    /// double of an embeddings endpoint).
    pub fn memory(
        mut self,
        store: Arc<dyn baton_runtime::ports::MemoryStore>,
        embedder: Option<Arc<dyn baton_runtime::ports::TextEmbedder>>,
    ) -> Self {
        self.memory = Some(store);
        self.embedder = embedder;
        self
    }

    /// Keeps open event streams' leases in `leases` (default: in memory).
    /// Schedules kept in `book` and fired by `triggers` (default: in
    /// memory, fired by whoever ticks `ScheduleService::fire_due`).
    pub fn schedules(
        mut self,
        book: Arc<dyn baton_runtime::ports::ScheduleBook>,
        triggers: Arc<dyn baton_runtime::ports::ScheduleTriggers>,
    ) -> Self {
        self.schedules = Some(book);
        self.schedule_triggers = Some(triggers);
        self
    }

    pub fn stream_leases(mut self, leases: Arc<dyn baton_runtime::ports::StreamLeases>) -> Self {
        self.stream_leases = Some(leases);
        self
    }

    /// Keeps chat threads in `store`.
    pub fn threads(mut self, store: Arc<dyn baton_runtime::ports::ThreadStore>) -> Self {
        self.threads = Some(store);
        self
    }

    /// Delivers completion notifications through `notifier` (default:
    /// `NoCompletionNotifier`).
    pub fn notifier(mut self, notifier: Arc<dyn baton_runtime::ports::CompletionNotifier>) -> Self {
        self.notifier = Some(notifier);
        self
    }

    /// Performs tool calls through `runner` (a test double for the tools'
    /// endpoints, or the real executors).
    pub fn tools(mut self, runner: Arc<dyn baton_runtime::ports::ToolRunner>) -> Self {
        self.tools = Some(runner);
        self
    }

    /// Publishes concluded panel transcripts through `publisher` (a test
    /// double for an external ledger).
    pub fn transcripts(
        mut self,
        publisher: Arc<dyn baton_runtime::ports::TranscriptPublisher>,
    ) -> Self {
        self.transcripts = Some(publisher);
        self
    }

    /// Shares a compiled-schema cache (benches that build services per iteration).
    pub fn validators(mut self, validators: Arc<ValidatorCache>) -> Self {
        self.validators = Some(validators);
        self
    }

    pub fn store(mut self, store: Arc<dyn RunStore>) -> Self {
        self.store = Some(store);
        self
    }

    pub fn queue(mut self, queue: Arc<dyn StepQueue>) -> Self {
        self.queue = Some(queue);
        self
    }

    pub fn capability_directory(mut self, directory: Arc<dyn CapabilityDirectory>) -> Self {
        self.capability_directory = Some(directory);
        self
    }

    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    pub fn registry(mut self, registry: Arc<Registry>) -> Self {
        self.registry = Some(registry);
        self
    }

    pub fn settings(mut self, settings: OrchestratorSettings) -> Self {
        self.settings = settings;
        self
    }

    pub fn worker_id(mut self, worker_id: &str) -> Self {
        self.worker_id = worker_id.to_string();
        self
    }

    /// Builds the services on a fresh in-memory queue, submits `envelope`
    /// for `tenant_id`, drives the run until it settles (its after-the-end
    /// steps too) and answers its state as `store` keeps it, asserting it
    /// completed.
    pub async fn run_to_the_end(
        self,
        store: &dyn baton_runtime::ports::RunLog,
        tenant_id: &str,
        envelope: &Value,
    ) -> baton_core::state::run::RunState {
        let (services, runner) = self.build_with_local_runner();
        let run = services
            .runs
            .submit(tenant_id, envelope)
            .await
            .expect("the envelope is accepted");
        let status = runner
            .run_until_settled(tenant_id, &run.run_id)
            .await
            .expect("the run settles");
        let state = store
            .load_run(baton_core::basics::ids::RunKey::new(tenant_id, &run.run_id))
            .await
            .expect("the store answers")
            .expect("the run is stored")
            .state;
        assert_eq!(
            status,
            baton_core::state::run::RunStatus::Completed,
            "{:?}",
            state.failure
        );
        state
    }

    /// The services on a fresh in-memory queue, with the embedded default's
    /// worker (`LocalRunner`, what `baton run` drives) over them.
    pub fn build_with_local_runner(mut self) -> (Services, baton_runtime::workers::LocalRunner) {
        let queue = Arc::new(InMemoryStepQueue::new());
        self.queue = Some(queue.clone());
        let services = self.build().services;
        let runner = baton_runtime::workers::LocalRunner {
            steps: services.steps.clone(),
            runs: services.runs.clone(),
            queue,
        };
        (services, runner)
    }

    pub fn build(self) -> BuiltServices {
        let clock = self.clock.unwrap_or_else(|| Arc::new(SystemClock));
        let store = self
            .store
            .unwrap_or_else(|| Arc::new(InMemoryRunStore::new().with_clock(clock.clone())));
        let queue = self
            .queue
            .unwrap_or_else(|| Arc::new(InMemoryStepQueue::new()));
        let services = Services::sharing_validators(
            self.registry.unwrap_or_else(repository_registry),
            ServicePorts {
                store: store.clone(),
                queue: queue.clone(),
                capability_directory: self
                    .capability_directory
                    .unwrap_or_else(|| Arc::new(InMemoryCapabilityDirectory::new())),
                llm: self.llm,
                clock,
                ids: Arc::new(RandomIds),
                transcripts: self.transcripts.unwrap_or_else(|| {
                    Arc::new(baton_runtime::models::panels::EventLogTranscripts)
                }),
                tools: self
                    .tools
                    .unwrap_or_else(|| Arc::new(baton_runtime::ports::NoToolRunner)),
                threads: self
                    .threads
                    .unwrap_or_else(|| Arc::new(baton_runtime::memory::InMemoryThreadStore::new())),
                notifier: self
                    .notifier
                    .unwrap_or_else(|| Arc::new(baton_runtime::ports::NoCompletionNotifier)),
                remote_agents: Arc::new(baton_runtime::ports::NoRemoteAgents),
                stream_leases: self.stream_leases.unwrap_or_else(|| {
                    Arc::new(baton_runtime::memory::InMemoryStreamLeases::new())
                }),
                schedules: self.schedules.unwrap_or_else(|| {
                    Arc::new(baton_runtime::memory::InMemoryScheduleBook::new())
                }),
                schedule_triggers: self
                    .schedule_triggers
                    .unwrap_or_else(|| Arc::new(baton_runtime::ports::StoreKeepsSchedules)),
                audit: Arc::new(baton_runtime::memory::InMemoryAuditLog::new()),
                request_keys: Arc::new(baton_runtime::memory::InMemoryRequestKeys::new()),
                memory: self.memory.unwrap_or_else(|| {
                    Arc::new(baton_runtime::memory::InMemoryMemoryStore::default())
                }),
                embedder: self.embedder,
            },
            self.settings,
            self.worker_id,
            self.validators
                .unwrap_or_else(|| Arc::new(ValidatorCache::new())),
        );
        BuiltServices {
            services,
            store,
            queue,
        }
    }
}

/// The schema every frame shares (`events/schemas/event-frame.schema.json`).
fn common_frame_validator() -> SharedValidator {
    static COMMON: OnceLock<SharedValidator> = OnceLock::new();
    COMMON
        .get_or_init(|| {
            let path = repository_path("events/schemas/event-frame.schema.json");
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
            let schema: Value = serde_json::from_str(&text)
                .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
            Arc::new(
                compile_schema(&schema, &path.display().to_string())
                    .unwrap_or_else(|error| panic!("{}: {error}", path.display())),
            )
        })
        .clone()
}

fn frame_validator(type_name: &str) -> SharedValidator {
    static CACHE: OnceLock<Mutex<HashMap<String, SharedValidator>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut cache = cache
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    cache
        .entry(type_name.to_string())
        .or_insert_with(|| {
            let path =
                repository_path(FRAME_SCHEMA_DIRECTORY).join(format!("{type_name}.schema.json"));
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
            let schema: Value = serde_json::from_str(&text)
                .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
            Arc::new(
                compile_schema(&schema, &path.display().to_string())
                    .unwrap_or_else(|error| panic!("{}: {error}", path.display())),
            )
        })
        .clone()
}

/// Validates frames as JSON (from an SSE `data:` line or an ndjson line)
/// against their type's published schema and the schema every frame shares;
/// panics naming the first that breaks either.
pub fn assert_frame_values_match_schemas<'a>(frames: impl IntoIterator<Item = &'a Value>) {
    let mut checked = 0;
    for frame in frames {
        let type_name = frame["type"]
            .as_str()
            .unwrap_or_else(|| panic!("a frame without a type: {frame}"));
        let violations = collect_violations(&frame_validator(type_name), frame);
        assert!(
            violations.is_empty(),
            "{type_name} frame breaks events/schemas/frames/{type_name}.schema.json: {violations:?}\n{frame:#}"
        );
        let common = collect_violations(&common_frame_validator(), frame);
        assert!(
            common.is_empty(),
            "{type_name} frame breaks events/schemas/event-frame.schema.json: {common:?}\n{frame:#}"
        );
        checked += 1;
    }
    assert!(checked > 0, "no frames to check");
}

/// Same as [`assert_frame_values_match_schemas`] for stored frames.
pub fn assert_frames_match_schemas(frames: &[EventFrame]) {
    let values: Vec<Value> = frames
        .iter()
        .map(|frame| serde_json::to_value(frame).unwrap_or(Value::Null))
        .collect();
    assert_frame_values_match_schemas(&values);
}
