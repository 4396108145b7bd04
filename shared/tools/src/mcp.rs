//! The `mcp` executor: a Model Context Protocol server's tool, called
//! through the `rmcp` crate. Over stdio (feature `mcp-stdio`: the CLI and
//! `baton serve`; a Lambda function starts no server processes) each call
//! starts the server's command and stops it after; over streamable HTTP
//! (feature `mcp-http`) the URL goes through the outbound guard first and
//! the connection is pinned to the checked address, redirects refused. The
//! result is the tool's structured content, else its text (JSON when it
//! parses); an error result, a server that cannot be reached and a call
//! over its time are errors the model can read.

use std::time::Duration;

use baton_core::catalog::tools::{McpServer, McpToolExecutor, ToolDefinition};
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};
use rmcp::service::{RoleClient, RunningService};
use serde_json::Value;

use crate::{ToolCall, ToolOutcome, ToolRunner};

/// How long one call (connect or start, handshake, call) may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) async fn call(
    runner: &ToolRunner,
    tool: &ToolDefinition,
    executor: &McpToolExecutor,
    call: &ToolCall,
) -> ToolOutcome {
    let name = executor.tool.clone().unwrap_or_else(|| tool.name.clone());
    let server = match &executor.server {
        McpServer::Stdio { command, .. } => format!("`{command}`"),
        McpServer::Http { url, .. } => format!("at {url}"),
    };
    let mut secret_values: Vec<String> = Vec::new();
    let answered = tokio::time::timeout(CALL_TIMEOUT, async {
        let client = match connect(runner, &executor.server, &mut secret_values).await {
            Ok(client) => client,
            Err(outcome) => return outcome,
        };
        let arguments = call.arguments.as_object().cloned().unwrap_or_default();
        let params = CallToolRequestParams::new(name.clone()).with_arguments(arguments);
        let result = client.call_tool(params).await;
        let _ = client.cancel().await;
        match result {
            Ok(result) => read_result(&name, &result),
            Err(error) => ToolOutcome::failed(format!("the MCP call `{name}` failed: {error}")),
        }
    })
    .await;
    let outcome = answered.unwrap_or_else(|_| ToolOutcome::Failed {
        message: format!(
            "the MCP server {server} did not answer `{name}` within {} s",
            CALL_TIMEOUT.as_secs()
        ),
        retryable: true,
    });
    let secret_values: Vec<&str> = secret_values.iter().map(String::as_str).collect();
    crate::scrubbed(outcome, &secret_values)
}

type Client = RunningService<RoleClient, ()>;

/// A session with `server`; the secret values its headers were given are
/// added to `secret_values` (what its answers are scrubbed of).
async fn connect(
    runner: &ToolRunner,
    server: &McpServer,
    secret_values: &mut Vec<String>,
) -> Result<Client, ToolOutcome> {
    use rmcp::ServiceExt;
    // Only the HTTP transport reads the runner's outbound settings and secrets.
    let _ = (runner, &secret_values);
    match server {
        #[cfg(feature = "mcp-stdio")]
        McpServer::Stdio { command, args } => {
            let mut process = tokio::process::Command::new(command);
            process.args(args).kill_on_drop(true);
            let transport = rmcp::transport::TokioChildProcess::new(process).map_err(|error| {
                ToolOutcome::failed(format!(
                    "the MCP server `{command}` could not start: {error}"
                ))
            })?;
            ().serve(transport).await.map_err(|error| {
                ToolOutcome::failed(format!(
                    "the MCP server `{command}` did not complete the handshake: {error}"
                ))
            })
        }
        #[cfg(not(feature = "mcp-stdio"))]
        McpServer::Stdio { command, .. } => Err(ToolOutcome::failed(format!(
            "the MCP server `{command}` runs over stdio, which this process cannot start (the CLI and `baton serve` can)"
        ))),
        #[cfg(feature = "mcp-http")]
        McpServer::Http { url, headers } => {
            use rmcp::transport::StreamableHttpClientTransport;
            use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
            let policy = baton_outbound::OutboundPolicy::default()
                .with_http_allowed_hosts(&runner.http_allowed_hosts);
            let target = baton_outbound::check(url, &policy, runner.resolver.as_ref())
                .await
                .map_err(|refusal| {
                    ToolOutcome::failed(format!("the MCP server URL is refused: {refusal}"))
                })?;
            let resolved = runner.resolve(headers).await?;
            secret_values.extend(resolved.secret_values().into_iter().map(String::from));
            let client = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .resolve(&target.host, target.address)
                .default_headers(
                    crate::http::header_map(&resolved)
                        .map_err(|problem| ToolOutcome::failed(problem.to_string()))?,
                )
                .build()
                .map_err(|error| {
                    ToolOutcome::failed(format!("the HTTP client cannot be built: {error}"))
                })?;
            let transport = StreamableHttpClientTransport::with_client(
                client,
                StreamableHttpClientTransportConfig::with_uri(url.as_str()),
            );
            ().serve(transport).await.map_err(|error| {
                ToolOutcome::failed(format!(
                    "the MCP server at {url} did not complete the handshake: {error}"
                ))
            })
        }
        #[cfg(not(feature = "mcp-http"))]
        McpServer::Http { url, .. } => Err(ToolOutcome::failed(format!(
            "the MCP server at {url} speaks streamable HTTP, which this build cannot reach"
        ))),
    }
}

fn read_result(name: &str, result: &CallToolResult) -> ToolOutcome {
    let value = result.structured_content.clone().unwrap_or_else(|| {
        let text: Vec<String> = result
            .content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text(text) => Some(text.text.clone()),
                _ => None,
            })
            .collect();
        let joined = text.join("\n");
        serde_json::from_str(&joined).unwrap_or(Value::String(joined))
    });
    if result.is_error == Some(true) {
        return ToolOutcome::failed(format!("the MCP tool `{name}` reported an error: {value}"));
    }
    ToolOutcome::Succeeded(value)
}
