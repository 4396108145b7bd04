//! Requests' idempotency keys on the run store's table: one item per key,
//! in a partition of its own, claimed by a conditional put (absent,
//! expired, or an unanswered claim gone stale), answered by a conditional
//! update on the claim's fingerprint, released by a conditional delete.
//! DynamoDB's TTL deletes it when it expires.
//!
//! | item | pk | sk | attributes |
//! | --- | --- | --- | --- |
//! | key | `T#{tenant}#RQK#{key}` | `KEY` | `record` (JSON), `fingerprint`, `answered` (0/1), `claimedAt` and `expiresAtMillis` (Unix ms), `expiresAt` (TTL, Unix s) |

use async_trait::async_trait;
use baton_runtime::error::StoreError;
use baton_runtime::ports::{ClaimTimes, RequestKeyClaim, RequestKeyRecord, RequestKeys};

use super::keys::request_key_pk;
use crate::dynamodb::attributes::{Item, n, read_text, s, sdk_failure};
use crate::dynamodb::store::DynamoRunStore;

const KEY_SK: &str = "KEY";

fn no_longer_ours(key: &str) -> StoreError {
    StoreError::Unavailable(format!(
        "idempotency key `{key}` is no longer this request's"
    ))
}

fn decode(item: &Item) -> Result<RequestKeyRecord, StoreError> {
    serde_json::from_str(read_text(item, "record")?)
        .map_err(|error| StoreError::Corrupt(format!("a kept request key does not parse: {error}")))
}

fn encode(record: &RequestKeyRecord) -> Result<String, StoreError> {
    serde_json::to_string(record)
        .map_err(|error| StoreError::Corrupt(format!("request key: {error}")))
}

#[async_trait]
impl RequestKeys for DynamoRunStore {
    async fn claim_request_key(
        &self,
        tenant_id: &str,
        key: &str,
        fingerprint: &str,
        times: ClaimTimes,
    ) -> Result<RequestKeyClaim, StoreError> {
        let pk = request_key_pk(tenant_id, key);
        let record = RequestKeyRecord {
            fingerprint: fingerprint.to_string(),
            answer: None,
            claimed_at_millis: times.now,
            expires_at_millis: times.expires_at,
        };
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(Item::from([
                ("pk".to_string(), s(&pk)),
                ("sk".to_string(), s(KEY_SK)),
                ("record".to_string(), s(encode(&record)?)),
                ("fingerprint".to_string(), s(fingerprint)),
                ("answered".to_string(), n(0)),
                ("claimedAt".to_string(), n(times.now)),
                ("expiresAtMillis".to_string(), n(times.expires_at)),
                ("expiresAt".to_string(), n(times.expires_at / 1000)),
            ])))
            .condition_expression(
                "attribute_not_exists(pk) OR expiresAtMillis <= :now \
                 OR (answered = :no AND claimedAt < :stale)",
            )
            .expression_attribute_values(":now", n(times.now))
            .expression_attribute_values(":no", n(0))
            .expression_attribute_values(":stale", n(times.stale_before))
            .send()
            .await;
        match put {
            Ok(_) => Ok(RequestKeyClaim::Claimed),
            Err(error)
                if error
                    .as_service_error()
                    .is_some_and(|service| service.is_conditional_check_failed_exception()) =>
            {
                let kept = self
                    .client
                    .get_item()
                    .table_name(&self.table)
                    .key("pk", s(&pk))
                    .key("sk", s(KEY_SK))
                    .consistent_read(true)
                    .send()
                    .await
                    .map_err(sdk_failure)?;
                match kept.item() {
                    Some(item) => Ok(RequestKeyClaim::Kept(decode(item)?)),
                    // Gone between the two (its TTL, a release): retry.
                    None => Err(StoreError::Unavailable(format!(
                        "idempotency key `{key}` changed while it was claimed; retry"
                    ))),
                }
            }
            Err(error) => Err(sdk_failure(error)),
        }
    }

    async fn answer_request_key(
        &self,
        tenant_id: &str,
        key: &str,
        fingerprint: &str,
        answer: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let kept = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(request_key_pk(tenant_id, key)))
            .key("sk", s(KEY_SK))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_failure)?;
        let mut record = match kept.item() {
            Some(item) => decode(item)?,
            None => return Err(no_longer_ours(key)),
        };
        record.answer = Some(answer.clone());
        let updated = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(request_key_pk(tenant_id, key)))
            .key("sk", s(KEY_SK))
            .update_expression("SET #record = :record, answered = :yes")
            .condition_expression("fingerprint = :fingerprint AND answered = :no")
            .expression_attribute_names("#record", "record")
            .expression_attribute_values(":record", s(encode(&record)?))
            .expression_attribute_values(":yes", n(1))
            .expression_attribute_values(":no", n(0))
            .expression_attribute_values(":fingerprint", s(fingerprint))
            .send()
            .await;
        match updated {
            Ok(_) => Ok(()),
            Err(error)
                if error
                    .as_service_error()
                    .is_some_and(|service| service.is_conditional_check_failed_exception()) =>
            {
                Err(no_longer_ours(key))
            }
            Err(error) => Err(sdk_failure(error)),
        }
    }

    async fn release_request_key(
        &self,
        tenant_id: &str,
        key: &str,
        fingerprint: &str,
    ) -> Result<(), StoreError> {
        let deleted = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key("pk", s(request_key_pk(tenant_id, key)))
            .key("sk", s(KEY_SK))
            .condition_expression("fingerprint = :fingerprint AND answered = :no")
            .expression_attribute_values(":fingerprint", s(fingerprint))
            .expression_attribute_values(":no", n(0))
            .send()
            .await;
        match deleted {
            Ok(_) => Ok(()),
            Err(error)
                if error
                    .as_service_error()
                    .is_some_and(|service| service.is_conditional_check_failed_exception()) =>
            {
                Ok(())
            }
            Err(error) => Err(sdk_failure(error)),
        }
    }
}
