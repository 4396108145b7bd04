//! A plan with two exclusive branches takes exactly one, on the in-memory
//! store (the same scenario runs on SQLite and DynamoDB in their crates'
//! tests). The model is a test double that decides the review.

use std::sync::Arc;

use baton_runtime::memory::InMemoryRunStore;

#[tokio::test(flavor = "multi_thread")]
async fn two_exclusive_branches_take_one_on_the_in_memory_store() {
    baton_test_support::conformance::two_branches_take_one(Arc::new(InMemoryRunStore::new())).await;
}
