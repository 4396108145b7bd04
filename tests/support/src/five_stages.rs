//! A five-node linear pipeline (the benches' workload): five capabilities in
//! a line over six stage facets, and the envelope that plans all five.

use baton_core::catalog::registry::Registry;
use baton_core::contracts::capability::{AgentType, CapabilityRegistration, NodeKind};
use baton_core::contracts::facet::{Facet, FacetDirection};
use serde_json::{Map, Value, json};

/// The stages' facets, in order.
pub const STAGES: [&str; 6] = [
    "objective_notes",
    "strategy_brief",
    "draft_one",
    "review_one",
    "draft_two",
    "review_two",
];

/// Five capabilities in a line (strategist → writer → qa → writer_revision
/// → qa_final), each turning one stage's facet into the next; each role's
/// system instructions are `instructions(role)`.
pub fn five_stage_registry(instructions: &dyn Fn(&str) -> String) -> Registry {
    let mut registry = Registry::default();
    for (index, name) in STAGES.iter().enumerate() {
        let facet = Facet {
            name: name.to_string(),
            title: name.to_string(),
            description: format!("stage {index}"),
            schema: json!({"type": "object", "required": ["text", "score"], "properties": {
                "text": {"type": "string", "minLength": 1}, "score": {"type": "number", "minimum": 0, "maximum": 1}}}),
            semantics: String::new(),
            direction: FacetDirection::Bidirectional,
            required_by_default: true,
            drives_revisions: false,
            merge: Default::default(),
            widget: None,
            metadata: Map::new(),
        };
        registry.add_facet(facet, "bench").unwrap();
    }
    let roles = [
        ("strategist", NodeKind::Structuring),
        ("writer", NodeKind::Execution),
        ("qa", NodeKind::Validation),
        ("writer_revision", NodeKind::Execution),
        ("qa_final", NodeKind::Validation),
    ];
    for (index, (role, kind)) in roles.iter().enumerate() {
        let capability = CapabilityRegistration {
            capability_id: format!("bench.{role}"),
            agent_type: AgentType::Ai,
            version: "1".into(),
            display_name: role.to_string(),
            summary: format!("{role} stage"),
            kind: *kind,
            input_traits: None,
            input_contract: vec![STAGES[index].to_string()],
            output_contract: vec![STAGES[index + 1].to_string()],
            cost: None,
            model: None,
            preferred_models: vec![],
            fallback_models: vec![],
            heartbeat: None,
            instructions: Some(instructions(role)),
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
        };
        registry.add_capability(capability, "bench").unwrap();
    }
    registry
}

/// The envelope whose plan is the five nodes in a line.
pub fn five_stage_envelope() -> Value {
    json!({
        "objective": "bench",
        "inputs": {"objective_notes": {"text": "notes", "score": 0.5}},
        "outputContract": {"schema": {"type": "object", "required": ["review_two"], "properties": {"review_two": {"type": "object"}}}}
    })
}

/// Writes the five-stage registry as a registry directory under `root`
/// (`facets/`, `capabilities/`, and the repository's model catalog), for
/// the binaries' `--registry` flag.
pub fn write_five_stage_registry(root: &std::path::Path) {
    let registry = five_stage_registry(&|role| format!("You are the {role} stage."));
    for folder in ["facets", "capabilities"] {
        std::fs::create_dir_all(root.join(folder)).unwrap();
    }
    for name in STAGES {
        let facet = registry.facets.get(name).unwrap();
        std::fs::write(
            root.join("facets").join(format!("{name}.json")),
            serde_json::to_string_pretty(facet).unwrap(),
        )
        .unwrap();
    }
    for capability in registry.capabilities() {
        std::fs::write(
            root.join("capabilities")
                .join(format!("{}.json", capability.capability_id)),
            serde_json::to_string_pretty(capability).unwrap(),
        )
        .unwrap();
    }
    std::fs::copy(
        crate::repository_path("registry/models.json"),
        root.join("models.json"),
    )
    .unwrap();
}

/// Test double for the model endpoint of the five-stage workload: answers
/// each stage instantly with a schema-valid instance, after `extra_work`
/// rounds of hashing per call (0 but in the instruction gate's own test,
/// which slows the step on purpose).
pub struct InstantFiveStageModel {
    answers_by_schema_name: std::collections::HashMap<String, String>,
    extra_work: u64,
}

/// A schema-valid answer for each stage, by the request's schema name.
pub fn five_stage_answers(registry: &Registry) -> std::collections::HashMap<String, String> {
    registry
        .capabilities()
        .map(|capability| {
            let facet = &capability.output_contract[0];
            let schema = json!({"type": "object", "properties": {facet.clone(): registry.facets.get(facet).unwrap().schema.clone()}});
            (
                capability.capability_id.replace('.', "_"),
                scripted_llm::generate_instance(&schema, facet).to_string(),
            )
        })
        .collect()
}

impl InstantFiveStageModel {
    pub fn new(registry: &Registry, extra_work: u64) -> Self {
        InstantFiveStageModel {
            answers_by_schema_name: five_stage_answers(registry),
            extra_work,
        }
    }
}

/// `rounds` of work the optimiser cannot remove.
pub fn spend_work(rounds: u64) {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    for round in 0..rounds {
        state = std::hint::black_box(state.rotate_left(5) ^ round).wrapping_mul(0x0100_0000_01b3);
    }
    std::hint::black_box(state);
}

#[async_trait::async_trait]
impl baton_runtime::ports::LlmProvider for InstantFiveStageModel {
    fn model_name(&self) -> String {
        "instant".into()
    }
    async fn complete(
        &self,
        request: &baton_core::state::context::ModelRequest,
        deltas: tokio::sync::mpsc::UnboundedSender<baton_runtime::ports::ModelDelta>,
    ) -> Result<baton_runtime::ports::ModelAnswer, baton_runtime::error::LlmError> {
        spend_work(self.extra_work);
        let content = self
            .answers_by_schema_name
            .get(&request.schema_name)
            .cloned()
            .unwrap_or_default();
        let _ = deltas.send(baton_runtime::ports::ModelDelta::Text(content.clone()));
        Ok(baton_runtime::ports::ModelAnswer {
            content,
            usage: baton_core::state::run::TokenUsage {
                prompt_tokens: 10,
                completion_tokens: 10,
                cached_prompt_tokens: 0,
                cache_write_prompt_tokens: 0,
            },
            model: "instant".into(),
        })
    }
}
