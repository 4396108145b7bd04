//! `baton gc`: removes ended runs past their retention from a store, in
//! bounded batches, and says how many went. On SQLite the runs are deleted
//! with everything of them; on DynamoDB (`--store dynamodb`, the table of
//! `BATON_TABLE`) the items the ending commits could not reach are stamped
//! with their expiry, and DynamoDB's TTL deletes them. Expired memory items
//! go too (on SQLite here; DynamoDB's TTL deletes its own). `baton serve`
//! does the same every minute; this is for a file no server keeps, or a
//! cron.

use std::sync::Arc;

use baton_bootstrap::StoreChoice;
use baton_runtime::clock::SystemClock;
use baton_runtime::ports::{Clock, MemoryStore, RetentionUpkeep};

use crate::failure::{Ended, Outcome, invalid};
use crate::setup::configuration;

/// Runs `baton gc`: every batch until none is left; prints the totals
/// (JSON) and exits 0, or 2 naming what failed.
pub async fn gc(store: StoreChoice) -> Outcome {
    let configuration = configuration()?;
    // Expired memory items: removed here where the store has no TTL.
    let mut memory: Option<Arc<dyn MemoryStore>> = None;
    let retention: Arc<dyn RetentionUpkeep> = match &store {
        StoreChoice::Memory => {
            return Err(invalid(
                "--store memory keeps nothing between processes: there is nothing to collect (give --store sqlite or dynamodb)",
            ));
        }
        StoreChoice::Sqlite(path) => {
            let path = match path {
                Some(path) => path.clone(),
                None => match baton_bootstrap::stores::default_state_file(&configuration) {
                    Ok(path) => path,
                    Err(error) => return Err(invalid(error)),
                },
            };
            match baton_sqlite::SqliteStore::open(&path) {
                Ok(sqlite) => {
                    let sqlite = Arc::new(sqlite);
                    memory = Some(sqlite.clone() as Arc<dyn MemoryStore>);
                    sqlite
                }
                Err(error) => return Err(invalid(format!("store {}: {error}", path.display()))),
            }
        }
        StoreChoice::Dynamodb => match baton_bootstrap::cloud_ports(&configuration).await {
            Ok(ports) => ports.retention,
            Err(error) => return Err(invalid(error)),
        },
    };
    let clock = SystemClock;
    let (mut runs, mut items) = (0, 0);
    loop {
        match retention
            .expire_ended_runs(
                clock.now(),
                baton_runtime::services::RetentionPass::SERVE.batch,
            )
            .await
        {
            Ok(batch) => {
                runs += batch.runs;
                items += batch.items;
                if !batch.more {
                    break;
                }
            }
            Err(error) => {
                return Err(invalid(format!(
                    "baton gc: a batch failed after {runs} run(s): {error}"
                )));
            }
        }
    }
    let memory_items = match &memory {
        Some(memory) => match memory
            .remove_expired_memory(&clock.now().rfc3339(), usize::MAX)
            .await
        {
            Ok(removed) => removed,
            Err(error) => {
                return Err(invalid(format!(
                    "baton gc: removing expired memory items failed: {error}"
                )));
            }
        },
        None => 0,
    };
    println!(
        "{}",
        serde_json::json!({
            "runs": runs,
            "items": items,
            "memoryItems": memory_items,
            "retentionDays": configuration.retention_days,
        })
    );
    Ok(Ended::Completed)
}
