//! What spans a tenant's runs, kept so that its cost does not grow with
//! the tenant's history: the runs list (by creation, or by status through
//! its index), the live-run counter the commits keep, and the deletion of
//! ended runs past their retention, in bounded batches.

mod expired_runs;
mod live_run_counter;
mod run_list_query;

pub(crate) use live_run_counter::{count_live_run_change, live_runs_of};
