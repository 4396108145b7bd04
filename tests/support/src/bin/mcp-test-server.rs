//! Test double for an MCP server over stdio: [`WordCountServer`]'s tools.

use baton_test_support::mcp_server::WordCountServer;
use rmcp::ServiceExt;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let service = WordCountServer.serve(rmcp::transport::stdio()).await?;
    service.waiting().await?;
    Ok(())
}
