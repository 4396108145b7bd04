//! The DynamoDB adapters, on one table (the key schema is in the crate's
//! docs): the run store's struct and layout (`store`), the `RunStore`
//! (`run_store`) built from its parts (the event log, leases and open items,
//! the outbox, run entries, the runs list (by status too), the
//! live-run counter, retention's expiry stamps, large items split into parts,
//! the state codec), the capability directory and the thread store (chat
//! exchanges, lanes and summaries), the evaluations `baton serve` runs
//! (`evaluation_items`, feature `evaluations`), and the table's creation
//! for local stacks and tests (`table_setup`).

mod attributes;
mod audit_items;
pub mod capability_directory;
#[cfg(feature = "evaluations")]
mod evaluation_items;
mod event_log;
mod keys;
pub mod large_items;
mod lease_items;
mod live_counter_items;
mod memory_items;
mod open_items;
mod outbox_items;
mod plan_items;
mod request_key_items;
mod retention_stamps;
mod run_creation;
mod run_entries;
mod run_listing;
mod run_store;
mod schedule_items;
pub mod state_codec;
mod store;
mod stream_lease_items;
mod table_setup;
mod thread_pages;
mod thread_summaries;
mod threads;

pub use self::store::{DynamoRunStore, PENDING_OUTBOX_INDEX};
