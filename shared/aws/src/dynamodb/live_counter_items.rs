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

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use baton_core::state::run::RunStatus;
use baton_runtime::error::StoreError;

use super::keys::counter_pk;
use crate::dynamodb::store::{DynamoRunStore, n, s, sdk_failure, unavailable};

const LIVE_RUNS_SK: &str = "LIVE_RUNS";

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
        self.counter_move(
            &counter_pk(tenant_id),
            LIVE_RUNS_SK,
            "liveRuns",
            delta,
            limit.filter(|_| delta > 0),
        )
        .map(Some)
    }

    /// `attribute` of item (`pk`, `sk`) moved by `by` with `ADD`; with a
    /// cap, conditional on it being under the cap (an item not written yet
    /// counts as 0). The one counter move of the store: the live runs, the
    /// open streams, a tenant's schedules.
    pub(crate) fn counter_move(
        &self,
        pk: &str,
        sk: &str,
        attribute: &str,
        by: i64,
        cap: Option<u64>,
    ) -> Result<TransactWriteItem, StoreError> {
        let mut update = Update::builder()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression("ADD #counter :by")
            .expression_attribute_names("#counter", attribute)
            .expression_attribute_values(":by", AttributeValue::N(by.to_string()));
        if let Some(cap) = cap {
            update = update
                .condition_expression("attribute_not_exists(#counter) OR #counter < :cap")
                .expression_attribute_values(":cap", n(cap));
        }
        Ok(TransactWriteItem::builder()
            .update(update.build().map_err(unavailable)?)
            .build())
    }

    /// `attribute` of item (`pk`, `sk`), read consistently (0 when the item
    /// or the attribute is not there, or below 0).
    pub(crate) async fn counter_value(
        &self,
        pk: &str,
        sk: &str,
        attribute: &str,
    ) -> Result<u64, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_failure)?;
        let value = output
            .item
            .as_ref()
            .and_then(|item| item.get(attribute))
            .and_then(|value| value.as_n().ok())
            .and_then(|text| text.parse::<i64>().ok())
            .unwrap_or(0);
        Ok(u64::try_from(value).unwrap_or(0))
    }

    /// The tenant's runs at work (a consistent read of its counter).
    pub(crate) async fn read_live_runs(&self, tenant_id: &str) -> Result<u64, StoreError> {
        self.counter_value(&counter_pk(tenant_id), LIVE_RUNS_SK, "liveRuns")
            .await
    }
}
