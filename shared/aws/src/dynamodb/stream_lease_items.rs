//! Open event streams' leases on DynamoDB: one item per stream and two
//! counters, in the tenant's streams partition:
//!
//! ```text
//! pk = T#{tenant}#STREAMS   sk = {runId}#{streamId}   leaseUntil (Unix ms)
//! pk = T#{tenant}#STREAMS   sk = #OPEN                open: the tenant's leases
//! pk = T#{tenant}#STREAMS   sk = #OPEN#{runId}        open: the run's leases
//! ```
//!
//! An opening is one `TransactWriteItems`: the lease's put and both
//! counters' increments, each conditional on its counter being under its
//! cap. So the caps hold exactly across every Lambda instance, however many
//! streams open at the same moment. A close deletes the lease and moves
//! both counters down in one transaction (conditional on the lease, so a
//! second close moves nothing). A process that dies leaves its lease and
//! its counts: an opening refused at a cap first deletes the tenant's
//! leases that ran out (each with its counts, in one transaction,
//! conditional on it having run out) and tries once more. A run's counter
//! is deleted once its last stream closes (conditional on it being 0), so
//! the partition holds the runs being watched, not every run ever watched.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{Delete, Put, TransactWriteItem};
use baton_core::basics::ids::RunKey;
use baton_core::basics::instant::Instant;
use baton_runtime::error::StoreError;
use baton_runtime::ports::{StreamCaps, StreamLeases, StreamOpening};

use super::keys::{run_stream_counter_sk, stream_lease_sk, streams_pk};
use crate::dynamodb::attributes::{read_number, read_text};
use crate::dynamodb::store::{DynamoRunStore, cancellation_codes, n, s, sdk_failure, unavailable};

const TENANT_COUNTER_SK: &str = "#OPEN";

/// Which part of an opening's transaction refused it.
enum Refusal {
    Run,
    Tenant,
}

impl DynamoRunStore {
    /// The lease's delete (conditional on `condition`) and both counters
    /// moved down, as one transaction; false when the condition failed.
    async fn delete_lease(
        &self,
        key: RunKey<'_>,
        sort_key: &str,
        condition: &str,
        now: Option<Instant>,
    ) -> Result<bool, StoreError> {
        let pk = streams_pk(key.tenant_id());
        let mut delete = Delete::builder()
            .table_name(&self.table)
            .key("pk", s(&pk))
            .key("sk", s(sort_key))
            .condition_expression(condition);
        if let Some(now) = now {
            delete = delete.expression_attribute_values(":now", n(now.unix_millis()));
        }
        let written = self
            .client
            .transact_write_items()
            .transact_items(
                TransactWriteItem::builder()
                    .delete(delete.build().map_err(unavailable)?)
                    .build(),
            )
            .transact_items(self.counter_move(&pk, TENANT_COUNTER_SK, "open", -1, None)?)
            .transact_items(self.counter_move(
                &pk,
                &run_stream_counter_sk(key.run_id()),
                "open",
                -1,
                None,
            )?)
            .send()
            .await;
        match written {
            Ok(_) => {
                self.drop_idle_run_counter(&pk, key.run_id()).await?;
                Ok(true)
            }
            Err(error)
                if cancellation_codes(&error).is_some_and(|codes| {
                    codes.first().map(String::as_str) == Some("ConditionalCheckFailed")
                }) =>
            {
                Ok(false)
            }
            Err(error) => Err(sdk_failure(error)),
        }
    }

    /// Deletes the run's stream counter once no stream of it is open, so
    /// the tenant's streams partition holds the runs being watched, not
    /// every run ever watched. Conditional on the count being 0: an opening
    /// at the same moment moves it first (and keeps it), or after, and
    /// makes it anew.
    async fn drop_idle_run_counter(&self, pk: &str, run_id: &str) -> Result<(), StoreError> {
        let deleted = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(run_stream_counter_sk(run_id)))
            .condition_expression("#open <= :zero")
            .expression_attribute_names("#open", "open")
            .expression_attribute_values(":zero", n(0))
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

    /// Deletes the tenant's leases that ran out by `now`, with their
    /// counts: how many went.
    async fn delete_leases_run_out(
        &self,
        tenant_id: &str,
        now: Instant,
    ) -> Result<usize, StoreError> {
        let items = self
            .all_pages(
                self.client
                    .query()
                    .table_name(&self.table)
                    .key_condition_expression("pk = :pk")
                    .expression_attribute_values(":pk", s(streams_pk(tenant_id)))
                    .projection_expression("sk, leaseUntil")
                    .consistent_read(true),
            )
            .await?;
        let mut deleted = 0;
        for item in &items {
            let sort_key = read_text(item, "sk")?;
            if sort_key.starts_with('#') || read_number(item, "leaseUntil")? > now.unix_millis() {
                continue;
            }
            let Some((run_id, _)) = sort_key.split_once('#') else {
                continue;
            };
            if self
                .delete_lease(
                    RunKey::new(tenant_id, run_id),
                    sort_key,
                    "leaseUntil <= :now",
                    Some(now),
                )
                .await?
            {
                deleted += 1;
            }
        }
        Ok(deleted)
    }

    /// The open streams a counter of the tenant's holds.
    async fn open_streams(&self, tenant_id: &str, counter_sk: &str) -> Result<usize, StoreError> {
        let open = self
            .counter_value(&streams_pk(tenant_id), counter_sk, "open")
            .await?;
        Ok(usize::try_from(open).unwrap_or(usize::MAX))
    }

    /// One opening's transaction: opened, or which cap refused it.
    async fn try_open(
        &self,
        key: RunKey<'_>,
        stream_id: &str,
        caps: StreamCaps,
        until: Instant,
    ) -> Result<Option<Refusal>, StoreError> {
        let pk = streams_pk(key.tenant_id());
        let lease = Put::builder()
            .table_name(&self.table)
            .item("pk", s(&pk))
            .item("sk", s(stream_lease_sk(key.run_id(), stream_id)))
            .item("leaseUntil", n(until.unix_millis()))
            .condition_expression("attribute_not_exists(sk)")
            .build()
            .map_err(unavailable)?;
        let written = self
            .client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().put(lease).build())
            .transact_items(self.counter_move(
                &pk,
                &run_stream_counter_sk(key.run_id()),
                "open",
                1,
                Some(caps.per_run as u64),
            )?)
            .transact_items(self.counter_move(
                &pk,
                TENANT_COUNTER_SK,
                "open",
                1,
                Some(caps.per_tenant as u64),
            )?)
            .send()
            .await;
        match written {
            Ok(_) => Ok(None),
            Err(error) => match cancellation_codes(&error) {
                Some(codes)
                    if codes.get(1).map(String::as_str) == Some("ConditionalCheckFailed") =>
                {
                    Ok(Some(Refusal::Run))
                }
                Some(codes)
                    if codes.get(2).map(String::as_str) == Some("ConditionalCheckFailed") =>
                {
                    Ok(Some(Refusal::Tenant))
                }
                Some(codes)
                    if codes.first().map(String::as_str) == Some("ConditionalCheckFailed") =>
                {
                    Err(StoreError::Unavailable(format!(
                        "stream `{stream_id}` already holds a lease"
                    )))
                }
                _ => Err(sdk_failure(error)),
            },
        }
    }
}

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
        let mut refusal = self.try_open(key, stream_id, caps, until).await?;
        if refusal.is_some() && self.delete_leases_run_out(key.tenant_id(), now).await? > 0 {
            refusal = self.try_open(key, stream_id, caps, until).await?;
        }
        Ok(match refusal {
            None => StreamOpening::Opened,
            Some(Refusal::Run) => StreamOpening::RunAtCap {
                open: self
                    .open_streams(key.tenant_id(), &run_stream_counter_sk(key.run_id()))
                    .await?,
            },
            Some(Refusal::Tenant) => StreamOpening::TenantAtCap {
                open: self
                    .open_streams(key.tenant_id(), TENANT_COUNTER_SK)
                    .await?,
            },
        })
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
            .key("sk", s(stream_lease_sk(key.run_id(), stream_id)))
            .update_expression("SET leaseUntil = :until")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_values(":until", n(until.unix_millis()))
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
        self.delete_lease(
            key,
            &stream_lease_sk(key.run_id(), stream_id),
            "attribute_exists(sk)",
            None,
        )
        .await
        .map(|_| ())
    }
}
