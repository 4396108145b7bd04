//! Every key shape of the table, in one place (the crate's docs list them
//! as a table). Each function builds one partition or sort key; no other
//! file of the adapter writes a key with `format!` (a test below reads the
//! folder and fails naming the file that does).
//!
//! Invariant: every partition key a request names starts with its tenant
//! (`T#{tenant}#…`), but the sweeper's retention shards (`RETAIN#…`), the
//! pending-outbox shards (`OUTBOX#PENDING#…`), the schedules' due marks and
//! the list of tenants with evaluations (`EVALS#TENANTS`), which belong to
//! no tenant's request.

use baton_core::state::run::RunStatus;

/// A run's items: its state, event sequence, events, leases, outbox,
/// entries.
pub(crate) fn run_pk(tenant_id: &str, run_id: &str) -> String {
    format!("T#{tenant_id}#R#{run_id}")
}

/// What every frame's sort key (and its parts') starts with. A frame is
/// written once, at its sequence, and never rewritten.
pub(crate) const EVENT_SK_PREFIX: &str = "EV#";

/// Event `sequence` of a run.
pub(crate) fn event_sk(sequence: u64) -> String {
    format!("{EVENT_SK_PREFIX}{sequence:020}")
}

/// Part `index` of a run state too large for one item.
/// A run's plan item (`plan_items`): between the run item and its
/// sequence item, so the run's load reads it in the same `Query`.
pub(crate) const PLAN_SK: &str = "RUN#PLAN";

pub(crate) fn state_part_sk(index: usize) -> String {
    format!("RUN#PART#{index:03}")
}

/// Part `index` of event `sequence`'s frame.
pub(crate) fn frame_part_sk(sequence: u64, index: usize) -> String {
    part_sk(&event_sk(sequence), index)
}

/// Part `index` of the item whose sort key is `whole`.
pub(crate) fn part_sk(whole: &str, index: usize) -> String {
    format!("{whole}#P{index:03}")
}

/// What every lease's sort key starts with (the sweeper's look for a live
/// lease in a run).
pub(crate) const NODE_LEASE_PREFIX: &str = "LEASE#";

/// A node's (or claim's) lease for `attempt`.
pub(crate) fn node_lease_sk(claim_key: &str, attempt: u32) -> String {
    format!("{NODE_LEASE_PREFIX}{claim_key}#{attempt:06}")
}

/// An outbox entry of a run.
pub(crate) fn outbox_sk(message_id: &str) -> String {
    format!("OUT#{message_id}")
}

/// Shard `shard` of the pending outbox entries (the sparse index).
pub(crate) fn pending_outbox_pk(shard: impl std::fmt::Display) -> String {
    format!("OUTBOX#PENDING#{shard}")
}

/// The idempotency record of a submission.
pub(crate) fn idempotency_pk(tenant_id: &str, key: &str) -> String {
    format!("T#{tenant_id}#IDEM#{key}")
}

/// Shard `shard` of retention's marks.
pub(crate) fn retention_pk(shard: impl std::fmt::Display) -> String {
    format!("RETAIN#{shard}")
}

/// A tenant's evaluations (`baton serve`'s, feature `evaluations`).
#[cfg(feature = "evaluations")]
pub(crate) fn evaluations_pk(tenant_id: &str) -> String {
    format!("T#{tenant_id}#EVALS")
}

/// An evaluation's item of one `kind` (`REC`, `REQ`, `RES`, `TR`).
#[cfg(feature = "evaluations")]
pub(crate) fn evaluation_sk(kind: &str, rest: &str) -> String {
    format!("{kind}#{rest}")
}

/// The tenants that have evaluations.
#[cfg(feature = "evaluations")]
pub(crate) const EVALUATION_TENANTS_PK: &str = "EVALS#TENANTS";

/// A tenant's runs list.
pub(crate) fn runs_pk(tenant_id: &str) -> String {
    format!("T#{tenant_id}#RUNS")
}

/// A tenant's runs list of one status.
pub(crate) fn runs_by_status_pk(tenant_id: &str, status: RunStatus) -> String {
    format!("T#{tenant_id}#RUNS#{}", status.as_str())
}

/// A tenant's forks of one run (`GET /runs?forkedFrom=`): an index, so the
/// filter reads the forks, not the tenant's whole history.
pub(crate) fn runs_forked_from_pk(tenant_id: &str, source_run_id: &str) -> String {
    format!("T#{tenant_id}#RUNS#FORKS#{source_run_id}")
}

/// A run in a list, or in the awaiting index: by creation time, then id.
pub(crate) fn created_sk(created_at_rfc3339: &str, id: &str) -> String {
    format!("{created_at_rfc3339}#{id}")
}

/// The sparse index's partition of a tenant's runs waiting for a person.
pub(crate) fn awaiting_human_pk(tenant_id: &str) -> String {
    format!("T#{tenant_id}#AWAITING_HUMAN")
}

/// A tenant's open human tasks.
pub(crate) fn tasks_pk(tenant_id: &str) -> String {
    format!("T#{tenant_id}#TASKS")
}

/// A task in its tenant's list: by capability, then time, then id.
pub(crate) fn task_sk(capability_id: &str, created_at_rfc3339: &str, task_id: &str) -> String {
    format!("{capability_id}#{created_at_rfc3339}#{task_id}")
}

/// The prefix of a capability's tasks in the list.
pub(crate) fn task_prefix(capability_id: &str) -> String {
    format!("{capability_id}#")
}

/// A tenant's open approval requests and questions.
pub(crate) fn requests_pk(tenant_id: &str) -> String {
    format!("T#{tenant_id}#HITL")
}

/// A tenant's live-run counter.
pub(crate) fn counter_pk(tenant_id: &str) -> String {
    format!("T#{tenant_id}#COUNTERS")
}

/// A tenant's audit trail.
pub(crate) fn audit_pk(tenant_id: &str) -> String {
    format!("T#{tenant_id}#AUDIT")
}

/// One audit record.
pub(crate) fn audit_sk(audit_id: &str) -> String {
    format!("A#{audit_id}")
}

/// One idempotency key of a request that is not a run submission (a chat
/// message, a fork, an answer, a schedule's creation).
pub(crate) fn request_key_pk(tenant_id: &str, key: &str) -> String {
    format!("T#{tenant_id}#RQK#{key}")
}

/// A tenant's memory across runs: its items and namespace counters.
pub(crate) fn memory_pk(tenant_id: &str) -> String {
    format!("T#{tenant_id}#MEM")
}

/// A memory item: its namespace (parts joined by U+001F), then U+001E,
/// then its key, so a namespace's items are one prefix.
pub(crate) fn memory_item_sk(namespace: &str, key: &str) -> String {
    format!("N#{namespace}\u{1e}{key}")
}

/// A memory namespace's item counter.
pub(crate) fn memory_counter_sk(namespace: &str) -> String {
    format!("C#{namespace}")
}

/// A tenant's open event streams and their counters.
pub(crate) fn streams_pk(tenant_id: &str) -> String {
    format!("T#{tenant_id}#STREAMS")
}

/// One open event stream's lease.
pub(crate) fn stream_lease_sk(run_id: &str, stream_id: &str) -> String {
    format!("{run_id}#{stream_id}")
}

/// The counter of one run's open streams.
pub(crate) fn run_stream_counter_sk(run_id: &str) -> String {
    format!("#OPEN#{run_id}")
}

/// A tenant's schedules.
pub(crate) fn schedules_pk(tenant_id: &str) -> String {
    format!("T#{tenant_id}#SCHEDULES")
}

/// A schedule's due mark.
pub(crate) fn schedule_due_sk(tenant_id: &str, schedule_id: &str) -> String {
    format!("{tenant_id}#{schedule_id}")
}

/// A tenant's capability registrations.
pub(crate) fn registrations_pk(tenant_id: &str) -> String {
    format!("T#{tenant_id}#CAPS")
}

/// One registration.
pub(crate) fn registration_sk(capability_id: &str) -> String {
    format!("CAP#{capability_id}")
}

/// A chat thread's items.
pub(crate) fn thread_pk(tenant_id: &str, thread_id: &str) -> String {
    format!("T#{tenant_id}#THREAD#{thread_id}")
}

/// One exchange of a thread (the run that answered it).
pub(crate) fn exchange_sk(run_id: &str) -> String {
    format!("X#{run_id}")
}

/// What a thread's time index entries start with (`thread_pages`).
pub(crate) const EXCHANGE_POINTER_PREFIX: &str = "XT#";

/// The time index entry of the exchange of run `run_id` at `at_millis`.
pub(crate) fn exchange_pointer_sk(at_millis: u64, run_id: &str) -> String {
    format!("{EXCHANGE_POINTER_PREFIX}{at_millis:013}#{run_id}")
}

/// Marks a thread whose every exchange has a time index entry.
pub(crate) const EXCHANGES_INDEXED_SK: &str = "XINDEXED";

/// The sparse index's partition of a tenant's threads.
pub(crate) fn threads_index_pk(tenant_id: &str) -> String {
    format!("T#{tenant_id}#THREADS")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_other_file_of_the_adapter_writes_a_key_with_format() {
        let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/dynamodb");
        // Key fragments as they would open a `format!` of a key.
        let shapes = [
            "format!(\"T#",
            "format!(\"EV#",
            "format!(\"LEASE#",
            "format!(\"OUT#",
            "format!(\"OUTBOX#",
            "format!(\"RETAIN#",
            "format!(\"CAP#",
            "format!(\"X#",
            "format!(\"A#",
            "format!(\"RUN#",
            "format!(\"#OPEN",
            "#P{index",
        ];
        let mut offenders = Vec::new();
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().is_some_and(|name| name == "keys.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for shape in shapes {
                if text.contains(shape) {
                    offenders.push(format!("{}: {shape}", path.display()));
                }
            }
        }
        assert!(
            offenders.is_empty(),
            "keys are built in keys.rs: {offenders:#?}"
        );
    }

    #[test]
    fn keys_keep_their_shapes() {
        assert_eq!(run_pk("t", "r"), "T#t#R#r");
        assert_eq!(frame_part_sk(7, 2), "EV#00000000000000000007#P002");
        assert_eq!(node_lease_sk("node_1", 3), "LEASE#node_1#000003");
        assert_eq!(
            task_sk("cap", "2026-01-01T00:00:00Z", "task"),
            "cap#2026-01-01T00:00:00Z#task"
        );
        assert_eq!(pending_outbox_pk(4), "OUTBOX#PENDING#4");
    }
}
