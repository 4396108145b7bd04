//! The in-memory thread store (the embedded default): threads live as long
//! as the process.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use baton_core::basics::ids::ThreadKey;
use baton_core::records::chat::ChatExchange;
use baton_core::records::thread_lane::ThreadLane;
use baton_core::records::thread_listing::{ThreadListPage, ThreadListQuery, ThreadListing};

use crate::error::StoreError;
use crate::ports::ThreadStore;

/// One thread's exchanges by (time, run).
type Thread = BTreeMap<(u64, String), ChatExchange>;

/// Threads by (tenant, thread id).
#[derive(Default)]
pub struct InMemoryThreadStore {
    threads: Mutex<BTreeMap<(String, String), Thread>>,
    /// Each thread's lane and its version.
    lanes: Mutex<BTreeMap<(String, String), (ThreadLane, u64)>>,
}

impl InMemoryThreadStore {
    pub fn new() -> Self {
        Self::default()
    }
}

fn poisoned() -> StoreError {
    StoreError::Unavailable("the in-memory thread store is poisoned".into())
}

#[async_trait]
impl ThreadStore for InMemoryThreadStore {
    async fn thread_exchanges(
        &self,
        key: ThreadKey<'_>,
    ) -> Result<Option<Vec<ChatExchange>>, StoreError> {
        let (tenant_id, thread_id) = (key.tenant_id(), key.thread_id());
        let threads = self.threads.lock().map_err(|_| poisoned())?;
        Ok(threads
            .get(&(tenant_id.to_string(), thread_id.to_string()))
            .map(|exchanges| exchanges.values().cloned().collect()))
    }

    async fn thread_exchanges_before(
        &self,
        key: ThreadKey<'_>,
        before: Option<&(u64, String)>,
        limit: usize,
    ) -> Result<Option<crate::ports::ThreadPage>, StoreError> {
        let (tenant_id, thread_id) = (key.tenant_id(), key.thread_id());
        let threads = self.threads.lock().map_err(|_| poisoned())?;
        let Some(thread) = threads.get(&(tenant_id.to_string(), thread_id.to_string())) else {
            return Ok(None);
        };
        let range = match before {
            Some(before) => thread.range(..before.clone()),
            None => thread.range(..),
        };
        let mut newest: Vec<ChatExchange> = range
            .rev()
            .take(limit + 1)
            .map(|(_, exchange)| exchange.clone())
            .collect();
        let older = newest.len() > limit;
        newest.truncate(limit);
        newest.reverse();
        Ok(Some(crate::ports::ThreadPage {
            exchanges: newest,
            older,
        }))
    }

    async fn record_exchange(
        &self,
        key: ThreadKey<'_>,
        exchange: &ChatExchange,
    ) -> Result<(), StoreError> {
        let (tenant_id, thread_id) = (key.tenant_id(), key.thread_id());
        let mut threads = self.threads.lock().map_err(|_| poisoned())?;
        let thread = threads
            .entry((tenant_id.to_string(), thread_id.to_string()))
            .or_default();
        // Keyed by run: a second recording of the same run replaces itself.
        thread.retain(|(_, run_id), _| run_id != &exchange.run_id);
        thread.insert(
            (exchange.at_millis, exchange.run_id.clone()),
            exchange.clone(),
        );
        Ok(())
    }

    async fn list_threads(
        &self,
        tenant_id: &str,
        query: &ThreadListQuery,
    ) -> Result<ThreadListPage, StoreError> {
        let threads = self.threads.lock().map_err(|_| poisoned())?;
        let candidates = threads
            .iter()
            .filter(|((tenant, _), _)| tenant == tenant_id)
            .filter_map(|((_, thread_id), exchanges)| {
                let exchanges: Vec<ChatExchange> = exchanges.values().cloned().collect();
                ThreadListing::of(thread_id, &exchanges)
            })
            .filter(|listing| query.admits(listing))
            .collect();
        Ok(ThreadListPage::newest_first(candidates, query.limit))
    }

    async fn thread_lane(&self, key: ThreadKey<'_>) -> Result<(ThreadLane, u64), StoreError> {
        let (tenant_id, thread_id) = (key.tenant_id(), key.thread_id());
        let lanes = self.lanes.lock().map_err(|_| poisoned())?;
        Ok(lanes
            .get(&(tenant_id.to_string(), thread_id.to_string()))
            .cloned()
            .unwrap_or_default())
    }

    async fn put_thread_lane(
        &self,
        key: ThreadKey<'_>,
        lane: &ThreadLane,
        expected_version: u64,
    ) -> Result<bool, StoreError> {
        let (tenant_id, thread_id) = (key.tenant_id(), key.thread_id());
        let mut lanes = self.lanes.lock().map_err(|_| poisoned())?;
        let stored = lanes
            .entry((tenant_id.to_string(), thread_id.to_string()))
            .or_default();
        if stored.1 != expected_version {
            return Ok(false);
        }
        *stored = (lane.clone(), expected_version + 1);
        Ok(true)
    }
}
