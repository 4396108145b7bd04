//! `baton-tools`: performs one tool call as the registry defines it.
//!
//! - `http`: fills the URL template (percent-encoded), sends the remaining
//!   arguments as the query (`GET`, `DELETE`) or a JSON body, adds headers
//!   (literal, from a named environment variable, or a secret by reference
//!   read from the deployment's `SecretStore` at call time) and
//!   `Idempotency-Key`, through the outbound guard (`baton-outbound`) with
//!   the tool's timeout and size cap.
//! - `mcp` over streamable HTTP: the server's headers are resolved the same
//!   way and sent on every request of the session.
//! - builtin `registry_search`: the read-only search of
//!   `baton_core::catalog::registry_search`, by words, or by meaning when
//!   an embedder is set (`with_embedder`; the registry's vectors made once).
//!
//! Invariants: a secret's value is never part of an outcome, an error or a
//! log line (only its variable's or secret's name is; an answer that echoes
//! a credential it was sent is scrubbed of it); every outcome is
//! something the model can read (`ToolOutcome`), never a panic; whether a
//! failure may succeed when retried is said.

mod http;
#[cfg(any(feature = "mcp-stdio", feature = "mcp-http"))]
mod mcp;

use std::sync::Arc;

use baton_core::catalog::registry::Registry;
use baton_core::catalog::registry_search::{
    SearchEntry, search_entries, search_registry, search_registry_by_vectors,
};
use baton_core::catalog::tools::{BuiltinTool, ToolDefinition, ToolExecutor};
use baton_outbound::Resolver;

pub use baton_core::records::conversation::{ToolInvocation as ToolCall, ToolOutcome};

pub use baton_runtime::ports::EnvironmentLookup;
use baton_runtime::ports::{NoSecrets, SecretStore, TextEmbedder};

/// Performs tool calls.
pub struct ToolRunner {
    registry: Arc<Registry>,
    resolver: Arc<dyn Resolver>,
    http_allowed_hosts: String,
    secrets: Arc<dyn SecretStore>,
    environment: EnvironmentLookup,
    /// The registry search by meaning, when the provider offers embeddings.
    embeddings: Option<RegistryEmbeddings>,
}

/// An embedder and the registry's vectors, made on the first search.
struct RegistryEmbeddings {
    embedder: Arc<dyn TextEmbedder>,
    entries: Vec<SearchEntry>,
    entry_vectors: std::sync::Mutex<Option<Arc<Vec<Vec<f32>>>>>,
}

impl ToolRunner {
    /// A runner over `registry` with the system resolver and no secret
    /// store ([`ToolRunner::with_secrets`] gives one); `http_allowed_hosts` is the outbound allow-list setting
    /// (`host,host`, local development only); `environment` reads the
    /// variables `{"env": …}` headers name (the start-up wiring passes the
    /// process environment; only it reads the environment).
    pub fn new(
        registry: Arc<Registry>,
        http_allowed_hosts: &str,
        environment: EnvironmentLookup,
    ) -> Self {
        ToolRunner {
            registry,
            resolver: Arc::new(baton_outbound::SystemResolver),
            http_allowed_hosts: http_allowed_hosts.to_string(),
            secrets: Arc::new(NoSecrets),
            environment,
            embeddings: None,
        }
    }

    /// Ranks `registry_search` by meaning with `embedder`'s vectors (the
    /// registry's made once, on the first search; the query's per call);
    /// when the embedder fails, the search falls back to words and says why.
    pub fn with_embedder(mut self, embedder: Arc<dyn TextEmbedder>) -> Self {
        self.embeddings = Some(RegistryEmbeddings {
            embedder,
            entries: search_entries(&self.registry),
            entry_vectors: std::sync::Mutex::new(None),
        });
        self
    }

    /// The registry search: by meaning when an embedder is set and answers,
    /// else by words.
    async fn search(&self, query: &str, kind: Option<&str>, limit: usize) -> serde_json::Value {
        let Some(embeddings) = &self.embeddings else {
            return search_registry(&self.registry, query, kind, limit);
        };
        match embeddings.rank(query, kind, limit).await {
            Ok(found) => found,
            Err(error) => {
                let mut found = search_registry(&self.registry, query, kind, limit);
                found["embeddingsUnavailable"] = serde_json::json!(format!(
                    "{} could not embed: {error}",
                    embeddings.embedder.model_name()
                ));
                found
            }
        }
    }

    /// Where `{"secret": …}` headers are read (SSM and Secrets Manager on
    /// AWS, the environment or `secrets.json` locally).
    pub fn with_secrets(mut self, secrets: Arc<dyn SecretStore>) -> Self {
        self.secrets = secrets;
        self
    }

    /// `headers` with their values read now (variables, secrets); a value
    /// that cannot be read is the call's outcome, naming the header.
    pub(crate) async fn resolve(
        &self,
        headers: &baton_core::catalog::tools::HeaderSources,
    ) -> Result<baton_runtime::ports::ResolvedHeaders, ToolOutcome> {
        baton_runtime::ports::resolve_headers(
            headers,
            self.secrets.as_ref(),
            self.environment.as_ref(),
        )
        .await
        .map_err(|error| ToolOutcome::Failed {
            message: error.message,
            retryable: error.retryable,
        })
    }

    pub fn with_resolver(mut self, resolver: Arc<dyn Resolver>) -> Self {
        self.resolver = resolver;
        self
    }

    /// Performs `call` of `tool` (its arguments already checked against the
    /// tool's schema by the engine).
    pub async fn run(&self, tool: &ToolDefinition, call: &ToolCall) -> ToolOutcome {
        match &tool.executor {
            ToolExecutor::Http(executor) => http::call(self, executor, call).await,
            ToolExecutor::Builtin {
                operation: BuiltinTool::RegistrySearch,
            } => {
                let query = call.arguments["query"].as_str().unwrap_or_default();
                let kind = call.arguments["kind"].as_str();
                let limit = call.arguments["limit"]
                    .as_u64()
                    .and_then(|limit| usize::try_from(limit).ok())
                    .unwrap_or(10);
                ToolOutcome::Succeeded(self.search(query, kind, limit).await)
            }
            ToolExecutor::Builtin {
                operation: BuiltinTool::AgentCreatePlan,
            } => ToolOutcome::failed(
                "agent_create_plan is performed by the orchestrator (a child run), not by a tool runner",
            ),
            ToolExecutor::Builtin {
                operation: BuiltinTool::MemorySearch | BuiltinTool::MemoryPut,
            } => ToolOutcome::failed(format!(
                "{} is performed by the orchestrator within the run's memory scope, not by a tool runner",
                tool.name
            )),
            #[cfg(any(feature = "mcp-stdio", feature = "mcp-http"))]
            ToolExecutor::Mcp(executor) => mcp::call(self, tool, executor, call).await,
            #[cfg(not(any(feature = "mcp-stdio", feature = "mcp-http")))]
            ToolExecutor::Mcp(_) => ToolOutcome::failed(format!(
                "tool `{}` is served by an MCP server, which this build cannot reach",
                tool.name
            )),
        }
    }
}

impl RegistryEmbeddings {
    async fn rank(
        &self,
        query: &str,
        kind: Option<&str>,
        limit: usize,
    ) -> Result<serde_json::Value, baton_runtime::error::LlmError> {
        let kept = self
            .entry_vectors
            .lock()
            .map(|vectors| vectors.clone())
            .unwrap_or_default();
        let entry_vectors = match kept {
            Some(vectors) => vectors,
            None => {
                let texts: Vec<String> = self
                    .entries
                    .iter()
                    .map(|entry| entry.text.clone())
                    .collect();
                let made = Arc::new(self.embedder.embed(&texts).await?);
                if let Ok(mut slot) = self.entry_vectors.lock() {
                    *slot = Some(made.clone());
                }
                made
            }
        };
        let query_vector = self
            .embedder
            .embed(&[query.to_string()])
            .await?
            .pop()
            .unwrap_or_default();
        Ok(search_registry_by_vectors(
            &self.entries,
            &entry_vectors,
            query,
            &query_vector,
            kind,
            limit,
        ))
    }
}

/// `outcome` with every value in `secret_values` replaced by `[redacted]`.
fn scrubbed(outcome: ToolOutcome, secret_values: &[&str]) -> ToolOutcome {
    use baton_core::basics::redaction::{scrub_text, scrub_values};
    match outcome {
        ToolOutcome::Succeeded(mut value) => {
            scrub_values(&mut value, secret_values);
            ToolOutcome::Succeeded(value)
        }
        ToolOutcome::Failed { message, retryable } => ToolOutcome::Failed {
            message: scrub_text(&message, secret_values),
            retryable,
        },
    }
}

#[async_trait::async_trait]
impl baton_runtime::ports::ToolRunner for ToolRunner {
    async fn run_tool(&self, tool: &ToolDefinition, invocation: &ToolCall) -> ToolOutcome {
        self.run(tool, invocation).await
    }
}
