//! `baton memory …`: a tenant's memory across runs in a store (`--store
//! sqlite`, the default file, or `dynamodb`, the table of `BATON_TABLE`)
//! for the tenant `--tenant` (default `local`). A namespace is written with
//! its parts joined by `/` (`client/northwind/tone`). `put` keeps an item
//! (its value is JSON when it parses as JSON, else the text itself),
//! `get`, `list`, `search`, `delete` and `forget` do what they say; each
//! prints JSON. A wrong namespace, key, value or expiry exits 2 naming its
//! field.

use std::path::PathBuf;

use baton_bootstrap::StoreChoice;
use baton_memory::item::Provenance;
use baton_runtime::services::memory::{MemoryError, MemoryWrite};
use clap::Subcommand;
use serde_json::Value;

use crate::failure::{Ended, Outcome, invalid};

#[derive(Subcommand)]
pub enum MemoryCommand {
    /// Keep an item: VALUE under NAMESPACE and KEY (a new version replaces
    /// the old). Prints the item.
    Put {
        namespace: String,
        key: String,
        value: String,
        /// What search reads (default: the value).
        #[arg(long)]
        text: Option<String>,
        /// When it is gone (RFC 3339, in the future).
        #[arg(long)]
        expires_at: Option<String>,
        /// Who wrote it (its provenance; a person's items are forgotten
        /// together with `forget --person`).
        #[arg(long)]
        person: Option<String>,
    },
    /// One item.
    Get { namespace: String, key: String },
    /// The items of PREFIX and the namespaces under it (default: all).
    List {
        prefix: Option<String>,
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// The items of NAMESPACE best matching QUERY (BM25, fused with
    /// embeddings when `BATON_EMBEDDINGS_MODEL` is set).
    Search {
        query: String,
        /// A namespace to read (repeat for several; at most 10).
        #[arg(long = "namespace", required = true)]
        namespaces: Vec<String>,
        #[arg(long, default_value_t = 5)]
        limit: usize,
    },
    /// Delete one item.
    Delete { namespace: String, key: String },
    /// Delete every item under a prefix, or every item a person wrote.
    Forget {
        #[arg(long, conflicts_with = "person", required_unless_present = "person")]
        prefix: Option<String>,
        #[arg(long)]
        person: Option<String>,
    },
}

/// `client/northwind/tone` as its parts (an empty text: no parts).
fn parts(namespace: &str) -> Vec<String> {
    namespace
        .split('/')
        .filter(|part| !part.is_empty())
        .map(str::to_string)
        .collect()
}

fn refused(error: MemoryError) -> crate::failure::CommandError {
    invalid(format!("memory: {error}"))
}

fn print(value: serde_json::Result<Value>) {
    let text = value
        .and_then(|value| serde_json::to_string_pretty(&value))
        .unwrap_or_else(|_| "null".into());
    println!("{text}");
}

/// Runs `baton memory COMMAND` on `store` for `tenant`.
pub async fn memory(
    command: MemoryCommand,
    store: StoreChoice,
    tenant: String,
    registry: Option<PathBuf>,
) -> Outcome {
    let services =
        super::store_services(&store, registry, "memory needs --store sqlite or dynamodb").await?;
    let memory = &services.memory;
    match command {
        MemoryCommand::Put {
            namespace,
            key,
            value,
            text,
            expires_at,
            person,
        } => {
            let value = serde_json::from_str::<Value>(&value).unwrap_or(Value::String(value));
            let mut item = memory
                .put(
                    &tenant,
                    MemoryWrite {
                        namespace: parts(&namespace),
                        key,
                        value,
                        text,
                        expires_at,
                        provenance: Provenance {
                            person,
                            ..Provenance::default()
                        },
                    },
                )
                .await
                .map_err(refused)?;
            item.embedding = None;
            print(serde_json::to_value(&item));
        }
        MemoryCommand::Get { namespace, key } => {
            match memory
                .get(&tenant, &parts(&namespace), &key)
                .await
                .map_err(refused)?
            {
                Some(mut item) => {
                    item.embedding = None;
                    print(serde_json::to_value(&item));
                }
                None => return Err(invalid(format!("memory: no item `{key}` in `{namespace}`"))),
            }
        }
        MemoryCommand::List { prefix, limit } => {
            let prefix = prefix.as_deref().map(parts).unwrap_or_default();
            let mut items = memory
                .list(&tenant, &prefix, limit)
                .await
                .map_err(refused)?;
            for item in &mut items {
                item.embedding = None;
            }
            print(serde_json::to_value(&items));
        }
        MemoryCommand::Search {
            query,
            namespaces,
            limit,
        } => {
            let namespaces: Vec<Vec<String>> = namespaces.iter().map(|text| parts(text)).collect();
            let mut found = memory
                .search(&tenant, &namespaces, &query, limit)
                .await
                .map_err(refused)?;
            for ranked in &mut found {
                ranked.item.embedding = None;
            }
            print(serde_json::to_value(&found));
        }
        MemoryCommand::Delete { namespace, key } => {
            let deleted = memory
                .delete(&tenant, &parts(&namespace), &key)
                .await
                .map_err(refused)?;
            print(Ok(serde_json::json!({ "deleted": deleted })));
        }
        MemoryCommand::Forget { prefix, person } => {
            let deleted = match (prefix, person) {
                (Some(prefix), None) => memory
                    .forget_under(&tenant, &parts(&prefix))
                    .await
                    .map_err(refused)?,
                (None, Some(person)) => memory
                    .forget_person(&tenant, &person)
                    .await
                    .map_err(refused)?,
                _ => return Err(invalid("memory forget: give --prefix or --person")),
            };
            print(Ok(serde_json::json!({ "deleted": deleted })));
        }
    }
    Ok(Ended::Completed)
}
