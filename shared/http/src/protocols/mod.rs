//! The agent protocols Baton serves beside its own API: A2A (`a2a`: the
//! agent card and the JSON-RPC methods at `/a2a`) and MCP (`mcp`: its tools
//! over Streamable HTTP at `/mcp` and over stdio for `baton mcp`, behind the
//! `mcp-server` feature).

pub mod a2a;
#[cfg(feature = "mcp-server")]
pub mod mcp;
