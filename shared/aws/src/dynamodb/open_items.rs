//! Human tasks and held runs' requests as their own items, so a tenant's
//! pending tasks of one capability are one consistent `Query`, with no run
//! state read:
//!
//! ```text
//! pk = T#{tenant}#TASKS   sk = {capabilityId}#{runCreatedAt}#{taskId}   task    = HumanTask JSON
//! pk = T#{tenant}#HITL    sk = {runCreatedAt}#{requestId}               request = PendingRequest JSON
//! pk = T#{tenant}#RUNS    sk = {runCreatedAt ms, 13 digits}.{runId}     listing = RunListing JSON
//! pk = T#{tenant}#RUNS#{status}   sk = (the same)                       listing = RunListing JSON
//! pk = T#{tenant}#RUNS#FORKS#{sourceRunId}   sk = (the same)           listing = RunListing JSON (a fork)
//! ```
//!
//! Every run implies its listing twice: in the runs list (newest first)
//! and in the list of its status, so `GET /runs?status=` is one `Query` of
//! that status's partition, whatever else the tenant has; a fork a third
//! time, under its source run, so `?forkedFrom=` reads the forks only. The listing
//! changes only with the run's status, so most commits rewrite nothing of
//! it; a status change moves the second item. The commit that ends a run
//! stamps every item it puts with the run's expiry (`expiresAt`).
//!
//! They are written in the commit's transaction, from the committed state,
//! so they never disagree with the run item: the items the state implies
//! are put (new or changed) and those it no longer implies are deleted. The
//! items the previous version implied are remembered from the load (or the
//! last commit) of that version; without that memory every key the run
//! could have (its human nodes, its requests so far) is deleted unless
//! still implied.

use aws_sdk_dynamodb::types::{Delete, Put, TransactWriteItem};
use baton_core::state::run::{RunState, RunStatus};
use baton_core::state::tasks::{HumanTask, PendingRequest, human_tasks, pending_request};
use baton_runtime::error::StoreError;

use super::keys::{
    created_sk, requests_pk, runs_by_status_pk, runs_forked_from_pk, runs_pk, task_prefix, task_sk,
    tasks_pk,
};
use crate::dynamodb::store::{DynamoRunStore, OpenItems, s, sdk_failure, unavailable};

/// The attribute holding an open item's JSON, by its partition.
fn body_attribute(pk: &str) -> &'static str {
    if pk.ends_with("#TASKS") {
        "task"
    } else if pk.contains("#RUNS") {
        "listing"
    } else {
        "request"
    }
}

/// The items `state` implies.
pub(crate) fn open_items(state: &RunState) -> OpenItems {
    let mut items = OpenItems::new();
    let listing = baton_core::state::listing::RunListing::of(state);
    if let Ok(body) = serde_json::to_string(&listing) {
        items.insert(
            (
                runs_by_status_pk(&state.tenant_id, state.status()),
                listing.ordering_key(),
            ),
            body.clone(),
        );
        if let Some(source) = &listing.forked_from_run_id {
            items.insert(
                (
                    runs_forked_from_pk(&state.tenant_id, source),
                    listing.ordering_key(),
                ),
                body.clone(),
            );
        }
        items.insert((runs_pk(&state.tenant_id), listing.ordering_key()), body);
    }
    for task in human_tasks(state) {
        if let Ok(body) = serde_json::to_string(&task) {
            items.insert(
                (
                    tasks_pk(&state.tenant_id),
                    task_sk(
                        &task.capability_id,
                        &state.created_at.rfc3339(),
                        &task.task_id,
                    ),
                ),
                body,
            );
        }
    }
    if let Some(request) = pending_request(state)
        && let Ok(body) = serde_json::to_string(&request)
    {
        items.insert(
            (
                requests_pk(&state.tenant_id),
                created_sk(&state.created_at.rfc3339(), &request.request.request_id),
            ),
            body,
        );
    }
    items
}

/// Every key `state`'s run could have had: its plan's human nodes, the
/// requests issued so far and its listing under `previous_status` (the
/// fallback when the previous items are not remembered).
fn every_possible_key(state: &RunState, previous_status: RunStatus) -> Vec<(String, String)> {
    let mut keys = vec![(
        runs_by_status_pk(&state.tenant_id, previous_status),
        baton_core::state::listing::ordering_key(&state.created_at.rfc3339(), &state.run_id),
    )];
    if let Some(plan) = &state.plan {
        for node in &plan.nodes {
            if node.agent_type() == baton_core::contracts::capability::AgentType::Human {
                let task_id = baton_core::state::tasks::task_id(&state.run_id, &node.node_id);
                keys.push((
                    tasks_pk(&state.tenant_id),
                    task_sk(&node.capability_id, &state.created_at.rfc3339(), &task_id),
                ));
            }
        }
    }
    for number in 1..=state.governance.requests_issued {
        let request_id = format!("{}:hitl:{number}", state.run_id);
        keys.push((
            requests_pk(&state.tenant_id),
            created_sk(&state.created_at.rfc3339(), &request_id),
        ));
    }
    keys
}

impl DynamoRunStore {
    pub(crate) fn remember_open_items(&self, run_pk: &str, version: u64, items: OpenItems) {
        self.known_open_items
            .insert(run_pk.to_string(), (version, items));
    }

    /// The writes that bring the items from `expected_version`'s (the run
    /// then `previous_status`) to `next`'s; with `expires`, every item is
    /// put again carrying it (the commit that ends the run).
    pub(crate) fn open_item_writes(
        &self,
        run_pk: &str,
        expected_version: u64,
        next: &OpenItems,
        state: &RunState,
        previous_status: RunStatus,
        expires: Option<&aws_sdk_dynamodb::types::AttributeValue>,
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        let previous = self
            .known_open_items
            .get(run_pk)
            .filter(|(version, _)| *version == expected_version)
            .map(|(_, items)| items);
        let mut writes = Vec::new();
        for ((pk, sk), body) in next {
            let unchanged = previous
                .as_ref()
                .is_some_and(|items| items.get(&(pk.clone(), sk.clone())) == Some(body));
            if unchanged && expires.is_none() {
                continue;
            }
            let attribute = body_attribute(pk);
            let mut put = Put::builder()
                .table_name(&self.table)
                .item("pk", s(pk))
                .item("sk", s(sk))
                .item(attribute, s(body));
            if let Some(expires) = expires {
                put = put.item("expiresAt", expires.clone());
            }
            let put = put.build().map_err(unavailable)?;
            writes.push(TransactWriteItem::builder().put(put).build());
        }
        let stale_keys: Vec<(String, String)> = match previous {
            Some(items) => items.into_keys().collect(),
            None => every_possible_key(state, previous_status),
        };
        for (pk, sk) in stale_keys {
            if next.contains_key(&(pk.clone(), sk.clone())) {
                continue;
            }
            let delete = Delete::builder()
                .table_name(&self.table)
                .key("pk", s(pk))
                .key("sk", s(sk))
                .build()
                .map_err(unavailable)?;
            writes.push(TransactWriteItem::builder().delete(delete).build());
        }
        Ok(writes)
    }

    /// Every item under `pk` whose sort key starts with `prefix`, the
    /// `attribute` of each (consistent, every page), oldest run first.
    async fn query_open_items(
        &self,
        pk: String,
        prefix: Option<String>,
        attribute: &str,
    ) -> Result<Vec<String>, StoreError> {
        let mut keyed = self.query_open_item_pages(pk, prefix, attribute).await?;
        // A task's sort key leads with its capability; order by what follows
        // (the run's creation time, then the task).
        keyed.sort_by(|(a, _), (b, _)| {
            let after_capability =
                |key: &str| key.split_once('#').map(|(_, rest)| rest.to_string());
            if attribute == "task" {
                after_capability(a).cmp(&after_capability(b))
            } else {
                a.cmp(b)
            }
        });
        Ok(keyed.into_iter().map(|(_, body)| body).collect())
    }

    /// Every item of partition `pk` (whose `sk` starts with `prefix`):
    /// `(sk, text attribute)`, consistent, all pages.
    pub(crate) async fn query_open_item_pages(
        &self,
        pk: String,
        prefix: Option<String>,
        attribute: &str,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let mut bodies = Vec::new();
        let mut start = None;
        loop {
            let mut query = self
                .client
                .query()
                .table_name(&self.table)
                .consistent_read(true)
                .expression_attribute_values(":pk", s(&pk))
                .set_exclusive_start_key(start);
            query = match &prefix {
                Some(prefix) => query
                    .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
                    .expression_attribute_values(":prefix", s(prefix)),
                None => query.key_condition_expression("pk = :pk"),
            };
            let output = query.send().await.map_err(sdk_failure)?;
            for item in output.items() {
                bodies.push((
                    crate::dynamodb::attributes::read_text(item, "sk")?.to_string(),
                    crate::dynamodb::attributes::read_text(item, attribute)?.to_string(),
                ));
            }
            match output.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(bodies),
            }
        }
    }

    /// The tenant's pending tasks (of one capability), oldest run first.
    pub(crate) async fn query_pending_tasks(
        &self,
        tenant_id: &str,
        capability_id: Option<&str>,
    ) -> Result<Vec<HumanTask>, StoreError> {
        let prefix = capability_id.map(task_prefix);
        let bodies = self
            .query_open_items(tasks_pk(tenant_id), prefix, "task")
            .await?;
        bodies
            .iter()
            .map(|body| serde_json::from_str::<HumanTask>(body))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| StoreError::Corrupt(format!("task item: {error}")))
    }

    /// The tenant's pending requests, oldest run first.
    pub(crate) async fn query_pending_requests(
        &self,
        tenant_id: &str,
    ) -> Result<Vec<PendingRequest>, StoreError> {
        let bodies = self
            .query_open_items(requests_pk(tenant_id), None, "request")
            .await?;
        bodies
            .iter()
            .map(|body| serde_json::from_str::<PendingRequest>(body))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| StoreError::Corrupt(format!("request item: {error}")))
    }
}
