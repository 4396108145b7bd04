//! The DynamoDB run store's struct, its table layout constants and what it
//! remembers between calls (the modules that implement its parts build on
//! this one; `run_store.rs` puts them together as the `RunStore`).

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem};
use baton_runtime::clock::SystemClock;
use baton_runtime::error::StoreError;
use baton_runtime::ports::Clock;

pub(crate) use crate::dynamodb::attributes::{
    Item, cancellation_codes, n, put, read_number, read_text, s, sdk_failure, unavailable,
};

/// The sort key of a run's item (state, version, status).
pub(crate) const RUN_SK: &str = "RUN";

/// The sparse index, overloaded: unsent outbox entries (the sweeper's view,
/// sharded by run) and runs waiting for a person (under their tenant).
pub const PENDING_OUTBOX_INDEX: &str = "gsi1";
pub(crate) const PENDING_OUTBOX_SHARDS: u32 = 8;

/// The most actions DynamoDB takes in one `TransactWriteItems`.
pub(crate) const MAX_TRANSACTION_ACTIONS: usize = 100;

/// Refuses, before anything is sent, a write that would need more actions
/// than one transaction takes: split over several transactions it would no
/// longer be all or nothing, and sent as it is DynamoDB refuses it with an
/// error that retrying cannot cure. Not retryable: the commit protocol
/// fails the run (`state_too_large`) instead of retrying for ever.
pub(crate) fn within_one_transaction(
    items: &[TransactWriteItem],
    run_id: &str,
) -> Result<(), StoreError> {
    if items.len() > MAX_TRANSACTION_ACTIONS {
        return Err(StoreError::TooLarge(format!(
            "run {run_id}: one write would take {} items (frames, outbox entries, run entries and the run), more than the {MAX_TRANSACTION_ACTIONS} one DynamoDB transaction takes",
            items.len()
        )));
    }
    Ok(())
}

/// Rounds of re-reading `nextSeq` when a concurrent append moved it.
pub(crate) const SEQUENCE_RETRY_ROUNDS: usize = 20;
/// Runs whose last event sequence this process remembers, at most.
pub(crate) const REMEMBERED_RUNS: usize = 4096;

/// `RunStore` on one DynamoDB table.
///
/// The hot path of a node step is one consistent read of the run
/// (`load_run`: one `Query` for the run item and its sequence item) and one
/// `TransactWriteItems` each for the claim (lease, `node_start`, the handled
/// outbox entry consumed), every streamed delta batch, and the commit
/// (state, events, outbox): the `nextSeq` seen by the load is remembered
/// and each write is conditional on it, so nothing is re-read unless
/// another writer moved it. Only the commit writes the (large) run item.
#[derive(Clone)]
pub struct DynamoRunStore {
    pub(crate) client: Client,
    pub(crate) table: String,
    /// Stamps outbox entries and event expiry (the orchestrator's clock).
    pub(crate) clock: Arc<dyn Clock>,
    /// Bounded (S3-FIFO eviction, `quick_cache`): a forgotten run costs one re-read.
    pub(crate) known_sequences: Arc<quick_cache::sync::Cache<String, KnownSequence>>,
    /// Which plan each run's plan item holds, as last read or written
    /// (`plan_items`; bounded the same way: a forgotten run's next commit
    /// writes its plan item again).
    /// A run's entry: the run version, and the plan (held weakly).
    pub(crate) known_plans: Arc<
        quick_cache::sync::Cache<
            String,
            (u64, std::sync::Weak<baton_core::planning::plan::PlanGraph>),
        >,
    >,
    /// The task and request items each run's remembered version implies.
    pub(crate) known_open_items: Arc<KnownOpenItems>,
    /// How long thread items live after they are written, by tenant (a
    /// run's own items carry the `retain_until` of the commit that ends it).
    pub(crate) retention: baton_runtime::services::RunRetention,
}

impl DynamoRunStore {
    /// The store on `table`, reached through `connection`.
    pub fn new(connection: &crate::AwsConnection, table: impl Into<String>) -> Self {
        Self::over_client(connection.dynamodb_client(), table)
    }

    pub(crate) fn over_client(client: Client, table: impl Into<String>) -> Self {
        DynamoRunStore {
            client,
            table: table.into(),
            clock: Arc::new(SystemClock),
            known_sequences: Arc::new(quick_cache::sync::Cache::new(REMEMBERED_RUNS)),
            known_plans: Arc::new(quick_cache::sync::Cache::new(REMEMBERED_RUNS)),
            known_open_items: Arc::new(quick_cache::sync::Cache::new(REMEMBERED_RUNS)),
            retention: baton_runtime::services::RunRetention::default(),
        }
    }

    /// The same store keeping thread items as long as `retention` says.
    pub fn with_retention(mut self, retention: baton_runtime::services::RunRetention) -> Self {
        self.retention = retention;
        self
    }

    /// A thread item's expiry (DynamoDB TTL, Unix seconds): the tenant's
    /// retention from now (an exchange is written when its run answers).
    pub(crate) fn thread_expires_at(&self, tenant_id: &str) -> AttributeValue {
        n(self.clock.now().unix_millis() / 1000 + self.retention.of(tenant_id).as_secs())
    }

    /// Whether an item whose `expiresAt` is `item`'s has expired by now:
    /// DynamoDB deletes expired items within days, and reads must not see
    /// them meanwhile.
    pub(crate) fn has_expired(&self, item: &Item) -> bool {
        item.get("expiresAt")
            .and_then(|value| value.as_n().ok())
            .and_then(|text| text.parse::<u64>().ok())
            .is_some_and(|seconds| seconds <= self.clock.now().unix_millis() / 1000)
    }

    /// Every item `query` finds, page after page (a page holds 1 MB at
    /// most, and a payload in parts can pass it).
    pub(crate) async fn all_pages(
        &self,
        query: aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder,
    ) -> Result<Vec<Item>, StoreError> {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let output = query
                .clone()
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(sdk_failure)?;
            items.extend(output.items.unwrap_or_default());
            match output.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(items),
            }
        }
    }

    /// The same store reading `clock` instead of the wall clock.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }
}

/// What the store last saw of a run's event log: the last sequence number
/// used and the correlation id frames carry. A hint only: every append and
/// commit is conditional on `nextSeq`, and a wrong hint costs one re-read.
#[derive(Debug, Clone)]
pub(crate) struct KnownSequence {
    pub(crate) last_sequence: u64,
    pub(crate) correlation_id: String,
    /// The last commit wrote the run's terminal frame: appends outside a
    /// commit (streamed deltas, warnings) are dropped from then on.
    pub(crate) settled: bool,
}

/// Which of `shards` partitions `key` falls in: a small multiplicative
/// hash of its bytes, the same in every process (the pending outbox and the
/// retention marks spread their items with it).
pub(crate) fn shard_of(key: &str, shards: u32) -> u32 {
    let hash = key.bytes().fold(0u32, |hash, byte| {
        hash.wrapping_mul(31).wrapping_add(u32::from(byte))
    });
    hash % shards
}

/// An expiry as DynamoDB's TTL reads it (Unix seconds).
pub(crate) fn ttl_seconds(instant: baton_core::basics::instant::Instant) -> AttributeValue {
    n(instant.unix_millis() / 1000)
}

/// `(pk, sk)` → the item's JSON body.
pub(crate) type OpenItems = BTreeMap<(String, String), String>;

/// What the store remembers of a run's items: at which version.
pub(crate) type KnownOpenItems = quick_cache::sync::Cache<String, (u64, OpenItems)>;
