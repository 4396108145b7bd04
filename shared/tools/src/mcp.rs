//! The `mcp` executor over stdio (feature `mcp-stdio`: the CLI and `baton
//! serve`; a Lambda function has no server processes to start): each call
//! starts the server's command, speaks the Model Context Protocol to it
//! through the `rmcp` crate (initialize, `tools/call`), reads the result
//! (its structured content, else its text: JSON when it parses) and stops
//! the process. A server that cannot start, answers with an error or takes
//! longer than the timeout gives an error the model can read.

use std::time::Duration;

use baton_core::tools::{McpServer, McpToolExecutor, ToolDefinition};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ContentBlock};
use rmcp::transport::TokioChildProcess;
use serde_json::Value;

use crate::{ToolCall, ToolOutcome};

/// How long one call (start, handshake, call) may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) async fn call(
    tool: &ToolDefinition,
    executor: &McpToolExecutor,
    call: &ToolCall,
) -> ToolOutcome {
    let McpServer::Stdio { command, args } = &executor.server else {
        return ToolOutcome::failed(format!(
            "tool `{}` is served over MCP streamable HTTP, which this build cannot reach yet",
            tool.name
        ));
    };
    let name = executor.tool.clone().unwrap_or_else(|| tool.name.clone());
    match tokio::time::timeout(CALL_TIMEOUT, call_stdio(command, args, &name, call)).await {
        Ok(outcome) => outcome,
        Err(_) => ToolOutcome::Failed {
            message: format!(
                "the MCP server `{command}` did not answer `{name}` within {} s",
                CALL_TIMEOUT.as_secs()
            ),
            retryable: true,
        },
    }
}

async fn call_stdio(command: &str, args: &[String], name: &str, call: &ToolCall) -> ToolOutcome {
    let mut process = tokio::process::Command::new(command);
    process.args(args).kill_on_drop(true);
    let transport = match TokioChildProcess::new(process) {
        Ok(transport) => transport,
        Err(error) => {
            return ToolOutcome::failed(format!(
                "the MCP server `{command}` could not start: {error}"
            ));
        }
    };
    let client = match ().serve(transport).await {
        Ok(client) => client,
        Err(error) => {
            return ToolOutcome::failed(format!(
                "the MCP server `{command}` did not complete the handshake: {error}"
            ));
        }
    };
    let arguments = call.arguments.as_object().cloned().unwrap_or_default();
    let params = CallToolRequestParams::new(name.to_string()).with_arguments(arguments);
    let answered = client.call_tool(params).await;
    let _ = client.cancel().await;
    let result = match answered {
        Ok(result) => result,
        Err(error) => {
            return ToolOutcome::failed(format!("the MCP call `{name}` failed: {error}"));
        }
    };
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
