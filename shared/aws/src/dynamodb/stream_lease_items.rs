//! Open event streams' leases on DynamoDB, one item per stream:
//!
//! ```text
//! pk = T#{tenant}#STREAMS   sk = {runId}#{streamId}   leaseUntil (Unix ms), expiresAt (TTL)
//! ```
//!
//! An opening reads the tenant's lease items (one consistent `Query`: its
//! open streams and those whose process died and whose lease ran out,
//! which it deletes), counts the run's and the tenant's live leases, and
//! puts its own when both are under their caps. So the caps hold across
//! every Lambda instance; two streams opening at the same moment may both
//! pass a cap by one (the count and the put are two requests).

use async_trait::async_trait;
use baton_core::ids::RunKey;
use baton_core::instant::Instant;
use baton_runtime::error::StoreError;
use baton_runtime::ports::{StreamCaps, StreamLeases, StreamOpening};

use crate::dynamodb::attributes::{read_number, read_text};
use crate::dynamodb::store::{DynamoRunStore, n, s, sdk_failure};

fn streams_pk(tenant_id: &str) -> String {
    format!("T#{tenant_id}#STREAMS")
}

fn lease_sk(run_id: &str, stream_id: &str) -> String {
    format!("{run_id}#{stream_id}")
}

/// How long after its lease ran out DynamoDB's TTL deletes a lease item a
/// dead process left (an opening deletes it sooner when it sees it).
const LEFT_LEASE_SECONDS: u64 = 3600;

#[async_trait]
impl StreamLeases for DynamoRunStore {
    async fn open_stream(
        &self,
        key: RunKey<'_>,
        stream_id: &str,
        caps: StreamCaps,
        now: Instant,
        until: Instant,
    ) -> Result<StreamOpening, StoreError> {
        let pk = streams_pk(key.tenant_id());
        let items = self
            .all_pages(
                self.client
                    .query()
                    .table_name(&self.table)
                    .key_condition_expression("pk = :pk")
                    .expression_attribute_values(":pk", s(&pk))
                    .projection_expression("sk, leaseUntil")
                    .consistent_read(true),
            )
            .await?;
        let run_prefix = format!("{}#", key.run_id());
        let (mut of_run, mut of_tenant) = (0, 0);
        for item in &items {
            let sort_key = read_text(item, "sk")?;
            if read_number(item, "leaseUntil")? <= now.unix_millis() {
                self.client
                    .delete_item()
                    .table_name(&self.table)
                    .key("pk", s(&pk))
                    .key("sk", s(sort_key))
                    .condition_expression("leaseUntil <= :now")
                    .expression_attribute_values(":now", n(now.unix_millis()))
                    .send()
                    .await
                    .ok();
                continue;
            }
            of_tenant += 1;
            if sort_key.starts_with(&run_prefix) {
                of_run += 1;
            }
        }
        if of_run >= caps.per_run {
            return Ok(StreamOpening::RunAtCap { open: of_run });
        }
        if of_tenant >= caps.per_tenant {
            return Ok(StreamOpening::TenantAtCap { open: of_tenant });
        }
        self.client
            .put_item()
            .table_name(&self.table)
            .item("pk", s(&pk))
            .item("sk", s(lease_sk(key.run_id(), stream_id)))
            .item("leaseUntil", n(until.unix_millis()))
            .item(
                "expiresAt",
                n(until.unix_millis() / 1000 + LEFT_LEASE_SECONDS),
            )
            .send()
            .await
            .map_err(sdk_failure)?;
        Ok(StreamOpening::Opened)
    }

    async fn renew_stream(
        &self,
        key: RunKey<'_>,
        stream_id: &str,
        until: Instant,
    ) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(streams_pk(key.tenant_id())))
            .key("sk", s(lease_sk(key.run_id(), stream_id)))
            .update_expression("SET leaseUntil = :until, expiresAt = :expires")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_values(":until", n(until.unix_millis()))
            .expression_attribute_values(
                ":expires",
                n(until.unix_millis() / 1000 + LEFT_LEASE_SECONDS),
            )
            .send()
            .await
            .map(|_| ())
            .or_else(|error| {
                if error
                    .as_service_error()
                    .is_some_and(|service| service.is_conditional_check_failed_exception())
                {
                    Ok(())
                } else {
                    Err(sdk_failure(error))
                }
            })
    }

    async fn close_stream(&self, key: RunKey<'_>, stream_id: &str) -> Result<(), StoreError> {
        self.client
            .delete_item()
            .table_name(&self.table)
            .key("pk", s(streams_pk(key.tenant_id())))
            .key("sk", s(lease_sk(key.run_id(), stream_id)))
            .send()
            .await
            .map_err(sdk_failure)?;
        Ok(())
    }
}
