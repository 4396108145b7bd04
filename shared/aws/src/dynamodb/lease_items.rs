//! Node leases on DynamoDB: a claim is one transaction (the lease item,
//! conditional on being free, expired or already this claimant's, with the
//! claim's frames), renewed and released by conditional updates on its
//! claimant.
//!
//! A lease item carries its own expiry for DynamoDB's TTL
//! (`expiresAt`, [`LEASE_ITEM_KEPT_AFTER`] past the lease's end), so a
//! run's leases go by themselves and retention's pass has nothing to stamp
//! on them: a lease past its end is free to claim whether or not its item
//! is still there.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use baton_core::basics::ids::RunKey;
use baton_core::basics::instant::Instant;
use baton_core::wire::event::EventDraft;
use baton_runtime::error::StoreError;
use baton_runtime::ports::{ClaimOutcome, NodeClaim, NodeLeases};

use super::keys::{NODE_LEASE_PREFIX, node_lease_sk, run_pk};
use crate::dynamodb::store::{DynamoRunStore, Item, n, read_number, s, sdk_failure, unavailable};

/// How long a lease item is kept after its lease ends (DynamoDB's TTL
/// deletes it within days after that).
pub(crate) const LEASE_ITEM_KEPT_AFTER: std::time::Duration = std::time::Duration::from_secs(3600);

/// The TTL of a lease item whose lease ends at `lease_expires_at`.
fn lease_item_expiry(lease_expires_at: Instant) -> aws_sdk_dynamodb::types::AttributeValue {
    n(lease_expires_at.unix_millis() / 1000 + LEASE_ITEM_KEPT_AFTER.as_secs())
}

#[async_trait]
impl NodeLeases for DynamoRunStore {
    async fn run_holds_live_lease(
        &self,
        key: RunKey<'_>,
        now: Instant,
    ) -> Result<bool, StoreError> {
        let output = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND begins_with(sk, :leases)")
            .filter_expression("leaseExpiresAt > :now")
            .expression_attribute_values(":pk", s(run_pk(key.tenant_id(), key.run_id())))
            .expression_attribute_values(":leases", s(NODE_LEASE_PREFIX))
            .expression_attribute_values(":now", n(now.unix_millis()))
            .select(aws_sdk_dynamodb::types::Select::Count)
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_failure)?;
        Ok(output.count() > 0)
    }

    async fn claim_node(
        &self,
        key: RunKey<'_>,
        claim: NodeClaim<'_>,
        events_on_claim: Vec<EventDraft>,
    ) -> Result<ClaimOutcome, StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        let pk = run_pk(tenant_id, run_id);
        let lease_sk = node_lease_sk(claim.claim_key, claim.attempt);
        let lease = Put::builder()
            .table_name(&self.table)
            .set_item(Some(Item::from([
                ("pk".to_string(), s(&pk)),
                ("sk".to_string(), s(&lease_sk)),
                ("claimant".to_string(), s(claim.worker_id)),
                (
                    "leaseExpiresAt".to_string(),
                    n(claim.lease_expires_at.unix_millis()),
                ),
                (
                    "expiresAt".to_string(),
                    lease_item_expiry(claim.lease_expires_at),
                ),
            ])))
            .condition_expression(
                "attribute_not_exists(pk) OR leaseExpiresAt < :now OR claimant = :me",
            )
            .expression_attribute_values(":now", n(claim.now.unix_millis()))
            .expression_attribute_values(":me", s(claim.worker_id))
            .build()
            .map_err(unavailable)?;
        let leading = vec![TransactWriteItem::builder().put(lease).build()];
        match self
            .append_with(tenant_id, run_id, events_on_claim, leading)
            .await?
        {
            Some(_) => Ok(ClaimOutcome::Claimed),
            None => {
                let held = self
                    .client
                    .get_item()
                    .table_name(&self.table)
                    .key("pk", s(&pk))
                    .key("sk", s(&lease_sk))
                    .consistent_read(true)
                    .send()
                    .await
                    .map_err(sdk_failure)?;
                let expires = held
                    .item
                    .as_ref()
                    .map(|item| read_number(item, "leaseExpiresAt"))
                    .transpose()?
                    .unwrap_or(claim.now.unix_millis());
                Ok(ClaimOutcome::HeldByOther {
                    lease_expires_at: Instant::from_unix_millis(expires),
                })
            }
        }
    }

    async fn renew_claim(&self, key: RunKey<'_>, claim: NodeClaim<'_>) -> Result<bool, StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        let renewed = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(run_pk(tenant_id, run_id)))
            .key("sk", s(node_lease_sk(claim.claim_key, claim.attempt)))
            .update_expression("SET leaseExpiresAt = :until, expiresAt = :gone")
            .condition_expression("claimant = :me")
            .expression_attribute_values(":until", n(claim.lease_expires_at.unix_millis()))
            .expression_attribute_values(":gone", lease_item_expiry(claim.lease_expires_at))
            .expression_attribute_values(":me", s(claim.worker_id))
            .send()
            .await;
        match renewed {
            Ok(_) => Ok(true),
            Err(error)
                if error
                    .as_service_error()
                    .is_some_and(|service| service.is_conditional_check_failed_exception()) =>
            {
                Ok(false)
            }
            Err(error) => Err(sdk_failure(error)),
        }
    }

    async fn release_claim(
        &self,
        key: RunKey<'_>,
        node_id: &str,
        attempt: u32,
        claimant: &str,
    ) -> Result<(), StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        let released = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key("pk", s(run_pk(tenant_id, run_id)))
            .key("sk", s(node_lease_sk(node_id, attempt)))
            .condition_expression("claimant = :me")
            .expression_attribute_values(":me", s(claimant))
            .send()
            .await;
        match released {
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
