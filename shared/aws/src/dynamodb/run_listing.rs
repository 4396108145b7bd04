//! The runs list on DynamoDB: one `Query` of the tenant's listing items
//! (`T#{tenant}#RUNS`, see `open_items`), or of one status's
//! (`T#{tenant}#RUNS#{status}`) when the query names a status, newest
//! first, starting after the cursor's key: a page costs the same whatever
//! the tenant's history. Listings past their retention are left out.
//! `?forkedFrom=` reads the source run's forks partition (its status
//! filtered from what the pages return).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use baton_core::state::listing::{RunListPage, RunListQuery, RunListing};
use baton_runtime::error::StoreError;

use super::keys::{runs_by_status_pk, runs_forked_from_pk, runs_pk};
use crate::dynamodb::store::{DynamoRunStore, s, sdk_failure};

impl DynamoRunStore {
    pub(crate) async fn query_run_page(
        &self,
        tenant_id: &str,
        query: &RunListQuery,
    ) -> Result<RunListPage, StoreError> {
        let pk = match (&query.forked_from, query.status) {
            // A run's forks are few: their own partition, the status
            // filtered from what it returns.
            (Some(source), _) => runs_forked_from_pk(tenant_id, source),
            (None, Some(status)) => runs_by_status_pk(tenant_id, status),
            (None, None) => runs_pk(tenant_id),
        };
        let wanted = query.limit + 1;
        let mut listed = Vec::new();
        let mut start: Option<HashMap<String, AttributeValue>> =
            query.cursor.as_ref().map(|cursor| {
                HashMap::from([
                    ("pk".to_string(), s(&pk)),
                    ("sk".to_string(), s(cursor.key())),
                ])
            });
        loop {
            let page_size = i32::try_from(wanted - listed.len()).unwrap_or(i32::MAX);
            let output = self
                .client
                .query()
                .table_name(&self.table)
                .consistent_read(true)
                .key_condition_expression("pk = :pk")
                .expression_attribute_values(":pk", s(&pk))
                .scan_index_forward(false)
                .limit(page_size)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(sdk_failure)?;
            for item in output.items() {
                if self.has_expired(item) {
                    continue;
                }
                let body = crate::dynamodb::attributes::read_text(item, "listing")?;
                let listing: RunListing = serde_json::from_str(body)
                    .map_err(|error| StoreError::Corrupt(format!("listing item: {error}")))?;
                if query.admits(&listing) {
                    listed.push(listing);
                }
            }
            match output.last_evaluated_key {
                Some(key) if !key.is_empty() && listed.len() < wanted => start = Some(key),
                _ => break,
            }
        }
        Ok(RunListPage::from_newest_first(listed, query.limit))
    }
}
