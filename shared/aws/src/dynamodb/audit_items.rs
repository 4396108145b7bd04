//! The audit trail on the run store's table: one item per record, put only
//! if no item has its key (`attribute_not_exists(pk)`: never an overwrite),
//! gone when DynamoDB's TTL reaches its retention. No code path updates or
//! deletes one.
//!
//! | item | pk | sk | attributes |
//! | --- | --- | --- | --- |
//! | record | `T#{tenant}#AUDIT` | `A#{auditId}` (time-ordered) | `record` (JSON), `expiresAt` (TTL, Unix s) |

use async_trait::async_trait;
use baton_runtime::error::StoreError;
use baton_runtime::ports::{AuditAppend, AuditLog, AuditPage, AuditQuery, AuditRecord};

use super::keys::{audit_pk, audit_sk};
use crate::dynamodb::attributes::{Item, n, read_text, s, sdk_failure};
use crate::dynamodb::store::DynamoRunStore;

#[async_trait]
impl AuditLog for DynamoRunStore {
    async fn append_audit(&self, record: &AuditRecord) -> Result<AuditAppend, StoreError> {
        let text = serde_json::to_string(record)
            .map_err(|error| StoreError::Corrupt(format!("audit record: {error}")))?;
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(Item::from([
                ("pk".to_string(), s(audit_pk(&record.tenant_id))),
                ("sk".to_string(), s(audit_sk(&record.audit_id))),
                ("record".to_string(), s(text)),
                ("expiresAt".to_string(), n(record.expires_at_millis / 1000)),
            ])))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        match put {
            Ok(_) => Ok(AuditAppend::Appended),
            Err(error)
                if error
                    .as_service_error()
                    .is_some_and(|service| service.is_conditional_check_failed_exception()) =>
            {
                Ok(AuditAppend::AlreadyKept)
            }
            Err(error) => Err(sdk_failure(error)),
        }
    }

    async fn list_audit(
        &self,
        tenant_id: &str,
        query: &AuditQuery,
    ) -> Result<AuditPage, StoreError> {
        let mut records = Vec::new();
        let mut start = None;
        loop {
            let mut request = self
                .client
                .query()
                .table_name(&self.table)
                .consistent_read(true)
                .scan_index_forward(false)
                .expression_attribute_values(":pk", s(audit_pk(tenant_id)))
                // Expired records wait for DynamoDB's TTL sweep: skipped here.
                .filter_expression("expiresAt > :now")
                .expression_attribute_values(":now", n(query.now_millis / 1000))
                .set_exclusive_start_key(start.take());
            request = match &query.cursor {
                Some(cursor) => request
                    .key_condition_expression("pk = :pk AND sk BETWEEN :first AND :before")
                    .expression_attribute_values(":first", s("A#"))
                    .expression_attribute_values(":before", s(audit_sk(cursor))),
                None => request
                    .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
                    .expression_attribute_values(":prefix", s("A#")),
            };
            let page = request.send().await.map_err(sdk_failure)?;
            for item in page.items() {
                let record: AuditRecord = serde_json::from_str(read_text(item, "record")?)
                    .map_err(|error| StoreError::Corrupt(format!("audit record: {error}")))?;
                // BETWEEN includes the cursor's own record.
                if query.cursor.as_deref() != Some(record.audit_id.as_str()) {
                    records.push(record);
                }
            }
            start = page.last_evaluated_key().cloned();
            if records.len() > query.limit || start.is_none() {
                break;
            }
        }
        Ok(AuditPage::of_over_fetched(records, query.limit))
    }
}
