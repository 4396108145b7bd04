//! A server's evaluations on DynamoDB (feature `evaluations`: `baton serve
//! --store dynamodb`), in one partition per tenant:
//!
//! ```text
//! pk = T#{tenant}#EVALS   sk = REC#{id}               record (deflated JSON)
//!                         sk = REQ#{id}               request (deflated JSON text)
//!                         sk = RES#{id}               results (deflated JSONL text)
//!                         sk = TR#{id}#{example}      panel output (deflated JSON text)
//! pk = EVALS#TENANTS      sk = {tenant}               a tenant that has records
//! ```
//!
//! Each write is one `PutItem` (whole or not at all); each value is
//! deflated, and one past an item's 400 KB is refused naming its size
//! (`StoreError::TooLarge`). A deletion removes the record last, so one
//! cut short is found again by the next prune.

use std::sync::Arc;

use async_trait::async_trait;
use baton_evaluation::served::EvaluationRecord;
use baton_runtime::error::StoreError;
use baton_runtime::ports::evaluation_ports::{EvaluationRecords, TranscriptShelf};

use super::keys::{EVALUATION_TENANTS_PK, evaluation_sk, evaluations_pk};
use crate::dynamodb::state_codec::{decode_compressed, encode_compressed};
use crate::dynamodb::store::{DynamoRunStore, Item, read_text, s, sdk_failure};

/// What each kind of item's sort key starts with.
const RECORD: &str = "REC";
const REQUEST: &str = "REQ";
const RESULTS: &str = "RES";
const TRANSCRIPT: &str = "TR";

impl DynamoRunStore {
    async fn put_evaluation_item(
        &self,
        tenant_id: &str,
        sort_key: String,
        value: &impl serde::Serialize,
        what: &str,
    ) -> Result<(), StoreError> {
        self.client
            .put_item()
            .table_name(&self.table)
            .item("pk", s(evaluations_pk(tenant_id)))
            .item("sk", s(sort_key))
            .item("body", encode_compressed(value, what)?)
            .send()
            .await
            .map_err(sdk_failure)?;
        Ok(())
    }

    async fn evaluation_item(
        &self,
        tenant_id: &str,
        sort_key: String,
    ) -> Result<Option<Item>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(evaluations_pk(tenant_id)))
            .key("sk", s(sort_key))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_failure)?;
        Ok(output.item)
    }

    async fn evaluation_items_under(
        &self,
        tenant_id: &str,
        prefix: &str,
    ) -> Result<Vec<Item>, StoreError> {
        self.all_pages(
            self.client
                .query()
                .table_name(&self.table)
                .consistent_read(true)
                .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
                .expression_attribute_values(":pk", s(evaluations_pk(tenant_id)))
                .expression_attribute_values(":prefix", s(prefix)),
        )
        .await
    }

    async fn delete_evaluation_item(&self, pk: String, sort_key: String) -> Result<(), StoreError> {
        self.client
            .delete_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(sort_key))
            .send()
            .await
            .map_err(sdk_failure)?;
        Ok(())
    }
}

#[async_trait]
impl EvaluationRecords for DynamoRunStore {
    async fn put_record(
        &self,
        tenant_id: &str,
        record: &EvaluationRecord,
    ) -> Result<(), StoreError> {
        let what = format!("evaluation {}", record.evaluation_id);
        self.put_evaluation_item(
            tenant_id,
            evaluation_sk(RECORD, &record.evaluation_id),
            record,
            &what,
        )
        .await?;
        self.client
            .put_item()
            .table_name(&self.table)
            .item("pk", s(EVALUATION_TENANTS_PK))
            .item("sk", s(tenant_id))
            .send()
            .await
            .map_err(sdk_failure)?;
        Ok(())
    }

    async fn get_record(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
    ) -> Result<Option<EvaluationRecord>, StoreError> {
        let what = format!("evaluation {evaluation_id}");
        self.evaluation_item(tenant_id, evaluation_sk(RECORD, evaluation_id))
            .await?
            .map(|item| decode_compressed(item.get("body"), &what))
            .transpose()
    }

    async fn list_records(&self, tenant_id: &str) -> Result<Vec<EvaluationRecord>, StoreError> {
        let items = self
            .evaluation_items_under(tenant_id, &evaluation_sk(RECORD, ""))
            .await?;
        items
            .iter()
            .map(|item| decode_compressed(item.get("body"), "an evaluation record"))
            .collect()
    }

    async fn tenants(&self) -> Result<Vec<String>, StoreError> {
        let items = self
            .all_pages(
                self.client
                    .query()
                    .table_name(&self.table)
                    .consistent_read(true)
                    .key_condition_expression("pk = :pk")
                    .expression_attribute_values(":pk", s(EVALUATION_TENANTS_PK)),
            )
            .await?;
        items
            .iter()
            .map(|item| read_text(item, "sk").map(str::to_string))
            .collect()
    }

    async fn put_request(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
        request_text: &str,
    ) -> Result<(), StoreError> {
        let what = format!("evaluation {evaluation_id}'s request");
        self.put_evaluation_item(
            tenant_id,
            evaluation_sk(REQUEST, evaluation_id),
            &request_text,
            &what,
        )
        .await
    }

    async fn get_request(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
    ) -> Result<Option<String>, StoreError> {
        let what = format!("evaluation {evaluation_id}'s request");
        self.evaluation_item(tenant_id, evaluation_sk(REQUEST, evaluation_id))
            .await?
            .map(|item| decode_compressed(item.get("body"), &what))
            .transpose()
    }

    async fn put_results(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
        results_text: &str,
    ) -> Result<(), StoreError> {
        let what = format!("evaluation {evaluation_id}'s results");
        self.put_evaluation_item(
            tenant_id,
            evaluation_sk(RESULTS, evaluation_id),
            &results_text,
            &what,
        )
        .await
    }

    fn transcript_shelf(&self, tenant_id: &str, evaluation_id: &str) -> Arc<dyn TranscriptShelf> {
        Arc::new(TranscriptItems {
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
        let transcripts = self
            .evaluation_items_under(
                tenant_id,
                &evaluation_sk(TRANSCRIPT, &format!("{evaluation_id}#")),
            )
            .await?;
        let mut sort_keys: Vec<String> = transcripts
            .iter()
            .map(|item| read_text(item, "sk").map(str::to_string))
            .collect::<Result<_, _>>()?;
        sort_keys.push(evaluation_sk(REQUEST, evaluation_id));
        sort_keys.push(evaluation_sk(RESULTS, evaluation_id));
        // The record last: a deletion cut short is found again by the next prune.
        sort_keys.push(evaluation_sk(RECORD, evaluation_id));
        for sort_key in sort_keys {
            self.delete_evaluation_item(evaluations_pk(tenant_id), sort_key)
                .await?;
        }
        Ok(())
    }
}

/// One evaluation's judge panel outputs, an item per example (keyed by the
/// example's id, so two ids never share one).
struct TranscriptItems {
    store: DynamoRunStore,
    tenant_id: String,
    evaluation_id: String,
}

#[async_trait]
impl TranscriptShelf for TranscriptItems {
    async fn keep(&self, example_id: &str, panel_output: &str) -> Result<String, StoreError> {
        let what = format!("example {example_id}'s panel output");
        self.store
            .put_evaluation_item(
                &self.tenant_id,
                evaluation_sk(TRANSCRIPT, &format!("{}#{example_id}", self.evaluation_id)),
                &panel_output,
                &what,
            )
            .await?;
        // Named by the store, never by a path on the server.
        Ok(format!("{}.transcripts/{example_id}", self.evaluation_id))
    }
}
