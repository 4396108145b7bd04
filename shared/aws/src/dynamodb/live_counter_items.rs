//! The tenant's live-run counter on DynamoDB: one item per tenant,
//!
//! ```text
//! pk = T#{tenant}#COUNTERS   sk = LIVE_RUNS   liveRuns (N)
//! ```
//!
//! moved by `ADD` in the transaction that creates a run at work (queued,
//! running) or commits a change into or out of work, so it never disagrees
//! with the runs and the live-run limit is one `GetItem`, whatever the
//! tenant's history. A create under a limit is conditional on it
//! (`liveRuns < :limit`): two racing submissions cannot both pass.
//! A table written before the counter existed starts it at 0, so runs at
//! work then are not counted until they end (a moment's leeway, once).

use aws_sdk_dynamodb::types::{TransactWriteItem, Update};
use baton_core::run::RunStatus;
use baton_runtime::error::StoreError;

use crate::dynamodb::store::{DynamoRunStore, n, s, sdk_failure, unavailable};

const LIVE_RUNS_SK: &str = "LIVE_RUNS";

fn counter_pk(tenant_id: &str) -> String {
    format!("T#{tenant_id}#COUNTERS")
}

impl DynamoRunStore {
    /// The counter's move for a run going from `before` (None: a new run)
    /// to `after`, if it moves; with `limit`, conditional on the counter
    /// being below it.
    pub(crate) fn live_run_change(
        &self,
        tenant_id: &str,
        before: Option<RunStatus>,
        after: RunStatus,
        limit: Option<u64>,
    ) -> Result<Option<TransactWriteItem>, StoreError> {
        let was = before.is_some_and(RunStatus::is_at_work);
        let delta: i64 = match (was, after.is_at_work()) {
            (false, true) => 1,
            (true, false) => -1,
            _ => return Ok(None),
        };
        let mut update = Update::builder()
            .table_name(&self.table)
            .key("pk", s(counter_pk(tenant_id)))
            .key("sk", s(LIVE_RUNS_SK))
            .update_expression("ADD liveRuns :delta")
            .expression_attribute_values(":delta", n_signed(delta));
        if let Some(limit) = limit.filter(|_| delta > 0) {
            update = update
                .condition_expression("attribute_not_exists(liveRuns) OR liveRuns < :limit")
                .expression_attribute_values(":limit", n(limit));
        }
        Ok(Some(
            TransactWriteItem::builder()
                .update(update.build().map_err(unavailable)?)
                .build(),
        ))
    }

    /// The tenant's runs at work (a consistent read of its counter).
    pub(crate) async fn read_live_runs(&self, tenant_id: &str) -> Result<u64, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(counter_pk(tenant_id)))
            .key("sk", s(LIVE_RUNS_SK))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_failure)?;
        let live = output
            .item
            .as_ref()
            .and_then(|item| item.get("liveRuns"))
            .and_then(|value| value.as_n().ok())
            .and_then(|text| text.parse::<i64>().ok())
            .unwrap_or(0);
        Ok(u64::try_from(live).unwrap_or(0))
    }
}

fn n_signed(number: i64) -> aws_sdk_dynamodb::types::AttributeValue {
    aws_sdk_dynamodb::types::AttributeValue::N(number.to_string())
}
