//! The runs list on the SQLite file: one indexed query per page, newest
//! first by `(created_at_millis, run_id)` (the listing's ordering key). A
//! page of one status reads `runs_by_status` (`tenant_id, status,
//! created_at_millis, run_id`) in order, so it costs the same at ten runs
//! and at a hundred thousand; a page of every status reads
//! `runs_by_creation`.

use baton_core::state::listing::{RunListPage, RunListQuery, RunListing};
use baton_runtime::error::StoreError;
use rusqlite::params;

use crate::{SqliteStore, unavailable};

/// A page of one status (or of a fork source's forks): each filter is a
/// separate statement, so the planner picks the index that matches it (an
/// `?2 IS NULL OR status = ?2` filter would read every run of the tenant).
const BY_STATUS: &str = "SELECT state FROM runs WHERE tenant_id = ?1 AND status = ?2
       AND (?6 IS NULL OR forked_from = ?6)
       AND (?3 IS NULL OR created_at_millis < ?3
            OR (created_at_millis = ?3 AND run_id < ?4))
     ORDER BY created_at_millis DESC, run_id DESC LIMIT ?5";

const EVERY_STATUS: &str = "SELECT state FROM runs WHERE tenant_id = ?1 AND ?2 IS NULL
       AND (?6 IS NULL OR forked_from = ?6)
       AND (?3 IS NULL OR created_at_millis < ?3
            OR (created_at_millis = ?3 AND run_id < ?4))
     ORDER BY created_at_millis DESC, run_id DESC LIMIT ?5";

impl SqliteStore {
    pub(crate) async fn query_run_page(
        &self,
        tenant_id: &str,
        query: &RunListQuery,
    ) -> Result<RunListPage, StoreError> {
        let tenant_id = tenant_id.to_string();
        let status = query.status.map(|status| status.as_str().to_string());
        let (before_millis, before_run) = match &query.cursor {
            Some(cursor) => (
                Some(i64::try_from(cursor.created_millis).unwrap_or(i64::MAX)),
                Some(cursor.run_id.clone()),
            ),
            None => (None, None),
        };
        let fetch = i64::try_from(query.limit + 1).unwrap_or(i64::MAX);
        let forked_from = query.forked_from.clone();
        let states: Vec<crate::state_column::StoredState> = self
            .with_reader(move |connection| {
                let sql = if status.is_some() {
                    BY_STATUS
                } else {
                    EVERY_STATUS
                };
                let mut statement = connection.prepare_cached(sql).map_err(unavailable)?;
                let rows = statement
                    .query_map(
                        params![
                            tenant_id,
                            status,
                            before_millis,
                            before_run,
                            fetch,
                            forked_from
                        ],
                        |row| row.get(0),
                    )
                    .map_err(unavailable)?;
                rows.collect::<Result<Vec<_>, _>>().map_err(unavailable)
            })
            .await?;
        let listed = states
            .iter()
            .map(|state| state.parse().map(|state| RunListing::of(&state)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(RunListPage::from_newest_first(listed, query.limit))
    }
}
