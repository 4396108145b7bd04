//! The plan graph: nodes bound to capabilities with compiled facet
//! contracts, and facet-labelled edges from producer to consumer.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::contracts::capability::{AgentType, NodeKind};
use crate::contracts::compiler::CompiledContract;

/// One node of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanNode {
    pub node_id: String,
    pub capability_id: String,
    pub label: String,
    pub kind: NodeKind,
    /// What runs the node (on the wire: `agentType` and, for some, one of
    /// `builtin`, `panel`, `agent`, `chat`).
    #[serde(flatten)]
    pub executor: NodeExecutor,
    /// True when the capability was derived rather than declared (§5.6).
    #[serde(default)]
    pub derived: bool,
    pub input_facets: Vec<String>,
    pub output_facets: Vec<String>,
    pub input_contract: CompiledContract,
    pub output_contract: CompiledContract,
    /// The merged system instruction: capability prompt plus facet
    /// semantics. Shared: plans of one capability and facets hold one copy
    /// (`share_contract_schemas`).
    pub instructions: std::sync::Arc<str>,
    /// Set on variant branches: this is branch `index` of `count`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<VariantSlot>,
    /// The capability may ask a clarifying question instead of answering.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allows_clarify: bool,
    /// A branch condition over the node's input facets (JSONLogic): the
    /// node runs only when it holds, else it is skipped. Checked when the
    /// plan is validated (`$.nodes[i].guard`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard: Option<std::sync::Arc<serde_json::Value>>,
    /// Human capabilities: the registration's `instructionTemplates` and
    /// `assignmentDefaults`, handed to task surfaces verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_surface: Option<TaskSurface>,
    /// Reviewers: where their answer carries a quality score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality_score: Option<crate::contracts::capability::QualityScoreSpec>,
    /// Facets of its contracts the run remembers when it completes (the
    /// capability's `remember`), carried by the plan so the ending step
    /// needs no registry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remember: Vec<String>,
    /// The catalog model serving the node (`model_choice`); absent: the
    /// deployment's default model, or no model at all (people, builtins,
    /// panels, whose judges name their own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<crate::contracts::model_request::ModelTarget>,
}

/// What runs a planned node: exactly one executor, so a node that is both
/// a panel and a person, or built in and an agent, cannot be written down
/// (a stored or drafted plan that says so is refused when read).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "ExecutorFields", into = "ExecutorFields")]
pub enum NodeExecutor {
    /// One model call, its answer judged against the output contract.
    Model,
    /// A person answers (a human task).
    Human,
    /// The orchestrator computes it from upstream outputs; no capability.
    Builtin(BuiltinOperation),
    /// A judge panel: each judge's call is a step.
    Panel(crate::contracts::panels::PanelExecutor),
    /// Model turns and tool calls, each a step.
    AgentSession(crate::records::agents::AgentLoopSettings),
    /// A chat run's node: an agent session answering in free text, after
    /// the thread's earlier exchanges, as `{message, threadId}`.
    Chat(crate::records::agents::AgentLoopSettings),
}

impl NodeExecutor {
    /// The executor of a capability's node: its panel, else its tool loop
    /// (a person's capability never runs one), else a person, else a model.
    pub fn for_capability(
        capability: &crate::contracts::capability::CapabilityRegistration,
    ) -> Self {
        if let Some(panel) = &capability.panel {
            return NodeExecutor::Panel(panel.clone());
        }
        match (
            capability.agent_type,
            crate::records::agents::AgentLoopSettings::of(capability),
        ) {
            (AgentType::Human, _) => NodeExecutor::Human,
            (_, Some(settings)) => NodeExecutor::AgentSession(settings),
            _ => NodeExecutor::Model,
        }
    }

    /// Who performs it, as frames and the snapshot say.
    pub fn agent_type(&self) -> AgentType {
        match self {
            NodeExecutor::Human => AgentType::Human,
            NodeExecutor::Builtin(_) => AgentType::Builtin,
            NodeExecutor::Model
            | NodeExecutor::Panel(_)
            | NodeExecutor::AgentSession(_)
            | NodeExecutor::Chat(_) => AgentType::Ai,
        }
    }
}

/// `NodeExecutor` as plans have always been written: `agentType` plus at
/// most one of `builtin`, `panel`, `agent` (with `chat` for a chat node).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExecutorFields {
    agent_type: AgentType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    builtin: Option<BuiltinOperation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    panel: Option<crate::contracts::panels::PanelExecutor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    agent: Option<crate::records::agents::AgentLoopSettings>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    chat: bool,
}

/// Why a node's executor fields name no executor.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecutorShapeError {
    #[error("a node runs one executor: `panel`, `agent` (with `chat` for a chat node) or neither")]
    SeveralExecutors,
    #[error(
        "an `{0}` node cannot carry that executor (`builtin` goes with agentType builtin only; a person's node carries none)"
    )]
    NotForThisKind(String),
}

impl TryFrom<ExecutorFields> for NodeExecutor {
    type Error = ExecutorShapeError;

    fn try_from(fields: ExecutorFields) -> Result<Self, ExecutorShapeError> {
        use AgentType::{Ai, Builtin, Human};
        match fields {
            ExecutorFields {
                agent_type: Builtin,
                builtin: Some(operation),
                panel: None,
                agent: None,
                chat: false,
            } => Ok(NodeExecutor::Builtin(operation)),
            ExecutorFields {
                agent_type: Human,
                builtin: None,
                panel: None,
                agent: None,
                chat: false,
            } => Ok(NodeExecutor::Human),
            ExecutorFields {
                agent_type: Ai,
                builtin: None,
                panel,
                agent,
                chat,
            } => match (panel, agent, chat) {
                (None, None, false) => Ok(NodeExecutor::Model),
                (Some(panel), None, false) => Ok(NodeExecutor::Panel(panel)),
                (None, Some(settings), false) => Ok(NodeExecutor::AgentSession(settings)),
                (None, Some(settings), true) => Ok(NodeExecutor::Chat(settings)),
                _ => Err(ExecutorShapeError::SeveralExecutors),
            },
            ExecutorFields { agent_type, .. } => Err(ExecutorShapeError::NotForThisKind(
                serde_json::to_value(agent_type)
                    .ok()
                    .and_then(|value| value.as_str().map(str::to_string))
                    .unwrap_or_default(),
            )),
        }
    }
}

impl From<NodeExecutor> for ExecutorFields {
    fn from(executor: NodeExecutor) -> Self {
        let mut fields = ExecutorFields {
            agent_type: executor.agent_type(),
            builtin: None,
            panel: None,
            agent: None,
            chat: false,
        };
        match executor {
            NodeExecutor::Model | NodeExecutor::Human => {}
            NodeExecutor::Builtin(operation) => fields.builtin = Some(operation),
            NodeExecutor::Panel(panel) => fields.panel = Some(panel),
            NodeExecutor::AgentSession(settings) => fields.agent = Some(settings),
            NodeExecutor::Chat(settings) => {
                fields.agent = Some(settings);
                fields.chat = true;
            }
        }
        fields
    }
}

impl PlanNode {
    /// Who performs the node.
    pub fn agent_type(&self) -> AgentType {
        self.executor.agent_type()
    }

    /// A built-in node's operation.
    pub fn builtin(&self) -> Option<&BuiltinOperation> {
        match &self.executor {
            NodeExecutor::Builtin(operation) => Some(operation),
            _ => None,
        }
    }

    /// A panel node's judges.
    pub fn panel(&self) -> Option<&crate::contracts::panels::PanelExecutor> {
        match &self.executor {
            NodeExecutor::Panel(panel) => Some(panel),
            _ => None,
        }
    }

    /// An agent session's (or chat node's) loop settings.
    pub fn agent(&self) -> Option<&crate::records::agents::AgentLoopSettings> {
        match &self.executor {
            NodeExecutor::AgentSession(settings) | NodeExecutor::Chat(settings) => Some(settings),
            _ => None,
        }
    }

    /// A chat run's node.
    pub fn is_chat(&self) -> bool {
        matches!(self.executor, NodeExecutor::Chat(_))
    }
}

/// What a human capability's registration gives task surfaces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskSurface {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instruction_templates: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignment_defaults: Option<serde_json::Map<String, serde_json::Value>>,
    /// The widgets of the output facets that name one, by facet.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub widgets: std::collections::BTreeMap<String, crate::contracts::facet_widgets::FacetWidget>,
}

impl TaskSurface {
    /// What a person's `capability` shows beside its task (its UI copy,
    /// routing hints and its output facets' widgets from `facets`), when
    /// it has any; none for a capability no person answers.
    pub fn of(
        capability: &crate::contracts::capability::CapabilityRegistration,
        facets: &crate::contracts::facet::FacetCatalog,
    ) -> Option<Self> {
        if capability.agent_type != AgentType::Human {
            return None;
        }
        let widgets: std::collections::BTreeMap<_, _> = capability
            .output_contract
            .iter()
            .filter_map(|name| {
                let widget = facets.get(name)?.widget.clone()?;
                Some((name.clone(), widget))
            })
            .collect();
        (capability.instruction_templates.is_some()
            || capability.assignment_defaults.is_some()
            || !widgets.is_empty())
        .then(|| TaskSurface {
            instruction_templates: capability.instruction_templates.clone(),
            assignment_defaults: capability.assignment_defaults.clone(),
            widgets,
        })
    }
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
    /// `roots` and every node downstream of them.
    pub fn downstream_closure(&self, roots: &[String]) -> std::collections::BTreeSet<&str> {
        let mut closed: std::collections::BTreeSet<&str> = self
            .nodes
            .iter()
            .filter(|node| roots.contains(&node.node_id))
            .map(|node| node.node_id.as_str())
            .collect();
        loop {
            let before = closed.len();
            for node in &self.nodes {
                if self
                    .upstream_of(&node.node_id)
                    .iter()
                    .any(|upstream| closed.contains(upstream))
                {
                    closed.insert(node.node_id.as_str());
                }
            }
            if closed.len() == before {
                return closed;
            }
        }
    }

    /// Replaces each node's contract schemas, digests and provenance with
    /// the copies `cache` shares (by digest): identical contracts across
    /// runs take memory once.
    pub fn share_contract_schemas(&mut self, cache: &crate::basics::schema::ValidatorCache) {
        for node in &mut self.nodes {
            node.instructions = cache.shared_text(&node.instructions);
            for contract in [&mut node.input_contract, &mut node.output_contract] {
                (contract.schema_key, contract.schema, contract.provenance) = cache.shared_parts(
                    &contract.schema_key,
                    &contract.schema,
                    &contract.provenance,
                );
            }
        }
    }

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

    /// Every node `node_id` depends on, directly or through others.
    pub fn upstream_closure(&self, node_id: &str) -> BTreeSet<&str> {
        let mut closure = BTreeSet::new();
        let mut pending: Vec<&str> = self.upstream_of(node_id).into_iter().collect();
        while let Some(next) = pending.pop() {
            if closure.insert(next) {
                pending.extend(self.upstream_of(next));
            }
        }
        closure
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read(fields: Value) -> Result<NodeExecutor, String> {
        serde_json::from_value::<NodeExecutor>(fields).map_err(|error| error.to_string())
    }

    #[test]
    fn each_executor_keeps_the_wire_format_plans_have_always_had() {
        let settings = json!({"tools": ["lookup"], "maxIterations": 3, "maxToolCallsPerTurn": 2});
        for fields in [
            json!({"agentType": "ai"}),
            json!({"agentType": "human"}),
            json!({"agentType": "builtin", "builtin": {"operation": "concat_arrays", "facet": "f", "sources": ["a"]}}),
            json!({"agentType": "ai", "agent": settings}),
            json!({"agentType": "ai", "agent": settings, "chat": true}),
        ] {
            let executor = read(fields.clone()).unwrap();
            let mut written = serde_json::to_value(&executor).unwrap();
            // `parallelTools` defaults; compare what was given.
            if let Some(agent) = written.get_mut("agent").and_then(Value::as_object_mut) {
                agent.remove("parallelTools");
            }
            assert_eq!(written, fields);
        }
        assert_eq!(
            read(json!({"agentType": "human"})).unwrap().agent_type(),
            AgentType::Human
        );
    }

    #[test]
    fn impossible_combinations_are_refused_when_read() {
        let settings = json!({"tools": ["lookup"], "maxIterations": 3, "maxToolCallsPerTurn": 2});
        let builtin = json!({"operation": "concat_arrays", "facet": "f", "sources": ["a"]});
        for fields in [
            json!({"agentType": "human", "agent": settings}),
            json!({"agentType": "ai", "builtin": builtin}),
            json!({"agentType": "builtin"}),
            json!({"agentType": "ai", "chat": true}),
            json!({"agentType": "builtin", "builtin": builtin, "agent": settings}),
        ] {
            assert!(read(fields.clone()).is_err(), "{fields} was accepted");
        }
        let error = read(json!({"agentType": "human", "agent": settings})).unwrap_err();
        assert!(error.contains("person"), "{error}");
    }
}
