//! The thread store's port: chat threads' exchanges (read whole, or by
//! page from the newest end) and lanes.

use async_trait::async_trait;
use baton_core::basics::ids::ThreadKey;

use crate::error::StoreError;

/// A page of a thread read from its newest end
/// ([`ThreadStore::thread_exchanges_before`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadPage {
    /// Oldest first.
    pub exchanges: Vec<baton_core::records::chat::ChatExchange>,
    /// Older exchanges remain before the first.
    pub older: bool,
}

/// The conversation threads of chat mode: each exchange (a message and its
/// answer) recorded under its thread, keyed by the run that answered it.
#[async_trait]
pub trait ThreadStore: Send + Sync {
    /// The thread's exchanges, oldest first; `None` when the tenant has no
    /// such thread (a thread exists once it has an exchange).
    async fn thread_exchanges(
        &self,
        key: ThreadKey<'_>,
    ) -> Result<Option<Vec<baton_core::records::chat::ChatExchange>>, StoreError>;

    /// One page of the thread, read from its newest end: the newest
    /// `limit` exchanges older than `before` (`(atMillis, runId)`; `None`:
    /// from the newest), oldest first, and whether older ones remain;
    /// `None` when the tenant has no such thread. A chat turn reads its
    /// history this way, so its cost does not grow with the thread. The
    /// default reads the whole thread and slices it (a store without an
    /// order by time: DynamoDB's exchanges are keyed by run).
    async fn thread_exchanges_before(
        &self,
        key: ThreadKey<'_>,
        before: Option<&(u64, String)>,
        limit: usize,
    ) -> Result<Option<ThreadPage>, StoreError> {
        let Some(mut exchanges) = self.thread_exchanges(key).await? else {
            return Ok(None);
        };
        if let Some(before) = before {
            exchanges
                .retain(|exchange| (exchange.at_millis, &exchange.run_id) < (before.0, &before.1));
        }
        let older = exchanges.len() > limit;
        let newest = exchanges.split_off(exchanges.len().saturating_sub(limit));
        Ok(Some(ThreadPage {
            exchanges: newest,
            older,
        }))
    }

    /// Records `exchange` in the thread. Recording the same run's exchange
    /// again changes nothing (a retried step records it again).
    async fn record_exchange(
        &self,
        key: ThreadKey<'_>,
        exchange: &baton_core::records::chat::ChatExchange,
    ) -> Result<(), StoreError>;

    /// One page of the tenant's threads, the most recently answered first
    /// (`baton_core::records::thread_listing`).
    async fn list_threads(
        &self,
        tenant_id: &str,
        query: &baton_core::records::thread_listing::ThreadListQuery,
    ) -> Result<baton_core::records::thread_listing::ThreadListPage, StoreError>;

    /// The thread's lane (`baton_core::records::thread_lane`) and its version; an
    /// empty lane at version 0 when none is stored.
    async fn thread_lane(
        &self,
        key: ThreadKey<'_>,
    ) -> Result<(baton_core::records::thread_lane::ThreadLane, u64), StoreError>;

    /// Writes `lane` at `expected_version + 1` if the stored lane is still
    /// at `expected_version` (0: none stored). `false` when another writer
    /// moved it first: nothing was written.
    async fn put_thread_lane(
        &self,
        key: ThreadKey<'_>,
        lane: &baton_core::records::thread_lane::ThreadLane,
        expected_version: u64,
    ) -> Result<bool, StoreError>;
}
