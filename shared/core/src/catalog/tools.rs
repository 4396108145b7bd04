//! Tools as registry data (`registry/tools/*.json`): a name, a description,
//! the JSON Schema of its arguments and an executor: `http` (a URL template,
//! headers whose secret values come from named environment variables or
//! secrets by reference (`basics::credentials`), a timeout and a response size cap), `mcp` (a
//! Model Context Protocol server's tool, over stdio or streamable HTTP) or
//! `builtin` (an operation of the orchestrator). Capabilities name the tools
//! they may call. This module checks definitions and a call's arguments; the
//! loop that calls tools is the engine's, the executors are the shell's.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::basics::schema::{SchemaViolation, ValidatorCache, collect_violations, compile_schema};

/// One tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments (an object).
    pub parameters: Value,
    pub executor: ToolExecutor,
}

/// Who performs a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToolExecutor {
    Http(HttpToolExecutor),
    Mcp(McpToolExecutor),
    Builtin { operation: BuiltinTool },
}

/// An HTTP endpoint. `url` may name arguments as `{argument}` (filled in,
/// percent-encoded); the other arguments travel as the JSON body (or the
/// query string for `GET`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpToolExecutor {
    pub method: String,
    pub url: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: HeaderSources,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    #[serde(default = "default_max_response_bytes")]
    pub max_response_bytes: usize,
}

fn default_timeout_ms() -> u64 {
    10_000
}

fn default_max_response_bytes() -> usize {
    256 * 1024
}

pub use crate::basics::credentials::{
    HeaderSources, HeaderValueSource, SecretReference, check_header_sources,
};

/// A Model Context Protocol server's tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpToolExecutor {
    pub server: McpServer,
    /// The tool's name on the server (default: the definition's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
}

/// How to reach an MCP server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "transport", rename_all = "snake_case", deny_unknown_fields)]
pub enum McpServer {
    /// A child process speaking MCP on stdin/stdout (CLI and `baton serve`).
    Stdio {
        command: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        args: Vec<String>,
    },
    /// Streamable HTTP (anywhere; the URL goes through the outbound guard),
    /// with headers (credentials by reference) sent on every request.
    Http {
        url: String,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        headers: HeaderSources,
    },
}

/// Operations of the orchestrator offered as tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BuiltinTool {
    /// Plans (and runs, drafts or has reviewed) a child run.
    AgentCreatePlan,
    /// Read-only search over the registry's capabilities and facets.
    RegistrySearch,
    /// Search the tenant's memory, in the namespaces the run may read
    /// (`contracts::memory_use::MemoryToolScope`).
    MemorySearch,
    /// Keep an item in the tenant's memory, in the namespace the run may
    /// write to.
    MemoryPut,
}

impl BuiltinTool {
    /// Whether the tool reads or writes the tenant's memory.
    pub fn is_memory(self) -> bool {
        matches!(self, BuiltinTool::MemorySearch | BuiltinTool::MemoryPut)
    }
}

const HTTP_METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

impl ToolDefinition {
    /// Checks a definition; an error is `(JSON path, message)`.
    pub fn check(&self) -> Result<(), (String, String)> {
        let fail = |path: &str, message: String| Err((path.to_string(), message));
        let valid_name = !self.name.is_empty()
            && self.name.len() <= 64
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid_name {
            return fail(
                "$.name",
                format!("`{}`: 1 to 64 ASCII letters, digits, `_` or `-`", self.name),
            );
        }
        if self.description.trim().is_empty() {
            return fail("$.description", "the model needs a description".into());
        }
        if self.parameters.get("type") != Some(&json!("object")) {
            return fail(
                "$.parameters",
                "a tool's arguments are an object (`\"type\": \"object\"`)".into(),
            );
        }
        if let Err(error) = compile_schema(&self.parameters, "$.parameters") {
            return fail("$.parameters", error.to_string());
        }
        match &self.executor {
            ToolExecutor::Http(http) => self.check_http(http),
            ToolExecutor::Mcp(McpToolExecutor {
                server: McpServer::Stdio { command, .. },
                ..
            }) if command.trim().is_empty() => {
                fail("$.executor.server.command", "a command is needed".into())
            }
            ToolExecutor::Mcp(McpToolExecutor {
                server: McpServer::Http { url, .. },
                ..
            }) if !url.starts_with("https://") && !url.starts_with("http://") => fail(
                "$.executor.server.url",
                format!("`{url}` is not an http(s) URL"),
            ),
            ToolExecutor::Mcp(McpToolExecutor {
                server: McpServer::Http { headers, .. },
                ..
            }) => check_header_sources(headers, "$.executor.server.headers"),
            ToolExecutor::Mcp(_) | ToolExecutor::Builtin { .. } => Ok(()),
        }
    }

    fn check_http(&self, http: &HttpToolExecutor) -> Result<(), (String, String)> {
        if !HTTP_METHODS.contains(&http.method.as_str()) {
            return Err((
                "$.executor.method".into(),
                format!("one of {}", HTTP_METHODS.join(", ")),
            ));
        }
        if !http.url.starts_with("https://") && !http.url.starts_with("http://") {
            return Err((
                "$.executor.url".into(),
                format!("`{}` is not an http(s) URL", http.url),
            ));
        }
        let declared = self.parameters.get("properties").and_then(Value::as_object);
        for placeholder in url_placeholders(&http.url) {
            if !declared.is_some_and(|properties| properties.contains_key(&placeholder)) {
                return Err((
                    "$.executor.url".into(),
                    format!("`{{{placeholder}}}` names no declared parameter"),
                ));
            }
        }
        check_header_sources(&http.headers, "$.executor.headers")?;
        if http.timeout_ms == 0 || http.max_response_bytes == 0 {
            return Err((
                "$.executor".into(),
                "`timeoutMs` and `maxResponseBytes` must be positive".into(),
            ));
        }
        Ok(())
    }

    /// What is wrong with `arguments` (empty: they may be used).
    pub fn argument_violations(
        &self,
        arguments: &Value,
        validators: &ValidatorCache,
    ) -> Vec<SchemaViolation> {
        let key = format!("tool:{}:{}", self.name, self.parameters);
        match validators.validator_for_key(&key, &self.parameters, "parameters") {
            Ok(validator) => collect_violations(&validator, arguments),
            Err(error) => vec![SchemaViolation {
                instance_pointer: String::new(),
                schema_pointer: String::new(),
                message: error.to_string(),
                facet: None,
            }],
        }
    }
}

/// The `{name}` placeholders of a URL template.
pub fn url_placeholders(template: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            break;
        };
        names.push(after[..close].to_string());
        rest = &after[close + 1..];
    }
    names
}
