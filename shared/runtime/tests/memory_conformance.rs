//! The in-memory adapters (the embedded default) pass the same conformance
//! suites as every other store adapter: the run store, the capability
//! directory (bare and behind the read-through cache) and the thread store.

use std::sync::Arc;
use std::time::Duration;

use baton_runtime::memory::{InMemoryCapabilityDirectory, InMemoryRunStore, InMemoryThreadStore};
use baton_runtime::services::capability_cache::CachingCapabilityDirectory;
use baton_test_support::conformance::{
    capability_directory_conformance, run_store_conformance, thread_store_conformance,
};

#[tokio::test]
async fn the_in_memory_store_passes_the_conformance_suite() {
    let outcome = run_store_conformance(Arc::new(InMemoryRunStore::new()), "memory").await;
    assert_eq!(outcome, Ok(()));
}

#[tokio::test]
async fn the_in_memory_capability_directory_passes_the_conformance_suite() {
    let outcome =
        capability_directory_conformance(Arc::new(InMemoryCapabilityDirectory::new()), "memory")
            .await;
    assert_eq!(outcome, Ok(()));
}

#[tokio::test]
async fn the_capability_cache_passes_the_conformance_suite() {
    let cached = CachingCapabilityDirectory::new(
        Arc::new(InMemoryCapabilityDirectory::new()),
        Duration::from_secs(60),
    );
    let outcome = capability_directory_conformance(Arc::new(cached), "cached").await;
    assert_eq!(outcome, Ok(()));
}

#[tokio::test]
async fn the_in_memory_thread_store_passes_the_conformance_suite() {
    let outcome = thread_store_conformance(Arc::new(InMemoryThreadStore::new()), "memory").await;
    assert_eq!(outcome, Ok(()));
}
