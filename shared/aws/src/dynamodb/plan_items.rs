//! A run's plan in an item of its own (`RUN#PLAN`, read by the run's load
//! with the run item, in the same `Query`), so that a step commit rewrites
//! the state without it. A five-node run's state is mostly its plan, and a
//! plan never changes once made (a replan makes a new version): every node
//! step rewrote it, and DynamoDB bills a write by the item's whole size,
//! twice in a transaction.
//!
//! - The run item's `planVersion` says its `state` was written without its
//!   plan, and which version the plan item must hold. A run item without
//!   it (written before plans were split off, or by run creation) holds
//!   the whole state, plan included, and still reads.
//! - A commit writes the plan item only when its plan is not the one the
//!   store last read or wrote for that run at the version the commit
//!   replaces (the same `Arc`, remembered weakly): a plan step, a replan,
//!   the first commit of a run written whole. The transaction's condition
//!   on the run item's version guarantees nobody changed the plan item
//!   since.
//! - A load that meets a plan item of another version than the run item
//!   names (a commit landing during the `Query`) reads again.
//! - A plan too large for one item (over `large_items::PART_BYTES`
//!   deflated) stays in the state, which then goes into parts as before.
//!
//! On reading, the plan's JSON is put back into the state's object, and
//! the whole goes through `stored_format`'s migration as before.

use std::sync::{Arc, Weak};

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem};
use baton_core::state::run::RunState;
use baton_runtime::error::StoreError;

use crate::dynamodb::attributes::{Item, n, put, read_number, s};
use crate::dynamodb::keys::PLAN_SK;
use crate::dynamodb::large_items;
use crate::dynamodb::store::DynamoRunStore;

/// The run item's attribute naming the plan version its `state` left out.
pub(crate) const PLAN_VERSION_ATTRIBUTE: &str = "planVersion";

/// What a commit writes of a state: its JSON (without the plan when it has
/// an item of its own) deflated in parts, the plan version the run item
/// names, and the plan item's write when the item does not hold it yet.
pub(crate) struct StateWrite {
    pub(crate) parts: Vec<Blob>,
    pub(crate) plan_version: Option<u32>,
    pub(crate) plan_write: Option<TransactWriteItem>,
}

impl DynamoRunStore {
    /// How `state` is written by the commit that replaces run version
    /// `expected_version` (`expires`: the commit that ends the run).
    pub(crate) fn state_write(
        &self,
        run_pk: &str,
        expected_version: u64,
        state: &mut RunState,
        expires: Option<&AttributeValue>,
    ) -> Result<StateWrite, StoreError> {
        let Some(plan) = state.plan.take() else {
            return Ok(StateWrite {
                parts: crate::dynamodb::state_codec::encode_state_parts(state)?,
                plan_version: None,
                plan_write: None,
            });
        };
        let without_plan = crate::dynamodb::state_codec::encode_state_parts(state);
        state.plan = Some(plan.clone());
        let without_plan = without_plan?;
        // Which plan the run's plan item holds, as this process last read
        // or wrote it: at a run version, the plan a weak pointer names.
        let in_its_item = self
            .known_plans
            .get(run_pk)
            .is_some_and(|(version, known)| {
                version == expected_version && Weak::as_ptr(&known) == Arc::as_ptr(&plan)
            });
        // At an ending, the retention pass stamps the plan item with the
        // run's expiry, as every item this commit does not write.
        let plan_write = if in_its_item {
            None
        } else {
            let what = format!("run {} plan", state.run_id);
            let json = serde_json::to_vec(plan.as_ref())
                .map_err(|error| StoreError::Corrupt(format!("{what}: {error}")))?;
            let deflated = large_items::deflate(&json, &what)?;
            if deflated.len() > large_items::PART_BYTES {
                // Too large for an item of its own: it stays in the state.
                return Ok(StateWrite {
                    parts: crate::dynamodb::state_codec::encode_state_parts(state)?,
                    plan_version: None,
                    plan_write: None,
                });
            }
            let mut item = Item::from([
                ("pk".to_string(), s(run_pk)),
                ("sk".to_string(), s(PLAN_SK)),
                ("plan".to_string(), AttributeValue::B(Blob::new(deflated))),
                (
                    PLAN_VERSION_ATTRIBUTE.to_string(),
                    n(u64::from(plan.plan_version)),
                ),
            ]);
            if let Some(expires) = expires {
                item.insert("expiresAt".to_string(), expires.clone());
            }
            Some(put(&self.table, item, None)?)
        };
        Ok(StateWrite {
            parts: without_plan,
            plan_version: Some(plan.plan_version),
            plan_write,
        })
    }

    /// Remembers that run `run_pk`'s plan item holds `state`'s plan at run
    /// version `version` (nothing to remember without a plan).
    pub(crate) fn remember_plan(&self, run_pk: &str, version: u64, state: &RunState) {
        match &state.plan {
            Some(plan) => self
                .known_plans
                .insert(run_pk.to_string(), (version, Arc::downgrade(plan))),
            None => self.forget_plan(run_pk),
        }
    }

    /// Forgets what run `run_pk`'s plan item holds: its next commit with a
    /// plan writes the item.
    pub(crate) fn forget_plan(&self, run_pk: &str) {
        self.known_plans.remove(run_pk);
    }
}

/// The state's JSON with its plan put back, when `run_item` names a plan
/// item (`None`: its `state` is whole). `Err(None)`: the plan item holds
/// another version (a commit landed during the read): read again.
pub(crate) fn with_plan_joined(
    run_item: &Item,
    plan_item: Option<&Item>,
    state_json: Vec<u8>,
    run_id: &str,
) -> Result<Vec<u8>, Option<StoreError>> {
    if !run_item.contains_key(PLAN_VERSION_ATTRIBUTE) {
        return Ok(state_json);
    }
    let wanted = read_number(run_item, PLAN_VERSION_ATTRIBUTE).map_err(Some)?;
    let Some(plan_item) = plan_item else {
        return Err(None);
    };
    if read_number(plan_item, PLAN_VERSION_ATTRIBUTE).ok() != Some(wanted) {
        return Err(None);
    }
    let what = format!("run {run_id} plan");
    let Some(AttributeValue::B(deflated)) = plan_item.get("plan") else {
        return Err(Some(StoreError::Corrupt(format!(
            "{what}: missing, or not binary"
        ))));
    };
    let plan = large_items::inflate(deflated.as_ref(), &what).map_err(Some)?;
    joined(state_json, &plan).map_err(|why| Some(StoreError::Corrupt(format!("{what}: {why}"))))
}

/// `state`'s JSON object with `"plan": plan` added as its last member.
fn joined(mut state: Vec<u8>, plan: &[u8]) -> Result<Vec<u8>, &'static str> {
    while state.last().is_some_and(u8::is_ascii_whitespace) {
        state.pop();
    }
    if state.pop() != Some(b'}') {
        return Err("the state is not a JSON object");
    }
    let empty = state
        .iter()
        .rev()
        .find(|byte| !byte.is_ascii_whitespace())
        .is_some_and(|byte| *byte == b'{');
    state.reserve(plan.len() + 10);
    if !empty {
        state.push(b',');
    }
    state.extend_from_slice(b"\"plan\":");
    state.extend_from_slice(plan);
    state.push(b'}');
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::joined;

    #[test]
    fn the_plan_is_joined_back_as_the_state_objects_last_member() {
        assert_eq!(
            joined(br#"{"a":1}"#.to_vec(), br#"{"nodes":[]}"#).unwrap(),
            br#"{"a":1,"plan":{"nodes":[]}}"#
        );
        assert_eq!(
            joined(b"{ }\n".to_vec(), b"{}").unwrap(),
            br#"{ "plan":{}}"#
        );
        assert!(joined(b"[1]".to_vec(), b"{}").is_err());
    }
}
