//! A server's evaluations on the SQLite file (feature `evaluations`):
//! `evaluations` holds each one's record, the request it was started with
//! and its results lines; `evaluation_transcripts` its judge panels'
//! outputs, one row per example. Every write is one statement (whole or
//! not at all); a deletion takes the evaluation's rows in one transaction.
//! They live and go with the file, under the tenant's retention as runs
//! do (`DatasetEvaluations` prunes ended ones past it).

use std::sync::Arc;

use async_trait::async_trait;
use baton_evaluation::served::EvaluationRecord;
use baton_runtime::error::StoreError;
use baton_runtime::ports::evaluation_ports::{EvaluationRecords, TranscriptShelf};
use rusqlite::{OptionalExtension, params};

use crate::rows::{from_json, texts, to_json};
use crate::{SqliteStore, unavailable};

/// Reads one nullable text column of an evaluation's row.
async fn evaluation_text(
    store: &SqliteStore,
    column: &'static str,
    tenant_id: &str,
    evaluation_id: &str,
) -> Result<Option<String>, StoreError> {
    let (tenant_id, evaluation_id) = (tenant_id.to_string(), evaluation_id.to_string());
    store
        .with_reader(move |connection| {
            let text: Option<Option<String>> = connection
                .query_row(
                    &format!(
                        "SELECT {column} FROM evaluations WHERE tenant_id = ?1 AND evaluation_id = ?2"
                    ),
                    params![tenant_id, evaluation_id],
                    |row| row.get(0),
                )
                .optional()
                .map_err(unavailable)?;
            Ok(text.flatten())
        })
        .await
}

/// Writes one text column of an evaluation's row, making the row if need be.
async fn put_evaluation_text(
    store: &SqliteStore,
    column: &'static str,
    tenant_id: &str,
    evaluation_id: &str,
    text: String,
) -> Result<(), StoreError> {
    let (tenant_id, evaluation_id) = (tenant_id.to_string(), evaluation_id.to_string());
    store
        .with_connection(move |connection| {
            connection
                .execute(
                    &format!(
                        "INSERT INTO evaluations (tenant_id, evaluation_id, {column}) VALUES (?1, ?2, ?3) \
                         ON CONFLICT (tenant_id, evaluation_id) DO UPDATE SET {column} = excluded.{column}"
                    ),
                    params![tenant_id, evaluation_id, text],
                )
                .map_err(unavailable)?;
            Ok(())
        })
        .await
}

#[async_trait]
impl EvaluationRecords for SqliteStore {
    async fn put_record(
        &self,
        tenant_id: &str,
        record: &EvaluationRecord,
    ) -> Result<(), StoreError> {
        let text = to_json(record)?;
        put_evaluation_text(self, "record", tenant_id, &record.evaluation_id, text).await
    }

    async fn get_record(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
    ) -> Result<Option<EvaluationRecord>, StoreError> {
        evaluation_text(self, "record", tenant_id, evaluation_id)
            .await?
            .map(|text| from_json(&text))
            .transpose()
    }

    async fn list_records(&self, tenant_id: &str) -> Result<Vec<EvaluationRecord>, StoreError> {
        let tenant_id = tenant_id.to_string();
        let rows = self
            .with_reader(move |connection| {
                texts(
                    connection,
                    "SELECT record FROM evaluations WHERE tenant_id = ?1 AND record IS NOT NULL",
                    params![tenant_id],
                )
            })
            .await?;
        rows.iter().map(|text| from_json(text)).collect()
    }

    async fn tenants(&self) -> Result<Vec<String>, StoreError> {
        self.with_reader(|connection| {
            texts(
                connection,
                "SELECT DISTINCT tenant_id FROM evaluations WHERE record IS NOT NULL",
                [],
            )
        })
        .await
    }

    async fn put_request(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
        request_text: &str,
    ) -> Result<(), StoreError> {
        put_evaluation_text(
            self,
            "request",
            tenant_id,
            evaluation_id,
            request_text.to_string(),
        )
        .await
    }

    async fn get_request(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
    ) -> Result<Option<String>, StoreError> {
        evaluation_text(self, "request", tenant_id, evaluation_id).await
    }

    async fn put_results(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
        results_text: &str,
    ) -> Result<(), StoreError> {
        put_evaluation_text(
            self,
            "results",
            tenant_id,
            evaluation_id,
            results_text.to_string(),
        )
        .await
    }

    fn transcript_shelf(&self, tenant_id: &str, evaluation_id: &str) -> Arc<dyn TranscriptShelf> {
        Arc::new(TranscriptRows {
            store: self.clone(),
            tenant_id: tenant_id.to_string(),
            evaluation_id: evaluation_id.to_string(),
        })
    }

    async fn delete_evaluation(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
    ) -> Result<(), StoreError> {
        let (tenant_id, evaluation_id) = (tenant_id.to_string(), evaluation_id.to_string());
        self.with_connection(move |connection| {
            let transaction = crate::rows::begin(connection)?;
            for table in ["evaluation_transcripts", "evaluations"] {
                transaction
                    .execute(
                        &format!("DELETE FROM {table} WHERE tenant_id = ?1 AND evaluation_id = ?2"),
                        params![tenant_id, evaluation_id],
                    )
                    .map_err(unavailable)?;
            }
            transaction.commit().map_err(unavailable)
        })
        .await
    }
}

/// One evaluation's judge panel outputs, as rows keyed by example id (so
/// two ids never share one).
struct TranscriptRows {
    store: SqliteStore,
    tenant_id: String,
    evaluation_id: String,
}

#[async_trait]
impl TranscriptShelf for TranscriptRows {
    async fn keep(&self, example_id: &str, panel_output: &str) -> Result<String, StoreError> {
        let (tenant_id, evaluation_id, example, output) = (
            self.tenant_id.clone(),
            self.evaluation_id.clone(),
            example_id.to_string(),
            panel_output.to_string(),
        );
        self.store
            .with_connection(move |connection| {
                connection
                    .execute(
                        "INSERT OR REPLACE INTO evaluation_transcripts \
                         (tenant_id, evaluation_id, example_id, panel_output) VALUES (?1, ?2, ?3, ?4)",
                        params![tenant_id, evaluation_id, example, output],
                    )
                    .map_err(unavailable)?;
                Ok(())
            })
            .await?;
        // Named by the store, never by a path on the server.
        Ok(format!("{}.transcripts/{example_id}", self.evaluation_id))
    }
}
