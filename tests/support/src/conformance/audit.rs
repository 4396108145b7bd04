//! What every `AuditLog` adapter must do: records come back newest first a
//! page at a time, a record's id is never written twice (the second append
//! is refused and the first record is what stays), expired records are not
//! returned, tenants stay apart.

use std::sync::Arc;

use baton_runtime::ports::{AuditAppend, AuditLog, AuditOutcome, AuditQuery, AuditRecord};

use super::check;

const DAY_MILLIS: u64 = 24 * 3600 * 1000;
const NOW_MILLIS: u64 = 1_767_225_600_000;

fn record(tenant_id: &str, index: u64, actor: &str) -> AuditRecord {
    let at_millis = NOW_MILLIS + index * 1000;
    AuditRecord {
        audit_id: format!("{at_millis:013}-a{index}"),
        tenant_id: tenant_id.to_string(),
        at: format!("2026-01-01T00:00:{index:02}Z"),
        at_millis,
        actor: actor.to_string(),
        action: "cancelRun".into(),
        resource: Some(format!("run/run-{index}")),
        request_id: format!("request-{index}"),
        outcome: AuditOutcome {
            status: 200,
            code: None,
        },
        expires_at_millis: at_millis + 400 * DAY_MILLIS,
    }
}

/// Runs the suite against `log`; `unique` keeps runs of it apart.
pub async fn audit_log_conformance(log: Arc<dyn AuditLog>, unique: &str) -> Result<(), String> {
    let (tenant, other) = (format!("audit-a-{unique}"), format!("audit-b-{unique}"));
    let failed = |error: baton_runtime::error::StoreError| error.to_string();
    let query = |limit: usize, cursor: Option<String>| AuditQuery {
        limit,
        cursor,
        now_millis: NOW_MILLIS + 60_000,
    };
    for index in 1..=5 {
        let appended = log
            .append_audit(&record(&tenant, index, "ana@acme.example"))
            .await
            .map_err(failed)?;
        check(appended == AuditAppend::Appended, "a new record is kept")?;
    }
    log.append_audit(&record(&other, 9, "globex"))
        .await
        .map_err(failed)?;
    // The same id again, with other content: refused, the first stays.
    let again = log
        .append_audit(&record(&tenant, 3, "mallory"))
        .await
        .map_err(failed)?;
    check(
        again == AuditAppend::AlreadyKept,
        "a record's id is written once: the second append is refused",
    )?;
    let first = log
        .list_audit(&tenant, &query(2, None))
        .await
        .map_err(failed)?;
    let ids: Vec<&str> = first
        .records
        .iter()
        .map(|record| record.audit_id.as_str())
        .collect();
    check(
        ids == [
            record(&tenant, 5, "").audit_id,
            record(&tenant, 4, "").audit_id,
        ],
        "newest first, a page at a time",
    )?;
    check(first.next_cursor.is_some(), "a full page names the next")?;
    let second = log
        .list_audit(&tenant, &query(2, first.next_cursor.clone()))
        .await
        .map_err(failed)?;
    check(
        second
            .records
            .iter()
            .map(|record| record.audit_id.as_str())
            .collect::<Vec<_>>()
            == [
                record(&tenant, 3, "").audit_id,
                record(&tenant, 2, "").audit_id,
            ],
        "the next page continues after the cursor",
    )?;
    check(
        second.records[0].actor == "ana@acme.example",
        "the refused append changed nothing",
    )?;
    let last = log
        .list_audit(&tenant, &query(2, second.next_cursor.clone()))
        .await
        .map_err(failed)?;
    check(
        last.records.len() == 1 && last.next_cursor.is_none(),
        "the last page ends the trail",
    )?;
    check(
        last.records[0] == record(&tenant, 1, "ana@acme.example"),
        "a record reads back as written",
    )?;
    let others = log
        .list_audit(&other, &query(10, None))
        .await
        .map_err(failed)?;
    check(
        others.records.len() == 1 && others.records[0].actor == "globex",
        "tenants stay apart",
    )?;
    // Past its retention a record is not returned.
    let late = AuditQuery {
        limit: 10,
        cursor: None,
        now_millis: NOW_MILLIS + 401 * DAY_MILLIS,
    };
    check(
        log.list_audit(&tenant, &late)
            .await
            .map_err(failed)?
            .records
            .is_empty(),
        "expired records are not returned",
    )?;
    Ok(())
}
