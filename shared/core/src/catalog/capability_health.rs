//! What a tenant's recent calls say about each capability, and the order a
//! failed node's facets try the others in.
//!
//! A [`HealthTable`] keeps, per capability, the outcomes of its last
//! [`HEALTH_WINDOW`] calls (whether the answer held, how long the node
//! took, what its model calls cost), for at most
//! [`MAX_CAPABILITIES_PER_TABLE`] capabilities (the least recently seen go
//! first). The shell keeps one table per tenant and hands the engine a
//! snapshot with every step (`EngineContext::capability_health`); the
//! engine never writes it.
//!
//! When a node escalates, [`rank_by_health`] orders the capabilities that
//! could take its facets over by a score of three terms, each in 0..=1:
//!
//! ```text
//! score = 0.6 × success + 0.2 × speed + 0.2 × thrift
//! success = (successes + 1) / (calls + 2)          (no history: 0.5)
//! speed   = 1 − median latency / slowest median among the candidates (unknown: 0.5)
//! thrift  = 1 − mean cost / dearest mean among the candidates,
//!           else from the declared cost tier (low 0.75, standard 0.5, premium 0.25)
//! ```
//!
//! The ranking, with every input, goes into the `plan_updated` frame of the
//! version it produced, so a reader sees why one capability came before
//! another. A caller's own `selection` (require, prefer, avoid) still
//! ranks first: health orders what the caller left open.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::contracts::capability::CapabilityRegistration;

/// How many recent calls a capability's health remembers.
pub const HEALTH_WINDOW: usize = 20;
/// How many capabilities one table keeps (the least recently seen leave).
pub const MAX_CAPABILITIES_PER_TABLE: usize = 512;

const SUCCESS_WEIGHT: f64 = 0.6;
const SPEED_WEIGHT: f64 = 0.2;
const THRIFT_WEIGHT: f64 = 0.2;

/// One call of a capability, as its node's step ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CallOutcome {
    /// The answer held (the node completed on it).
    pub succeeded: bool,
    /// From the attempt's start to its end; `None` when unknown.
    pub latency_ms: Option<u64>,
    /// What the call's model use cost; `None` when unpriced.
    pub cost_usd: Option<f64>,
}

/// A capability's recent calls.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CapabilityHealth {
    recent: VecDeque<CallOutcome>,
    last_seen: u64,
}

impl CapabilityHealth {
    /// Calls remembered.
    pub fn calls(&self) -> u32 {
        u32::try_from(self.recent.len()).unwrap_or(u32::MAX)
    }

    /// Calls whose answer held.
    pub fn successes(&self) -> u32 {
        u32::try_from(self.recent.iter().filter(|call| call.succeeded).count()).unwrap_or(u32::MAX)
    }

    /// `(successes + 1) / (calls + 2)`: 0.5 with no history, never 0 or 1.
    pub fn success_rate(&self) -> f64 {
        (f64::from(self.successes()) + 1.0) / (f64::from(self.calls()) + 2.0)
    }

    /// The median latency of the calls that report one.
    pub fn median_latency_ms(&self) -> Option<u64> {
        let mut latencies: Vec<u64> = self
            .recent
            .iter()
            .filter_map(|call| call.latency_ms)
            .collect();
        if latencies.is_empty() {
            return None;
        }
        latencies.sort_unstable();
        Some(latencies[latencies.len() / 2])
    }

    /// The mean cost of the priced calls.
    pub fn mean_cost_usd(&self) -> Option<f64> {
        let costs: Vec<f64> = self
            .recent
            .iter()
            .filter_map(|call| call.cost_usd)
            .collect();
        if costs.is_empty() {
            return None;
        }
        Some(costs.iter().sum::<f64>() / costs.len() as f64)
    }
}

/// Recent calls of a tenant's capabilities, bounded both ways.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HealthTable {
    capabilities: BTreeMap<String, CapabilityHealth>,
    sequence: u64,
}

/// The table of a tenant whose calls nobody has seen yet.
pub static NO_HEALTH: HealthTable = HealthTable {
    capabilities: BTreeMap::new(),
    sequence: 0,
};

impl HealthTable {
    /// Remembers one call of `capability_id`; the oldest call of a full
    /// window leaves, and so does the least recently seen capability of a
    /// full table.
    pub fn record(&mut self, capability_id: &str, outcome: CallOutcome) {
        self.sequence += 1;
        let sequence = self.sequence;
        if !self.capabilities.contains_key(capability_id)
            && self.capabilities.len() >= MAX_CAPABILITIES_PER_TABLE
            && let Some(stalest) = self
                .capabilities
                .iter()
                .min_by_key(|(_, health)| health.last_seen)
                .map(|(id, _)| id.clone())
        {
            self.capabilities.remove(&stalest);
        }
        let health = self
            .capabilities
            .entry(capability_id.to_string())
            .or_default();
        if health.recent.len() >= HEALTH_WINDOW {
            health.recent.pop_front();
        }
        health.recent.push_back(outcome);
        health.last_seen = sequence;
    }

    /// What the table knows of `capability_id`.
    pub fn of(&self, capability_id: &str) -> Option<&CapabilityHealth> {
        self.capabilities.get(capability_id)
    }

    /// Capabilities the table knows.
    pub fn len(&self) -> usize {
        self.capabilities.len()
    }

    pub fn is_empty(&self) -> bool {
        self.capabilities.is_empty()
    }
}

/// One candidate of an escalation, with what ranked it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RankedCapability {
    pub capability_id: String,
    /// `0.6 × success + 0.2 × speed + 0.2 × thrift`, higher first.
    pub score: f64,
    /// `(successes + 1) / (calls + 2)` over the recent calls.
    pub success_rate: f64,
    /// Recent calls the rate is over (0: no history, the rate is 0.5).
    pub calls: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_latency_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_cost_usd: Option<f64>,
    /// The declared cost tier (`cost.tier`), used when no call was priced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_tier: Option<String>,
}

/// Thrift from a declared tier, for a capability no priced call tells of.
fn tier_thrift(capability: &CapabilityRegistration) -> f64 {
    match capability.cost_rank() {
        0 => 0.75,
        1 => 0.5,
        _ => 0.25,
    }
}

/// `candidates` best first, by the score of this module's docs (ties by id).
pub fn rank_by_health(
    candidates: &[&CapabilityRegistration],
    table: &HealthTable,
) -> Vec<RankedCapability> {
    let slowest = candidates
        .iter()
        .filter_map(|capability| table.of(&capability.capability_id)?.median_latency_ms())
        .max()
        .unwrap_or(0);
    let dearest = candidates
        .iter()
        .filter_map(|capability| table.of(&capability.capability_id)?.mean_cost_usd())
        .fold(0.0_f64, f64::max);
    let mut ranked: Vec<RankedCapability> = candidates
        .iter()
        .map(|capability| {
            let health = table.of(&capability.capability_id);
            let success_rate = health.map_or(0.5, CapabilityHealth::success_rate);
            let median_latency_ms = health.and_then(CapabilityHealth::median_latency_ms);
            let mean_cost_usd = health.and_then(CapabilityHealth::mean_cost_usd);
            let speed = match median_latency_ms {
                Some(latency) if slowest > 0 => 1.0 - latency as f64 / slowest as f64,
                _ => 0.5,
            };
            let thrift = match mean_cost_usd {
                Some(cost) if dearest > 0.0 => 1.0 - cost / dearest,
                _ => tier_thrift(capability),
            };
            RankedCapability {
                capability_id: capability.capability_id.clone(),
                score: SUCCESS_WEIGHT * success_rate
                    + SPEED_WEIGHT * speed
                    + THRIFT_WEIGHT * thrift,
                success_rate,
                calls: health.map_or(0, CapabilityHealth::calls),
                median_latency_ms,
                mean_cost_usd,
                cost_tier: capability.cost.as_ref().and_then(|cost| cost.tier.clone()),
            }
        })
        .collect();
    ranked.sort_by(|left, right| {
        right
            .score
            .total_cmp(&left.score)
            .then_with(|| left.capability_id.cmp(&right.capability_id))
    });
    ranked
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn capability(id: &str, tier: &str) -> CapabilityRegistration {
        serde_json::from_value(json!({
            "capabilityId": id, "agentType": "ai", "version": "1", "displayName": id,
            "summary": "s", "inputContract": [], "outputContract": ["draft"],
            "cost": {"tier": tier}
        }))
        .unwrap()
    }

    fn call(succeeded: bool, latency_ms: u64, cost_usd: f64) -> CallOutcome {
        CallOutcome {
            succeeded,
            latency_ms: Some(latency_ms),
            cost_usd: Some(cost_usd),
        }
    }

    #[test]
    fn a_window_keeps_the_last_calls_only() {
        let mut table = HealthTable::default();
        for _ in 0..HEALTH_WINDOW {
            table.record("a.b", call(false, 10, 0.1));
        }
        assert_eq!(table.of("a.b").unwrap().successes(), 0);
        for _ in 0..HEALTH_WINDOW {
            table.record("a.b", call(true, 10, 0.1));
        }
        let health = table.of("a.b").unwrap();
        assert_eq!(health.calls() as usize, HEALTH_WINDOW);
        assert_eq!(
            health.successes() as usize,
            HEALTH_WINDOW,
            "the failures left the window"
        );
    }

    #[test]
    fn a_full_table_lets_the_least_recently_seen_go() {
        let mut table = HealthTable::default();
        for index in 0..MAX_CAPABILITIES_PER_TABLE {
            table.record(&format!("agent.c{index}"), call(true, 1, 0.0));
        }
        table.record("agent.c0", call(true, 1, 0.0));
        table.record("agent.newcomer", call(true, 1, 0.0));
        assert_eq!(table.len(), MAX_CAPABILITIES_PER_TABLE);
        assert!(table.of("agent.c0").is_some(), "seen again: kept");
        assert!(table.of("agent.c1").is_none(), "the stalest left");
        assert!(table.of("agent.newcomer").is_some());
    }

    #[test]
    fn failures_rank_a_capability_below_one_without_history() {
        let (flaky, unknown) = (
            capability("a.flaky", "low"),
            capability("b.unknown", "standard"),
        );
        let mut table = HealthTable::default();
        for _ in 0..5 {
            table.record("a.flaky", call(false, 100, 0.01));
        }
        let ranked = rank_by_health(&[&flaky, &unknown], &table);
        assert_eq!(ranked[0].capability_id, "b.unknown");
        assert_eq!(ranked[1].calls, 5);
        assert!((ranked[1].success_rate - 1.0 / 7.0).abs() < 1e-9);
        assert!((ranked[0].success_rate - 0.5).abs() < 1e-9);
    }

    #[test]
    fn with_equal_success_the_faster_and_cheaper_ranks_first() {
        let (slow, fast) = (
            capability("a.slow", "standard"),
            capability("b.fast", "standard"),
        );
        let mut table = HealthTable::default();
        for _ in 0..4 {
            table.record("a.slow", call(true, 9_000, 0.04));
            table.record("b.fast", call(true, 1_000, 0.01));
        }
        let ranked = rank_by_health(&[&slow, &fast], &table);
        assert_eq!(ranked[0].capability_id, "b.fast");
        assert_eq!(ranked[0].median_latency_ms, Some(1_000));
        assert!(ranked[0].score > ranked[1].score);
        // Without history, the declared tier decides: the cheaper first.
        let (dear, cheap) = (
            capability("a.dear", "premium"),
            capability("b.cheap", "low"),
        );
        let ranked = rank_by_health(&[&dear, &cheap], &HealthTable::default());
        assert_eq!(ranked[0].capability_id, "b.cheap");
    }
}
