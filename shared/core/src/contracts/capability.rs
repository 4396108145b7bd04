//! Capability registrations and the plan taxonomy kinds.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Who performs the capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AgentType {
    Ai,
    Human,
    /// Orchestrator-managed (e.g. a join of variant branches); never registered.
    Builtin,
}

/// Plan taxonomy.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    Default,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum NodeKind {
    Structuring,
    Branch,
    #[default]
    Execution,
    Transformation,
    Validation,
    Fallback,
}

impl NodeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeKind::Structuring => "structuring",
            NodeKind::Branch => "branch",
            NodeKind::Execution => "execution",
            NodeKind::Transformation => "transformation",
            NodeKind::Validation => "validation",
            NodeKind::Fallback => "fallback",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InputTraits {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub languages: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub formats: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub strengths: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limitations: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CapabilityCost {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_tokens: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeartbeatSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_seconds: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
}

/// The registration payload agents post (and `registry/capabilities/*.json` holds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CapabilityRegistration {
    pub capability_id: String,
    pub agent_type: AgentType,
    pub version: String,
    pub display_name: String,
    pub summary: String,
    #[serde(default)]
    pub kind: NodeKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_traits: Option<InputTraits>,
    pub input_contract: Vec<String>,
    pub output_contract: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<CapabilityCost>,
    /// The catalog model this capability is served by (first in the
    /// documented order of choice, before `preferredModels`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Catalog models that suit this capability, most preferred first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred_models: Vec<String>,
    /// Catalog models that answer in the chosen model's place, in order,
    /// when its provider keeps failing (else the catalog's own fallbacks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallback_models: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<HeartbeatSpec>,
    /// The capability's system instruction. Registry files may give it as a
    /// `promptTemplateFile` next to the registration; the loader inlines it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_template_file: Option<String>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
    /// The capability may ask one clarifying question instead of answering
    /// (its model is offered a `clarify` way out; the run waits for a person).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allows_clarify: bool,
    /// The capability can be asked for only some of its `outputContract`
    /// facets: a plan that needs fewer (nothing downstream, the caller's
    /// contract, its quality score, a policy or the revision loop reads
    /// the rest) asks its node for those alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial_outputs: bool,
    /// A branch condition: a JSONLogic expression over the capability's
    /// input facets (`{"var": "review.passed"}`). Its node runs only when
    /// the guard holds over the values it receives; otherwise the node is
    /// skipped, and so is what depends only on it. Checked when the
    /// capability is registered: known operators, and only input facets read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard: Option<Value>,
    /// Human capabilities: UI copy for task surfaces (e.g. `title`,
    /// `summary`, `submitLabel`), kept verbatim and shown with the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instruction_templates: Option<Map<String, Value>>,
    /// Human capabilities: routing defaults for operator tooling (e.g. a
    /// queue or role, `maxNotifications`), kept verbatim and shown with the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignment_defaults: Option<Map<String, Value>>,
    /// Reviewers: where their answer carries a quality score, and its scale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality_score: Option<QualityScoreSpec>,
    /// The capability is a judge panel: its judges score in parallel, each
    /// a step of its own, and their consensus is the node's output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub panel: Option<crate::contracts::panels::PanelExecutor>,
    /// The tools (`registry/tools/*.json` names) the capability's model may
    /// call in its session.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Facets of its contracts (input or output) remembered when its run
    /// completes, and only then: each is written to the envelope's
    /// `memory.rememberTo` namespace, keyed by the facet's name, with the
    /// node as provenance (the value the node was given, or made). A run
    /// whose envelope names no such namespace remembers nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remember: Vec<String>,
    /// Model turns a session may take (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u32>,
    /// Tool calls one turn may ask for (default 8); more ends the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tool_calls_per_turn: Option<u32>,
    /// One turn's tool calls may run concurrently.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub parallel_tools: bool,
    /// A catch-all fallback (`kind: fallback`, empty contracts): the planner
    /// never places it; a node whose facets no other capability can make
    /// after it failed is handed to it, and that node's contracts become
    /// its contracts (for a person: the node's output contract is the task's
    /// form, and the task carries the failure).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub catch_all: bool,
    /// The capability is a remote A2A agent invoked as itself: its node's
    /// request (the context bundle, the output contract as the expected
    /// data part) is sent to the agent, and its answer is validated and
    /// re-prompted like a model's. No model of the catalog serves it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_agent: Option<RemoteAgent>,
}

/// A remote agent speaking A2A (1.0, JSON-RPC binding).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RemoteAgent {
    /// Where its agent card is (`https://…/.well-known/agent-card.json`);
    /// checked when the capability is registered, read again by the steps.
    pub card_url: String,
    /// How long one call may take, in seconds (default 120).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    /// Headers sent on every request to the agent (its card and its
    /// calls): credentials by reference (`{"secret": {"ssm": …}}`,
    /// `{"secret": {"secretsManager": …, "key": …}}`, `{"env": …}`), never
    /// a literal credential.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub headers: crate::basics::credentials::HeaderSources,
}

/// The provider name a remote agent's requests carry
/// (`ModelTarget::provider`): no catalog provider may take it.
pub const REMOTE_AGENT_PROVIDER: &str = "a2a";

/// Where a reviewer's answer holds its score: a JSON pointer into the
/// answer and the top of its scale (`1` for 0–1, `10` for 0–10). Scores are
/// normalised to 0–1 for `constraints.qualityThreshold`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QualityScoreSpec {
    pub pointer: String,
    #[serde(default = "unit_scale")]
    pub scale: f64,
    /// Where the answer judges each acceptance criterion
    /// (`[{criterion, pass, evidence}]`), when it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acceptance_pointer: Option<String>,
}

fn unit_scale() -> f64 {
    1.0
}

impl QualityScoreSpec {
    /// The normalised (0–1) score in `answer`, when it has one.
    pub fn score_of(&self, answer: &Value) -> Option<f64> {
        let raw = answer.pointer(&self.pointer)?.as_f64()?;
        (self.scale > 0.0).then(|| (raw / self.scale).clamp(0.0, 1.0))
    }
}

impl CapabilityRegistration {
    /// A catch-all fallback takes the contracts of the node it takes over:
    /// it declares none of its own, is of kind `fallback`, and is a person
    /// or a model (not a panel, an agent with tools, or a builtin). A
    /// refusal is its JSON path and why.
    pub fn check_catch_all(&self) -> Result<(), (String, String)> {
        let refuse = |path: &str, message: &str| Err((path.to_string(), message.to_string()));
        if self.kind != NodeKind::Fallback {
            return refuse(
                "$.kind",
                "a catch-all capability is of kind `fallback` (it runs only when a node fails)",
            );
        }
        if !self.input_contract.is_empty() || !self.output_contract.is_empty() {
            let path = if self.input_contract.is_empty() {
                "$.outputContract"
            } else {
                "$.inputContract"
            };
            return refuse(
                path,
                "a catch-all capability declares no facets: it takes the contracts of the node it takes over ([])",
            );
        }
        if self.panel.is_some() || !self.tools.is_empty() {
            return refuse(
                "$.catchAll",
                "a catch-all capability is a person or a model: no panel, no tools",
            );
        }
        Ok(())
    }

    /// Every facet it remembers is one of its contracts'. A refusal is the
    /// JSON path inside `$.remember` and why.
    pub fn check_remember(&self) -> Result<(), (String, String)> {
        for (index, facet) in self.remember.iter().enumerate() {
            if !self.input_contract.contains(facet) && !self.output_contract.contains(facet) {
                return Err((
                    format!("$.remember[{index}]"),
                    format!("`{facet}` is in neither the input nor the output contract"),
                ));
            }
        }
        Ok(())
    }

    /// Its guard, if any, is JSONLogic the evaluator knows that reads only
    /// its input facets. A refusal is the JSON path inside `$.guard` and why.
    pub fn check_guard(&self) -> Result<(), (String, String)> {
        let Some(guard) = &self.guard else {
            return Ok(());
        };
        crate::basics::logic::check_expression_reads_only(guard, &self.input_contract)
            .map_err(|problem| (format!("$.guard{}", problem.inner_path), problem.message))
    }

    /// Parses a registration payload; an error is `(JSON path, message)`.
    pub fn parse_value(value: &Value) -> Result<Self, (String, String)> {
        serde_path_to_error::deserialize(value).map_err(|error| {
            (
                crate::contracts::envelope::normalise_serde_path(error.path()),
                error.inner().to_string(),
            )
        })
    }

    /// Planner cost rank: lower is cheaper. Unknown tiers sort last.
    pub fn cost_rank(&self) -> u8 {
        match self.cost.as_ref().and_then(|cost| cost.tier.as_deref()) {
            Some("low") | Some("economy") => 0,
            Some("standard") | None => 1,
            Some("premium") | Some("high") => 2,
            Some(_) => 3,
        }
    }
}

/// Heartbeat interval assumed when a registration states none: agents
/// re-register every 5 minutes by default.
pub const DEFAULT_HEARTBEAT_INTERVAL_SECONDS: u64 = 300;
/// Missed intervals after which a registration without a stated timeout is
/// inactive.
pub const MISSED_HEARTBEATS_BEFORE_INACTIVE: u64 = 3;

/// Whether the planner may use a registered capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CapabilityStatus {
    Active,
    /// Its heartbeat timeout elapsed; planners skip it until it registers again.
    Inactive,
}

/// A capability an agent registered at run time, with its heartbeat record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisteredCapability {
    pub registration: CapabilityRegistration,
    /// First registration (kept across re-registrations).
    pub registered_at_millis: u64,
    /// Latest registration or heartbeat.
    pub last_seen_at_millis: u64,
}

impl RegisteredCapability {
    /// How long after the last heartbeat the registration stays active:
    /// `heartbeat.timeoutSeconds`, else 3 × `heartbeat.intervalSeconds`
    /// (default interval 300 s).
    pub fn heartbeat_timeout_millis(&self) -> u64 {
        let heartbeat = self.registration.heartbeat.as_ref();
        let timeout_seconds = heartbeat
            .and_then(|heartbeat| heartbeat.timeout_seconds)
            .unwrap_or_else(|| {
                heartbeat
                    .and_then(|heartbeat| heartbeat.interval_seconds)
                    .unwrap_or(DEFAULT_HEARTBEAT_INTERVAL_SECONDS)
                    .saturating_mul(MISSED_HEARTBEATS_BEFORE_INACTIVE)
            });
        timeout_seconds.saturating_mul(1000)
    }

    /// Active until the heartbeat timeout has elapsed since it was last seen.
    pub fn status_at(&self, now_millis: u64) -> CapabilityStatus {
        let deadline = self
            .last_seen_at_millis
            .saturating_add(self.heartbeat_timeout_millis());
        if now_millis > deadline {
            CapabilityStatus::Inactive
        } else {
            CapabilityStatus::Active
        }
    }
}

#[cfg(test)]
mod liveness_tests {
    use super::*;

    fn registered(heartbeat: Option<HeartbeatSpec>) -> RegisteredCapability {
        RegisteredCapability {
            registration: CapabilityRegistration {
                capability_id: "writer.en".into(),
                agent_type: AgentType::Ai,
                version: "1".into(),
                display_name: "Writer".into(),
                summary: "Writes.".into(),
                kind: NodeKind::Execution,
                input_traits: None,
                input_contract: vec![],
                output_contract: vec!["copy".into()],
                cost: None,
                model: None,
                preferred_models: vec![],
                fallback_models: vec![],
                heartbeat,
                instructions: None,
                prompt_template_file: None,
                metadata: Map::new(),
                allows_clarify: false,
                partial_outputs: false,
                guard: None,
                instruction_templates: None,
                assignment_defaults: None,
                quality_score: None,
                panel: None,
                tools: Vec::new(),
                max_iterations: None,
                max_tool_calls_per_turn: None,
                parallel_tools: false,
                remember: Vec::new(),
                catch_all: false,
                remote_agent: None,
            },
            registered_at_millis: 1_000,
            last_seen_at_millis: 10_000,
        }
    }

    #[test]
    fn a_registration_goes_inactive_when_its_heartbeat_timeout_elapses() {
        // Stated timeout wins.
        let with_timeout = registered(Some(HeartbeatSpec {
            interval_seconds: Some(60),
            timeout_seconds: Some(90),
        }));
        assert_eq!(with_timeout.heartbeat_timeout_millis(), 90_000);
        assert_eq!(with_timeout.status_at(100_000), CapabilityStatus::Active);
        assert_eq!(with_timeout.status_at(100_001), CapabilityStatus::Inactive);
        // Else three missed intervals.
        let with_interval = registered(Some(HeartbeatSpec {
            interval_seconds: Some(60),
            timeout_seconds: None,
        }));
        assert_eq!(with_interval.heartbeat_timeout_millis(), 180_000);
        // Else three missed default intervals of 300 s.
        assert_eq!(registered(None).heartbeat_timeout_millis(), 900_000);
        assert_eq!(
            registered(None).status_at(10_000 + 900_001),
            CapabilityStatus::Inactive
        );
    }
}
