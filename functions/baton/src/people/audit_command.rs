//! `baton audit`: a tenant's audit trail, newest first, read from the
//! store `baton serve` (or the deployment) keeps it in: each record's time,
//! who, the operation, the resource and the outcome; `--format jsonl`
//! exports one record per line. Nothing here can change a record.

use std::sync::Arc;

use baton_bootstrap::StoreChoice;
use baton_runtime::clock::SystemClock;
use baton_runtime::ports::AuditLog;
use baton_runtime::services::{AuditTrail, DEFAULT_AUDIT_RETENTION_DAYS};
use clap::ValueEnum;

use crate::failure::{Ended, Outcome, invalid};
use crate::setup::configuration;

/// How `baton audit` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AuditFormat {
    /// One line a record: time, actor, action, resource, status.
    Pretty,
    /// One JSON record a line (the export).
    Jsonl,
}

/// Prints the tenant's trail, `limit` records (all of it with `all`).
pub async fn audit(
    store: StoreChoice,
    tenant: String,
    limit: usize,
    all: bool,
    format: AuditFormat,
) -> Outcome {
    // Reading the trail needs the store only (no model, no registry).
    let log: Arc<dyn AuditLog> = match &store {
        StoreChoice::Memory => {
            return Err(invalid(
                "--store memory keeps nothing after this command: read the trail with --store sqlite or dynamodb",
            ));
        }
        StoreChoice::Dynamodb => {
            let configuration = configuration()?;
            match baton_bootstrap::cloud_ports(&configuration).await {
                Ok(ports) => ports.audit,
                Err(error) => return Err(invalid(error.to_string())),
            }
        }
        StoreChoice::Sqlite(_) => {
            let path = crate::people::durable_file(&store)?;
            match baton_sqlite::SqliteStore::open(&path) {
                Ok(sqlite) => Arc::new(sqlite),
                Err(error) => return Err(invalid(format!("store {}: {error}", path.display()))),
            }
        }
    };
    // The retention only stamps new records; reading needs none.
    let trail = AuditTrail::new(
        log,
        Arc::new(SystemClock),
        Arc::new(baton_runtime::clock::RandomIds),
        DEFAULT_AUDIT_RETENTION_DAYS,
    );
    let mut cursor = None;
    let mut printed = 0;
    loop {
        let page_size = if all {
            baton_runtime::services::MAX_AUDIT_PAGE
        } else {
            limit.saturating_sub(printed).max(1)
        };
        let page = match trail.list(&tenant, page_size, cursor.take()).await {
            Ok(page) => page,
            Err(error) => {
                return Err(invalid(format!(
                    "the audit trail could not be read: {error}"
                )));
            }
        };
        for record in &page.records {
            match format {
                AuditFormat::Jsonl => {
                    println!("{}", serde_json::to_string(record).unwrap_or_default());
                }
                AuditFormat::Pretty => println!(
                    "{}  {:<24} {:<22} {:<44} {}{}",
                    record.at,
                    record.actor,
                    record.action,
                    record.resource.as_deref().unwrap_or("-"),
                    record.outcome.status,
                    record
                        .outcome
                        .code
                        .as_deref()
                        .map(|code| format!(" {code}"))
                        .unwrap_or_default()
                ),
            }
            printed += 1;
        }
        cursor = page.next_cursor;
        if cursor.is_none() || (!all && printed >= limit) {
            break;
        }
    }
    if printed == 0 && format == AuditFormat::Pretty {
        println!("no audit records for tenant `{tenant}`");
    }
    Ok(Ended::Completed)
}
