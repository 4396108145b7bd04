//! The two-branch scenario every store runs: `check.brief` reviews the
//! brief; `revise.brief` runs only when the review failed, `approve.brief`
//! only when it passed (guards registered with the capabilities), and
//! `announce.brief` depends only on `approve.brief`. The model is a test
//! double ([`ReviewSays`]) that decides the review; every other answer is
//! an instance of its own output schema. [`run_two_branches`] drives one
//! run on the services it is given and reports what ran and what was
//! skipped, read back from the store.

use std::sync::Arc;

use async_trait::async_trait;
use baton_core::basics::ids::RunKey;
use baton_core::catalog::registry::Registry;
use baton_core::contracts::capability::CapabilityRegistration;
use baton_core::contracts::facet::{Facet, FacetDirection};
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{NodeStatus, RunStatus, TokenUsage};
use baton_runtime::error::LlmError;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta, RunStore};
use baton_runtime::workers::LocalRunner;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc::UnboundedSender;

use crate::TestServices;

fn capability(id: &str, inputs: &[&str], outputs: &[&str], guard: Option<Value>) -> Value {
    let mut registration = json!({
        "capabilityId": id, "agentType": "ai", "version": "1", "displayName": id, "summary": id,
        "inputContract": inputs, "outputContract": outputs
    });
    if let Some(guard) = guard {
        registration["guard"] = guard;
    }
    registration
}

/// Facets `brief`, `review` (`{passed}`), `revised`, `approved`,
/// `announcement`, and the four capabilities of the scenario.
pub fn branching_registry() -> Arc<Registry> {
    let mut registry = Registry::default();
    let text =
        json!({"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}});
    let review = json!({"type": "object", "required": ["passed"],
        "properties": {"passed": {"type": "boolean"}}});
    for (name, schema) in [
        ("brief", text.clone()),
        ("review", review),
        ("revised", text.clone()),
        ("approved", text.clone()),
        ("announcement", text),
    ] {
        let facet = Facet {
            name: name.into(),
            title: name.into(),
            description: name.into(),
            schema,
            semantics: String::new(),
            direction: FacetDirection::Bidirectional,
            required_by_default: false,
            drives_revisions: false,
            merge: Default::default(),
            widget: None,
            metadata: Map::new(),
        };
        registry.add_facet(facet, "branching").unwrap();
    }
    for registration in [
        capability("check.brief", &["brief"], &["review"], None),
        capability(
            "revise.brief",
            &["brief", "review"],
            &["revised"],
            Some(json!({"!": {"var": "review.passed"}})),
        ),
        capability(
            "approve.brief",
            &["brief", "review"],
            &["approved"],
            Some(json!({"var": "review.passed"})),
        ),
        capability("announce.brief", &["approved"], &["announcement"], None),
    ] {
        let registration: CapabilityRegistration = serde_json::from_value(registration).unwrap();
        registry.add_capability(registration, "branching").unwrap();
    }
    Arc::new(registry)
}

/// The envelope: the brief in, any of the three results out (none required).
pub fn branching_envelope() -> Value {
    json!({
        "objective": "check the brief, then revise it or approve and announce it",
        "inputs": {"brief": {"text": "the brief"}},
        "outputContract": {"schema": {"type": "object", "required": [],
            "properties": {"revised": {"type": "object"}, "approved": {"type": "object"},
                "announcement": {"type": "object"}}}}
    })
}

/// Test double for the model endpoint: a request for the `review` facet is
/// answered `{"review": {"passed": <the value>}}`; any other with an
/// instance of its own output schema.
pub struct ReviewSays(pub bool);

#[async_trait]
impl LlmProvider for ReviewSays {
    fn model_name(&self) -> String {
        "review-says".into()
    }
    async fn complete(
        &self,
        request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        let asks_for_review = request.output_schema["properties"].get("review").is_some();
        let content = if asks_for_review {
            json!({"review": {"passed": self.0}})
        } else {
            scripted_llm::generate_instance(&request.output_schema, "review-says")
        };
        Ok(ModelAnswer {
            content: content.to_string(),
            usage: TokenUsage::default(),
            model: "review-says".into(),
        })
    }
}

/// What one run of the scenario did, read back from the store.
#[derive(Debug)]
pub struct BranchesTaken {
    pub status: RunStatus,
    pub output: Value,
    /// Capability ids whose nodes completed, sorted.
    pub completed: Vec<String>,
    /// Capability ids whose nodes were skipped, sorted.
    pub skipped: Vec<String>,
    /// The stored `node_skipped` frames' payloads, in order.
    pub skipped_frames: Vec<Value>,
}

/// Runs the scenario once on `store` (the review says `passed`; the steps
/// go through an in-memory queue, as in the other whole-run tests) and
/// reads back what happened.
pub async fn run_two_branches(store: Arc<dyn RunStore>, passed: bool) -> BranchesTaken {
    let queue = Arc::new(baton_runtime::memory::InMemoryStepQueue::new());
    let services = TestServices::with_model(Arc::new(ReviewSays(passed)))
        .registry(branching_registry())
        .store(store.clone())
        .queue(queue.clone())
        .build()
        .services;
    let submitted = services
        .runs
        .submit("t", &branching_envelope())
        .await
        .unwrap();
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue,
    };
    let status = runner
        .run_until_settled("t", &submitted.run_id)
        .await
        .unwrap();
    let key = RunKey::new("t", &submitted.run_id);
    let state = store.load_run(key).await.unwrap().unwrap().state;
    let plan = state.plan.clone().unwrap();
    let with_status = |wanted: NodeStatus| {
        let mut ids: Vec<String> = plan
            .nodes
            .iter()
            .filter(|node| state.nodes[&node.node_id].status() == wanted)
            .map(|node| node.capability_id.clone())
            .collect();
        ids.sort();
        ids
    };
    let frames = store.read_events(key, 0, 10_000).await.unwrap();
    crate::assert_frames_match_schemas(&frames);
    BranchesTaken {
        status,
        output: state.output.clone().unwrap_or(Value::Null),
        completed: with_status(NodeStatus::Completed),
        skipped: with_status(NodeStatus::Skipped),
        skipped_frames: frames
            .iter()
            .filter(|frame| frame.event_type.as_str() == "node_skipped")
            .filter_map(|frame| frame.payload_value())
            .collect(),
    }
}

/// Runs the scenario both ways on fresh services over `store` and checks
/// that each run took exactly one branch.
pub async fn two_branches_take_one(store: Arc<dyn RunStore>) {
    let failed = run_two_branches(store.clone(), false).await;
    assert_eq!(failed.status, RunStatus::Completed, "{failed:?}");
    assert_eq!(
        failed.completed,
        ["check.brief", "revise.brief"],
        "{failed:?}"
    );
    assert_eq!(
        failed.skipped,
        ["announce.brief", "approve.brief"],
        "{failed:?}"
    );
    assert!(failed.output.get("revised").is_some(), "{failed:?}");
    assert!(failed.output.get("approved").is_none(), "{failed:?}");
    assert_eq!(failed.skipped_frames.len(), 2, "{failed:?}");
    assert_eq!(failed.skipped_frames[0]["reason"], "guard_false");
    assert_eq!(
        failed.skipped_frames[0]["read"],
        json!({"review": {"passed": false}})
    );
    assert_eq!(failed.skipped_frames[1]["reason"], "upstream_skipped");

    let passed = run_two_branches(store, true).await;
    assert_eq!(passed.status, RunStatus::Completed, "{passed:?}");
    assert_eq!(
        passed.completed,
        ["announce.brief", "approve.brief", "check.brief"],
        "{passed:?}"
    );
    assert_eq!(passed.skipped, ["revise.brief"], "{passed:?}");
    assert!(passed.output.get("announcement").is_some(), "{passed:?}");
    assert!(passed.output.get("revised").is_none(), "{passed:?}");
}
