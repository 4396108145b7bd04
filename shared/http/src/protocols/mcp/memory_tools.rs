//! The memory tools of Baton's MCP server: `memory_put` keeps an item (the
//! caller's user as its provenance) and `memory_search` ranks up to 10
//! namespaces' items for a query, as `PUT /memory/items` and `POST
//! /memory/search` do. A wrong argument is a tool error naming its JSON
//! path.

use baton_memory::item::Provenance;
use baton_runtime::services::memory::{MemoryError, MemoryWrite};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::tool_answers::{ToolRefusal, arguments, refused};
use super::{BatonMcpServer, ToolOutcome};

/// `memory_put`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct MemoryPutArguments {
    /// 1 to 8 strings, outermost first.
    namespace: Vec<String>,
    key: String,
    value: Value,
    /// What search reads (default: the value's text).
    #[serde(default)]
    text: Option<String>,
}

/// `memory_search`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct MemorySearchArguments {
    namespaces: Vec<Vec<String>>,
    query: String,
    /// 1 to 50 (default 5).
    #[serde(default)]
    limit: Option<usize>,
}

fn memory_refusal(error: MemoryError) -> ToolRefusal {
    match error {
        MemoryError::Invalid { path, message } => {
            refused(format!("{path}: {message}"), json!({"path": path}))
        }
        MemoryError::NamespaceFull { cap } => refused(
            format!("the namespace holds {cap} items, its cap"),
            json!({"code": "memory_namespace_full", "cap": cap}),
        ),
        MemoryError::Unavailable(reason) => refused(
            reason,
            json!({"code": "memory_unavailable", "retryable": true}),
        ),
    }
}

impl BatonMcpServer {
    pub(super) async fn memory_put(
        &self,
        tenant: &str,
        raw: Option<Map<String, Value>>,
        person: Option<String>,
    ) -> ToolOutcome {
        let MemoryPutArguments {
            namespace,
            key,
            value,
            text,
        } = arguments(raw)?;
        let mut item = self
            .state
            .memory
            .put(
                tenant,
                MemoryWrite {
                    namespace,
                    key,
                    value,
                    text,
                    expires_at: None,
                    provenance: Provenance {
                        person,
                        ..Provenance::default()
                    },
                },
            )
            .await
            .map_err(memory_refusal)?;
        item.embedding = None;
        Ok(serde_json::to_value(item).unwrap_or_default())
    }

    pub(super) async fn memory_search(
        &self,
        tenant: &str,
        raw: Option<Map<String, Value>>,
    ) -> ToolOutcome {
        let MemorySearchArguments {
            namespaces,
            query,
            limit,
        } = arguments(raw)?;
        let mut found = self
            .state
            .memory
            .search(tenant, &namespaces, &query, limit.unwrap_or(5))
            .await
            .map_err(memory_refusal)?;
        for ranked in &mut found {
            ranked.item.embedding = None;
        }
        Ok(json!({ "found": found }))
    }
}
