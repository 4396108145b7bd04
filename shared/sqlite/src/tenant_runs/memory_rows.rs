//! A tenant's memory on the SQLite file (`memory_items`): one row per
//! item, keyed by (tenant, namespace, key) with the namespace's parts
//! joined by U+001F, so the namespaces under a prefix are one key range;
//! the writer person and the expiry are columns of their own (indexed) for
//! a person's deletion and retention. A put that may add a key counts the
//! namespace in the same transaction.

use async_trait::async_trait;
use baton_core::basics::instant::Instant;
use baton_memory::item::{MemoryItem, PART_SEPARATOR, namespace_key};
use baton_runtime::error::StoreError;
use baton_runtime::ports::{MemoryPut, MemoryStore};
use rusqlite::{OptionalExtension, params};

use crate::rows::{as_i64, from_json, to_json};
use crate::{SqliteStore, unavailable};

/// The key range of the namespaces strictly under `prefix`: from
/// `prefix` + U+001F to `prefix` + U+0020.
fn below(prefix: &str) -> (String, String) {
    (
        format!("{prefix}{PART_SEPARATOR}"),
        format!("{prefix}\u{20}"),
    )
}

fn expiry_millis(item: &MemoryItem) -> Option<i64> {
    item.expires_at
        .as_deref()
        .and_then(Instant::parse_rfc3339)
        .map(|at| as_i64(at.unix_millis()))
}

fn items_of(rows: Vec<String>) -> Result<Vec<MemoryItem>, StoreError> {
    rows.iter().map(|text| from_json(text)).collect()
}

#[async_trait]
impl MemoryStore for SqliteStore {
    async fn put_memory(
        &self,
        tenant_id: &str,
        item: &MemoryItem,
        namespace_cap: usize,
    ) -> Result<MemoryPut, StoreError> {
        let (tenant_id, namespace, text) =
            (tenant_id.to_string(), item.namespace_key(), to_json(item)?);
        let (key, person, expires) = (
            item.key.clone(),
            item.provenance.person.clone(),
            expiry_millis(item),
        );
        self.with_connection(move |connection| {
            let transaction = crate::rows::begin(connection)?;
            let exists: Option<i64> = transaction
                .query_row(
                    "SELECT 1 FROM memory_items WHERE tenant_id = ?1 AND namespace = ?2 AND item_key = ?3",
                    params![tenant_id, namespace, key],
                    |row| row.get(0),
                )
                .optional()
                .map_err(unavailable)?;
            if exists.is_none() {
                let held: i64 = transaction
                    .query_row(
                        "SELECT COUNT(*) FROM memory_items WHERE tenant_id = ?1 AND namespace = ?2",
                        params![tenant_id, namespace],
                        |row| row.get(0),
                    )
                    .map_err(unavailable)?;
                if usize::try_from(held).unwrap_or(usize::MAX) >= namespace_cap {
                    return Ok(MemoryPut::NamespaceFull { cap: namespace_cap });
                }
            }
            transaction
                .execute(
                    "INSERT OR REPLACE INTO memory_items \
                     (tenant_id, namespace, item_key, person, expires_at_millis, item) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![tenant_id, namespace, key, person, expires, text],
                )
                .map_err(unavailable)?;
            transaction.commit().map_err(unavailable)?;
            Ok(MemoryPut::Kept)
        })
        .await
    }

    async fn get_memory(
        &self,
        tenant_id: &str,
        namespace: &[String],
        key: &str,
    ) -> Result<Option<MemoryItem>, StoreError> {
        let (tenant_id, namespace, key) = (
            tenant_id.to_string(),
            namespace_key(namespace),
            key.to_string(),
        );
        let text: Option<String> = self
            .with_reader(move |connection| {
                connection
                    .query_row(
                        "SELECT item FROM memory_items WHERE tenant_id = ?1 AND namespace = ?2 AND item_key = ?3",
                        params![tenant_id, namespace, key],
                        |row| row.get(0),
                    )
                    .optional()
                    .map_err(unavailable)
            })
            .await?;
        text.map(|text| from_json(&text)).transpose()
    }

    async fn delete_memory(
        &self,
        tenant_id: &str,
        namespace: &[String],
        key: &str,
    ) -> Result<bool, StoreError> {
        let (tenant_id, namespace, key) = (
            tenant_id.to_string(),
            namespace_key(namespace),
            key.to_string(),
        );
        self.with_connection(move |connection| {
            connection
                .execute(
                    "DELETE FROM memory_items WHERE tenant_id = ?1 AND namespace = ?2 AND item_key = ?3",
                    params![tenant_id, namespace, key],
                )
                .map(|deleted| deleted > 0)
                .map_err(unavailable)
        })
        .await
    }

    async fn list_memory(
        &self,
        tenant_id: &str,
        prefix: &[String],
        limit: usize,
    ) -> Result<Vec<MemoryItem>, StoreError> {
        let (tenant_id, prefix) = (tenant_id.to_string(), namespace_key(prefix));
        let rows = self
            .with_reader(move |connection| {
                let (from, to) = below(&prefix);
                let mut statement = connection
                    .prepare(
                        "SELECT item FROM memory_items WHERE tenant_id = ?1 \
                         AND (?2 = '' OR namespace = ?2 OR (namespace >= ?3 AND namespace < ?4)) \
                         ORDER BY namespace, item_key LIMIT ?5",
                    )
                    .map_err(unavailable)?;
                statement
                    .query_map(
                        params![tenant_id, prefix, from, to, as_i64(limit as u64)],
                        |row| row.get::<_, String>(0),
                    )
                    .map_err(unavailable)?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(unavailable)
            })
            .await?;
        items_of(rows)
    }

    async fn namespace_memory(
        &self,
        tenant_id: &str,
        namespace: &[String],
        cap: usize,
    ) -> Result<Vec<MemoryItem>, StoreError> {
        let (tenant_id, namespace) = (tenant_id.to_string(), namespace_key(namespace));
        let rows = self
            .with_reader(move |connection| {
                let mut statement = connection
                    .prepare(
                        "SELECT item FROM memory_items WHERE tenant_id = ?1 AND namespace = ?2 \
                         ORDER BY item_key LIMIT ?3",
                    )
                    .map_err(unavailable)?;
                statement
                    .query_map(params![tenant_id, namespace, as_i64(cap as u64)], |row| {
                        row.get::<_, String>(0)
                    })
                    .map_err(unavailable)?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(unavailable)
            })
            .await?;
        items_of(rows)
    }

    async fn delete_memory_under(
        &self,
        tenant_id: &str,
        prefix: &[String],
    ) -> Result<usize, StoreError> {
        let (tenant_id, prefix) = (tenant_id.to_string(), namespace_key(prefix));
        self.with_connection(move |connection| {
            let (from, to) = below(&prefix);
            connection
                .execute(
                    "DELETE FROM memory_items WHERE tenant_id = ?1 \
                     AND (?2 = '' OR namespace = ?2 OR (namespace >= ?3 AND namespace < ?4))",
                    params![tenant_id, prefix, from, to],
                )
                .map_err(unavailable)
        })
        .await
    }

    async fn delete_memory_of_person(
        &self,
        tenant_id: &str,
        person: &str,
    ) -> Result<usize, StoreError> {
        let (tenant_id, person) = (tenant_id.to_string(), person.to_string());
        self.with_connection(move |connection| {
            connection
                .execute(
                    "DELETE FROM memory_items WHERE tenant_id = ?1 AND person = ?2",
                    params![tenant_id, person],
                )
                .map_err(unavailable)
        })
        .await
    }

    async fn remove_expired_memory(
        &self,
        now_rfc3339: &str,
        limit: usize,
    ) -> Result<usize, StoreError> {
        let Some(now) = Instant::parse_rfc3339(now_rfc3339) else {
            return Ok(0);
        };
        let now = as_i64(now.unix_millis());
        self.with_connection(move |connection| {
            connection
                .execute(
                    "DELETE FROM memory_items WHERE rowid IN (SELECT rowid FROM memory_items \
                     WHERE expires_at_millis IS NOT NULL AND expires_at_millis <= ?1 LIMIT ?2)",
                    params![now, as_i64(limit as u64)],
                )
                .map_err(unavailable)
        })
        .await
    }
}
