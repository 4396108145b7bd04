//! What spans a tenant's runs, kept so that its cost does not grow with
//! the tenant's history: the runs list (by creation, or by status through
//! its index), the live-run counter the commits keep, the deletion of
//! ended runs past their retention, in bounded batches, and the leases of
//! open event streams (the per-run and per-tenant stream caps), the
//! tenant's schedules, its audit trail (append-only), its memory across
//! runs, and (feature `evaluations`) the evaluations a server runs.

mod audit_rows;
#[cfg(feature = "evaluations")]
mod evaluation_rows;
mod expired_runs;
mod live_run_counter;
mod memory_rows;
mod request_key_rows;
mod run_list_query;
mod schedule_rows;
mod stream_lease_rows;

pub(crate) use live_run_counter::{count_live_run_change, live_runs_of};
