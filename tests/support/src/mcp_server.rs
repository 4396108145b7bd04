//! Test double for an MCP server (a tool server): two tools, served over
//! stdio by the `mcp-test-server` binary and over streamable HTTP by the
//! tests that mount [`WordCountServer`] in an HTTP server.
//!
//! - `word_count {text}` answers `{"words": n, "text": text}` as structured
//!   content;
//! - `refuse {reason}` answers an error result carrying the reason.

use std::sync::Arc;

use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Map, Value, json};

/// The test double's tools.
#[derive(Clone, Default)]
pub struct WordCountServer;

fn schema(property: &str) -> Arc<Map<String, Value>> {
    let schema = json!({"type": "object", "required": [property],
                        "properties": {property: {"type": "string"}}});
    Arc::new(schema.as_object().cloned().unwrap_or_default())
}

impl ServerHandler for WordCountServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![
            Tool::new("word_count", "Counts the words of a text.", schema("text")),
            Tool::new("refuse", "Always refuses, saying why.", schema("reason")),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        let text = |name: &str| {
            arguments
                .get(name)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Ok(match request.name.as_ref() {
            "word_count" => {
                let words = text("text").split_whitespace().count();
                CallToolResult::structured(json!({"words": words, "text": text("text")})).into()
            }
            "refuse" => CallToolResult::error(vec![ContentBlock::text(text("reason"))]).into(),
            other => {
                CallToolResult::error(vec![ContentBlock::text(format!("no tool `{other}`"))]).into()
            }
        })
    }
}
