//! The plan graph: nodes bound to capabilities with compiled facet
//! contracts, and facet-labelled edges from producer to consumer.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::capability::{AgentType, NodeKind};
use crate::compiler::CompiledContract;

/// One node of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanNode {
    pub node_id: String,
    pub capability_id: String,
    pub label: String,
    pub kind: NodeKind,
    pub agent_type: AgentType,
    /// True when the capability was derived rather than declared (§5.6).
    #[serde(default)]
    pub derived: bool,
    pub input_facets: Vec<String>,
    pub output_facets: Vec<String>,
    pub input_contract: CompiledContract,
    pub output_contract: CompiledContract,
    /// The merged system instruction: capability prompt plus facet semantics.
    pub instructions: String,
    /// Set on orchestrator-managed nodes, which run no capability.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub builtin: Option<BuiltinOperation>,
    /// Set on variant branches: this is branch `index` of `count`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<VariantSlot>,
    /// The capability may ask a clarifying question instead of answering.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allows_clarify: bool,
    /// Human capabilities: the registration's `instructionTemplates` and
    /// `assignmentDefaults`, handed to task surfaces verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_surface: Option<TaskSurface>,
    /// Reviewers: where their answer carries a quality score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality_score: Option<crate::capability::QualityScoreSpec>,
    /// Panels: the judges and how they decide (each judge is a step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub panel: Option<crate::panels::PanelExecutor>,
    /// Agents: the tools offered and the loop's limits (each model turn
    /// and each tool call is a step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<crate::agents::AgentLoopSettings>,
    /// A chat run's node: it answers in free text, after the thread's
    /// earlier exchanges, as `{message, threadId}`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub chat: bool,
}

/// What a human capability's registration gives task surfaces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskSurface {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instruction_templates: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignment_defaults: Option<serde_json::Map<String, serde_json::Value>>,
}

/// What an orchestrator-managed node computes from its upstream outputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "operation", rename_all = "snake_case")]
pub enum BuiltinOperation {
    /// Concatenates the array `facet` of every `sources` node, in order.
    ConcatArrays { facet: String, sources: Vec<String> },
}

/// Position of a variant branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VariantSlot {
    pub index: u32,
    pub count: u32,
}

/// Capability id recorded on join nodes (orchestrator-managed, not registered).
pub const BUILTIN_JOIN_CAPABILITY: &str = "baton.join";

/// A facet flowing from a producer node to a consumer node.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct PlanEdge {
    pub from: String,
    pub to: String,
    pub facet: String,
}

/// A validated or candidate plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanGraph {
    pub plan_version: u32,
    /// Which planner produced it (`deterministic` or an LLM planner).
    pub planner_runtime: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planner_model: Option<String>,
    pub nodes: Vec<PlanNode>,
    pub edges: Vec<PlanEdge>,
    /// Facets the envelope's inputs supply.
    pub supplied_facets: Vec<String>,
    /// Facets the caller's output contract asks for.
    pub goal_facets: Vec<String>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
}

impl PlanGraph {
    pub fn node(&self, node_id: &str) -> Option<&PlanNode> {
        self.nodes.iter().find(|node| node.node_id == node_id)
    }

    /// Node ids the given node waits for.
    pub fn upstream_of(&self, node_id: &str) -> BTreeSet<&str> {
        self.edges
            .iter()
            .filter(|edge| edge.to == node_id)
            .map(|edge| edge.from.as_str())
            .collect()
    }

    /// Kahn's algorithm; `None` when the edges form a cycle or name unknown nodes.
    pub fn topological_order(&self) -> Option<Vec<String>> {
        let mut incoming: BTreeMap<&str, usize> = self
            .nodes
            .iter()
            .map(|node| (node.node_id.as_str(), 0))
            .collect();
        let mut seen_pairs = BTreeSet::new();
        for edge in &self.edges {
            if !incoming.contains_key(edge.from.as_str()) {
                return None;
            }
            if seen_pairs.insert((edge.from.as_str(), edge.to.as_str())) {
                *incoming.get_mut(edge.to.as_str())? += 1;
            }
        }
        let mut ready: VecDeque<&str> = self
            .nodes
            .iter()
            .map(|node| node.node_id.as_str())
            .filter(|id| incoming.get(id) == Some(&0))
            .collect();
        let mut order = Vec::with_capacity(self.nodes.len());
        while let Some(node_id) = ready.pop_front() {
            order.push(node_id.to_string());
            for (from, to) in &seen_pairs {
                if *from == node_id
                    && let Some(count) = incoming.get_mut(to)
                {
                    *count -= 1;
                    if *count == 0 {
                        ready.push_back(to);
                    }
                }
            }
        }
        (order.len() == self.nodes.len()).then_some(order)
    }

    /// The node whose output supplies `facet` to `consumer`, if an edge says so.
    pub fn producer_for(&self, consumer: &str, facet: &str) -> Option<&str> {
        self.edges
            .iter()
            .find(|edge| edge.to == consumer && edge.facet == facet)
            .map(|edge| edge.from.as_str())
    }

    /// The last node (in node order) producing `facet`: it holds the final value.
    pub fn final_producer_of(&self, facet: &str) -> Option<&PlanNode> {
        self.nodes
            .iter()
            .rev()
            .find(|node| node.output_facets.iter().any(|name| name == facet))
    }

    /// Longest path length in nodes (1 for a single node).
    pub fn depth(&self) -> usize {
        let Some(order) = self.topological_order() else {
            return 0;
        };
        let mut depth_by_node: BTreeMap<&str, usize> = BTreeMap::new();
        for node_id in &order {
            let depth = self
                .upstream_of(node_id)
                .iter()
                .filter_map(|upstream| depth_by_node.get(upstream))
                .max()
                .map_or(1, |deepest| deepest + 1);
            depth_by_node.insert(node_id, depth);
        }
        depth_by_node.values().copied().max().unwrap_or(0)
    }
}
