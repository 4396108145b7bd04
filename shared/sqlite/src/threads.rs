//! Chat threads on the SQLite file: one row per exchange, keyed by the run
//! that answered it, so recording an exchange again replaces it.

use async_trait::async_trait;
use baton_core::basics::ids::ThreadKey;
use baton_core::records::chat::ChatExchange;
use baton_core::records::thread_lane::ThreadLane;
use baton_core::records::thread_listing::{
    ThreadListPage, ThreadListQuery, ThreadListing, listed_message,
};
use baton_runtime::error::StoreError;
use baton_runtime::ports::ThreadStore;
use rusqlite::{OptionalExtension, params};

use crate::SqliteStore;
use crate::rows::{from_json, texts, to_json};

#[async_trait]
impl ThreadStore for SqliteStore {
    async fn thread_exchanges(
        &self,
        key: ThreadKey<'_>,
    ) -> Result<Option<Vec<ChatExchange>>, StoreError> {
        let (tenant_id, thread_id) = (key.tenant_id(), key.thread_id());
        let (tenant_id, thread_id) = (tenant_id.to_string(), thread_id.to_string());
        let rows: Vec<String> = self
            .with_reader(move |connection| {
                texts(
                    connection,
                    "SELECT exchange FROM threads WHERE tenant_id = ?1 AND thread_id = ?2 \
                     ORDER BY at_millis, run_id",
                    params![tenant_id, thread_id],
                )
            })
            .await?;
        if rows.is_empty() {
            return Ok(None);
        }
        rows.iter()
            .map(|row| from_json(row))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    async fn thread_exchanges_before(
        &self,
        key: ThreadKey<'_>,
        before: Option<&(u64, String)>,
        limit: usize,
    ) -> Result<Option<baton_runtime::ports::ThreadPage>, StoreError> {
        let (tenant_id, thread_id) = (key.tenant_id().to_string(), key.thread_id().to_string());
        let (before_at, before_run) = match before {
            Some((at, run)) => (i64::try_from(*at).unwrap_or(i64::MAX), run.clone()),
            None => (i64::MAX, String::new()),
        };
        let bounded = before.is_some();
        let fetch = i64::try_from(limit + 1).unwrap_or(i64::MAX);
        let (rows, exists): (Vec<String>, bool) = self
            .with_reader(move |connection| {
                // The newest first, from the `(tenant_id, thread_id, run_id)`
                // rows ordered by time: a page reads `limit + 1` rows.
                let rows = texts(
                    connection,
                    "SELECT exchange FROM threads WHERE tenant_id = ?1 AND thread_id = ?2 \
                     AND (?5 = 0 OR at_millis < ?3 OR (at_millis = ?3 AND run_id < ?4)) \
                     ORDER BY at_millis DESC, run_id DESC LIMIT ?6",
                    params![tenant_id, thread_id, before_at, before_run, bounded, fetch],
                )?;
                let exists = !rows.is_empty()
                    || connection
                        .query_row(
                            "SELECT 1 FROM threads WHERE tenant_id = ?1 AND thread_id = ?2 LIMIT 1",
                            params![tenant_id, thread_id],
                            |_| Ok(()),
                        )
                        .optional()
                        .map_err(crate::unavailable)?
                        .is_some();
                Ok((rows, exists))
            })
            .await?;
        if !exists {
            return Ok(None);
        }
        let older = rows.len() > limit;
        let mut exchanges = rows
            .iter()
            .take(limit)
            .map(|row| from_json(row))
            .collect::<Result<Vec<ChatExchange>, _>>()?;
        exchanges.reverse();
        Ok(Some(baton_runtime::ports::ThreadPage { exchanges, older }))
    }

    async fn record_exchange(
        &self,
        key: ThreadKey<'_>,
        exchange: &ChatExchange,
    ) -> Result<(), StoreError> {
        let (tenant_id, thread_id) = (key.tenant_id(), key.thread_id());
        let (tenant_id, thread_id) = (tenant_id.to_string(), thread_id.to_string());
        let record = to_json(exchange)?;
        let (run_id, at_millis) = (
            exchange.run_id.clone(),
            i64::try_from(exchange.at_millis).unwrap_or(i64::MAX),
        );
        self.with_connection(move |connection| {
            connection
                .execute(
                    "INSERT OR REPLACE INTO threads (tenant_id, thread_id, run_id, at_millis, exchange) \
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![tenant_id, thread_id, run_id, at_millis, record],
                )
                .map_err(crate::unavailable)?;
            Ok(())
        })
        .await
    }

    async fn list_threads(
        &self,
        tenant_id: &str,
        query: &ThreadListQuery,
    ) -> Result<ThreadListPage, StoreError> {
        let tenant_id = tenant_id.to_string();
        // Past every key: `9` sorts after each digit of a 13-digit time.
        let before = query.cursor.clone().unwrap_or_else(|| "9".repeat(14));
        let limit = i64::try_from(query.limit + 1).unwrap_or(i64::MAX);
        let listings = self
            .with_reader(move |connection| {
                let mut threads = connection
                    .prepare_cached(
                        "SELECT thread_id, MIN(at_millis), MAX(at_millis) FROM threads \
                         WHERE tenant_id = ?1 GROUP BY thread_id \
                         HAVING printf('%013d.%s', MAX(at_millis), thread_id) < ?2 \
                         ORDER BY MAX(at_millis) DESC, thread_id DESC LIMIT ?3",
                    )
                    .map_err(crate::unavailable)?;
                let found = threads
                    .query_map(params![tenant_id, before, limit], |row| {
                        Ok((
                            row.get::<_, String>(0)?,
                            row.get::<_, i64>(1)?,
                            row.get::<_, i64>(2)?,
                        ))
                    })
                    .map_err(crate::unavailable)?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(crate::unavailable)?;
                let message = |thread_id: &str, order: &str| -> Result<String, StoreError> {
                    let sql = format!(
                        "SELECT json_extract(exchange, '$.user') FROM threads \
                         WHERE tenant_id = ?1 AND thread_id = ?2 \
                         ORDER BY at_millis {order}, run_id {order} LIMIT 1"
                    );
                    Ok(texts(connection, &sql, params![tenant_id, thread_id])?
                        .pop()
                        .unwrap_or_default())
                };
                found
                    .into_iter()
                    .map(|(thread_id, started, last)| {
                        Ok(ThreadListing {
                            first_message: listed_message(&message(&thread_id, "ASC")?),
                            last_message: listed_message(&message(&thread_id, "DESC")?),
                            started_at_millis: u64::try_from(started).unwrap_or(0),
                            last_at_millis: u64::try_from(last).unwrap_or(0),
                            thread_id,
                        })
                    })
                    .collect::<Result<Vec<_>, StoreError>>()
            })
            .await?;
        Ok(ThreadListPage::newest_first(listings, query.limit))
    }

    async fn thread_lane(&self, key: ThreadKey<'_>) -> Result<(ThreadLane, u64), StoreError> {
        let (tenant_id, thread_id) = (key.tenant_id(), key.thread_id());
        let (tenant_id, thread_id) = (tenant_id.to_string(), thread_id.to_string());
        let row: Option<(String, i64)> = self
            .with_reader(move |connection| {
                connection
                    .prepare_cached(
                        "SELECT lane, version FROM thread_lanes WHERE tenant_id = ?1 AND thread_id = ?2",
                    )
                    .map_err(crate::unavailable)?
                    .query_row(params![tenant_id, thread_id], |row| {
                        Ok((row.get(0)?, row.get(1)?))
                    })
                    .optional()
                    .map_err(crate::unavailable)
            })
            .await?;
        match row {
            None => Ok((ThreadLane::default(), 0)),
            Some((lane, version)) => Ok((from_json(&lane)?, u64::try_from(version).unwrap_or(0))),
        }
    }

    async fn put_thread_lane(
        &self,
        key: ThreadKey<'_>,
        lane: &ThreadLane,
        expected_version: u64,
    ) -> Result<bool, StoreError> {
        let (tenant_id, thread_id) = (key.tenant_id(), key.thread_id());
        let (tenant_id, thread_id) = (tenant_id.to_string(), thread_id.to_string());
        let record = to_json(lane)?;
        let expected = i64::try_from(expected_version).unwrap_or(i64::MAX);
        self.with_connection(move |connection| {
            // One statement either way, so two processes on the file cannot
            // both find the version they expect.
            let changed = if expected == 0 {
                connection
                    .prepare_cached(
                        "INSERT OR IGNORE INTO thread_lanes (tenant_id, thread_id, lane, version) \
                         VALUES (?1, ?2, ?3, 1)",
                    )
                    .map_err(crate::unavailable)?
                    .execute(params![tenant_id, thread_id, record])
            } else {
                connection
                    .prepare_cached(
                        "UPDATE thread_lanes SET lane = ?3, version = version + 1 \
                         WHERE tenant_id = ?1 AND thread_id = ?2 AND version = ?4",
                    )
                    .map_err(crate::unavailable)?
                    .execute(params![tenant_id, thread_id, record, expected])
            }
            .map_err(crate::unavailable)?;
            Ok(changed == 1)
        })
        .await
    }
}
