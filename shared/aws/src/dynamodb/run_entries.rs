//! Run entries (`baton_core::records::entries`) as items of the run's partition:
//! `sk = ENTRY#{key}`, the entry as deflated JSON in `body`, expiring with
//! the run's events. Put in the commit's transaction (one action each),
//! read by a consistent `begins_with` query.

use aws_sdk_dynamodb::types::TransactWriteItem;
use baton_core::records::entries::RunEntry;
use baton_runtime::error::StoreError;

use super::keys::run_pk;
use crate::dynamodb::state_codec::{decode_compressed, encode_compressed};
use crate::dynamodb::store::{DynamoRunStore, Item, put, s, sdk_failure};

const ENTRY_SK_PREFIX: &str = "ENTRY#";

impl DynamoRunStore {
    /// One `Put` per entry, for the commit's transaction.
    pub(crate) fn entry_items(
        &self,
        pk: &str,
        entries: &[RunEntry],
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        entries
            .iter()
            .map(|entry| {
                let item = Item::from([
                    ("pk".to_string(), s(pk)),
                    (
                        "sk".to_string(),
                        s(format!("{ENTRY_SK_PREFIX}{}", entry.key)),
                    ),
                    (
                        "body".to_string(),
                        encode_compressed(entry, &format!("entry {}", entry.key))?,
                    ),
                ]);
                put(&self.table, item, None)
            })
            .collect()
    }

    /// The run's entries under `prefix`, in key order, every page.
    pub(crate) async fn query_entries(
        &self,
        tenant_id: &str,
        run_id: &str,
        prefix: &str,
    ) -> Result<Vec<RunEntry>, StoreError> {
        let mut entries = Vec::new();
        let mut start = None;
        loop {
            let output = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
                .expression_attribute_values(":pk", s(run_pk(tenant_id, run_id)))
                .expression_attribute_values(":prefix", s(format!("{ENTRY_SK_PREFIX}{prefix}")))
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(sdk_failure)?;
            for item in output.items() {
                entries.push(decode_compressed(item.get("body"), "run entry")?);
            }
            match output.last_evaluated_key() {
                Some(key) if !key.is_empty() => start = Some(key.clone()),
                _ => return Ok(entries),
            }
        }
    }
}
