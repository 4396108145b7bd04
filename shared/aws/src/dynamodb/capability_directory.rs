//! `CapabilityDirectory` on the run store's DynamoDB table.
//!
//! | item | pk | sk | attributes |
//! | --- | --- | --- | --- |
//! | registration | `T#{tenant}#CAPS` | `CAP#{capabilityId}` | `registration` (JSON), `registeredAt`, `lastSeenAt` (epoch ms) |
//!
//! An upsert is one `UpdateItem`: the payload and `lastSeenAt` are replaced,
//! `registeredAt` is set only if absent, so heartbeats never reset it. A
//! heartbeat alone is an `UpdateItem` of `lastSeenAt` on condition the item
//! exists (it never creates one); deregistering is a `DeleteItem`.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::ReturnValue;
use baton_core::contracts::capability::RegisteredCapability;
use baton_runtime::error::StoreError;
use baton_runtime::ports::CapabilityDirectory;

use super::keys::{registration_sk, registrations_pk};
use crate::dynamodb::store::{DynamoRunStore, Item, n, read_number, read_text, s, sdk_failure};

fn record_from(item: &Item) -> Result<RegisteredCapability, StoreError> {
    let registration = serde_json::from_str(read_text(item, "registration")?)
        .map_err(|error| StoreError::Corrupt(format!("capability registration: {error}")))?;
    Ok(RegisteredCapability {
        registration,
        registered_at_millis: read_number(item, "registeredAt")?,
        last_seen_at_millis: read_number(item, "lastSeenAt")?,
    })
}

#[async_trait]
impl CapabilityDirectory for DynamoRunStore {
    async fn upsert_registration(
        &self,
        tenant_id: &str,
        record: RegisteredCapability,
    ) -> Result<RegisteredCapability, StoreError> {
        let payload = serde_json::to_string(&record.registration)
            .map_err(|error| StoreError::Corrupt(error.to_string()))?;
        let output = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(registrations_pk(tenant_id)))
            .key(
                "sk",
                s(registration_sk(&record.registration.capability_id)),
            )
            .update_expression(
                "SET registration = :registration, lastSeenAt = :seen, registeredAt = if_not_exists(registeredAt, :registered)",
            )
            .expression_attribute_values(":registration", s(payload))
            .expression_attribute_values(":seen", n(record.last_seen_at_millis))
            .expression_attribute_values(":registered", n(record.registered_at_millis))
            .return_values(ReturnValue::AllNew)
            .send()
            .await
            .map_err(sdk_failure)?;
        let item = output
            .attributes
            .ok_or_else(|| StoreError::Corrupt("UpdateItem returned no attributes".into()))?;
        record_from(&item)
    }

    async fn list_registrations(
        &self,
        tenant_id: &str,
    ) -> Result<Vec<RegisteredCapability>, StoreError> {
        let mut records = Vec::new();
        let mut start_key: Option<Item> = None;
        loop {
            let output = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
                .expression_attribute_values(":pk", s(registrations_pk(tenant_id)))
                .expression_attribute_values(":prefix", s("CAP#"))
                .consistent_read(true)
                .set_exclusive_start_key(start_key.take())
                .send()
                .await
                .map_err(sdk_failure)?;
            for item in output.items() {
                records.push(record_from(item)?);
            }
            match output.last_evaluated_key {
                Some(key) if !key.is_empty() => start_key = Some(key),
                _ => break,
            }
        }
        Ok(records)
    }

    async fn renew_heartbeat(
        &self,
        tenant_id: &str,
        capability_id: &str,
        seen_at_millis: u64,
    ) -> Result<Option<RegisteredCapability>, StoreError> {
        let renewed = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(registrations_pk(tenant_id)))
            .key("sk", s(registration_sk(capability_id)))
            .update_expression("SET lastSeenAt = :seen")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_values(":seen", n(seen_at_millis))
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match renewed {
            Ok(output) => {
                let item = output.attributes.ok_or_else(|| {
                    StoreError::Corrupt("UpdateItem returned no attributes".into())
                })?;
                record_from(&item).map(Some)
            }
            Err(error)
                if error
                    .as_service_error()
                    .is_some_and(|service| service.is_conditional_check_failed_exception()) =>
            {
                Ok(None)
            }
            Err(error) => Err(sdk_failure(error)),
        }
    }

    async fn deregister(&self, tenant_id: &str, capability_id: &str) -> Result<bool, StoreError> {
        let output = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key("pk", s(registrations_pk(tenant_id)))
            .key("sk", s(registration_sk(capability_id)))
            .return_values(ReturnValue::AllOld)
            .send()
            .await
            .map_err(sdk_failure)?;
        Ok(output.attributes.is_some_and(|item| !item.is_empty()))
    }
}
