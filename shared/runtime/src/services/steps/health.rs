//! What this process saw of each tenant's capabilities: every committed
//! step's node outcomes (a completion after its failed attempts, a node
//! failed for good, an escalation away from a capability) go into the
//! tenant's [`HealthTable`], and every step's engine reads a snapshot of
//! it (`EngineContext::capability_health`), which an escalation ranks the
//! next capability by.
//!
//! The tables live in the process, bounded ([`MAX_TENANTS`] tenants, each
//! table bounded by `baton_core::catalog::capability_health`): a Lambda
//! instance or a `baton serve` knows the calls it made since it started.
//! Nothing is written to a store, so a step costs no extra write; a
//! capability that fails on one instance is ranked lower there first.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use baton_core::catalog::capability_health::{CallOutcome, HealthTable};
use baton_core::engine::{Decision, EngineContext};
use baton_core::planning::plan::NodeExecutor;
use baton_core::wire::event::EventType;

/// How many tenants' tables one process keeps (past it, the table of the
/// tenant seen least recently goes).
pub const MAX_TENANTS: usize = 1_024;

/// Each tenant's table, copied on write: a step reads a snapshot while
/// others record.
#[derive(Default)]
pub(super) struct CapabilityHealthBook {
    // Ordered, not hashed: a step looks its tenant up twice, and comparing
    // a few ids costs less than hashing one.
    tenants: Mutex<BTreeMap<String, (u64, Arc<HealthTable>)>>,
    sequence: std::sync::atomic::AtomicU64,
}

impl CapabilityHealthBook {
    /// `tenant_id`'s table now; `None` when nothing was recorded for it.
    pub(super) fn snapshot(&self, tenant_id: &str) -> Option<Arc<HealthTable>> {
        let tenants = self.tenants.lock().ok()?;
        tenants.get(tenant_id).map(|(_, table)| table.clone())
    }

    /// `decide` with `engine` reading `tenant_id`'s table as it is now. The
    /// snapshot is held while the engine decides, never across an effect:
    /// a table written while a snapshot of it is held is copied, so ten
    /// thousand steps waiting on their models would otherwise keep up to
    /// ten thousand copies.
    pub(super) fn deciding<T>(
        &self,
        tenant_id: &str,
        engine: &EngineContext<'_>,
        decide: impl FnOnce(&EngineContext<'_>) -> T,
    ) -> T {
        let Some(table) = self.snapshot(tenant_id) else {
            return decide(engine);
        };
        let mut engine_now = *engine;
        engine_now.capability_health = &table;
        decide(&engine_now)
    }

    /// Adds `outcomes` (capability id, call) to `tenant_id`'s table.
    pub(super) fn record(&self, tenant_id: &str, outcomes: Vec<(String, CallOutcome)>) {
        if outcomes.is_empty() {
            return;
        }
        let Ok(mut tenants) = self.tenants.lock() else {
            return;
        };
        let seen = self
            .sequence
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Some((last_seen, table)) = tenants.get_mut(tenant_id) {
            *last_seen = seen;
            let table = Arc::make_mut(table);
            for (capability_id, outcome) in outcomes {
                table.record(&capability_id, outcome);
            }
            return;
        }
        if tenants.len() >= MAX_TENANTS
            && let Some(stalest) = tenants
                .iter()
                .min_by_key(|(_, (last_seen, _))| *last_seen)
                .map(|(tenant, _)| tenant.clone())
        {
            tenants.remove(&stalest);
        }
        let mut table = HealthTable::default();
        for (capability_id, outcome) in outcomes {
            table.record(&capability_id, outcome);
        }
        tenants.insert(tenant_id.to_string(), (seen, Arc::new(table)));
    }
}

/// The capability calls `decision` settled: a completed node's (its failed
/// attempts first, then the one that held, timed from its start to
/// `now_millis`), a node failed for good, and each escalation away from a
/// capability after the first `escalations_before`. The orchestrator's own
/// nodes, people and chat agents are not capabilities ranked by health.
pub(super) fn call_outcomes(
    decision: &Decision,
    escalations_before: usize,
    now_millis: u64,
) -> Vec<(String, CallOutcome)> {
    let state = &decision.state;
    let mut outcomes = Vec::new();
    let escalated = state.governance.escalations.len() > escalations_before;
    let settles_a_node = decision.events.iter().any(|event| {
        matches!(
            event.event_type,
            EventType::NodeComplete | EventType::NodeError
        )
    });
    if !escalated && !settles_a_node {
        return outcomes;
    }
    let failure = CallOutcome {
        succeeded: false,
        latency_ms: None,
        cost_usd: None,
    };
    for event in &decision.events {
        let completed = match event.event_type {
            EventType::NodeComplete => true,
            EventType::NodeError => false,
            _ => continue,
        };
        let Some(node) = event
            .node_id
            .as_deref()
            .and_then(|node_id| state.plan.as_ref()?.node(node_id))
        else {
            continue;
        };
        if !matches!(
            node.executor,
            NodeExecutor::Model | NodeExecutor::AgentSession(_) | NodeExecutor::Panel(_)
        ) {
            continue;
        }
        let Some(record) = state.nodes.get(&node.node_id) else {
            continue;
        };
        if !completed {
            outcomes.push((node.capability_id.clone(), failure));
            continue;
        }
        let attempts = record.current_attempt.saturating_sub(record.attempt_base);
        for _ in 1..attempts {
            outcomes.push((node.capability_id.clone(), failure));
        }
        outcomes.push((
            node.capability_id.clone(),
            CallOutcome {
                succeeded: true,
                latency_ms: record
                    .started_at_millis
                    .map(|started| now_millis.saturating_sub(started)),
                cost_usd: record.cost_usd,
            },
        ));
    }
    for escalated in state.governance.escalations.iter().skip(escalations_before) {
        outcomes.push((escalated.capability_id.clone(), failure));
    }
    outcomes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::OrchestratorSettings;
    use baton_core::basics::schema::ValidatorCache;
    use baton_core::catalog::registry::Registry;

    fn call(succeeded: bool) -> Vec<(String, CallOutcome)> {
        let outcome = CallOutcome {
            succeeded,
            latency_ms: Some(10),
            cost_usd: None,
        };
        vec![("capability".to_string(), outcome)]
    }

    /// A decision reads the table as it is, and lets go of it when it is
    /// made: an outcome recorded afterwards changes the table in place
    /// (a snapshot still held would make the book copy it).
    #[test]
    fn a_decision_reads_the_table_and_keeps_no_snapshot_of_it() {
        let book = CapabilityHealthBook::default();
        book.record("tenant", call(false));
        let (registry, validators) = (Registry::default(), ValidatorCache::default());
        let engine = OrchestratorSettings::default().engine_context(&registry, &validators);
        let calls_seen = book.deciding("tenant", &engine, |engine| {
            engine
                .capability_health
                .of("capability")
                .map(|health| health.calls())
        });
        assert_eq!(calls_seen, Some(1));
        let table_before = book.snapshot("tenant").map(|table| Arc::as_ptr(&table));
        book.record("tenant", call(true));
        let table_after = book.snapshot("tenant");
        assert_eq!(table_after.as_ref().map(Arc::as_ptr), table_before);
        assert_eq!(
            table_after.and_then(|table| table.of("capability").map(|health| health.calls())),
            Some(2)
        );
    }
}
