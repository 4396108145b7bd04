//! Typed frames: one payload struct per frame type and one constructor each.
//! Every frame the engine or the shell writes is built here, so a frame's
//! shape is defined once. `frame_schema` renders the JSON Schema of a whole
//! frame (envelope fields and payload) from these types; the checked-in
//! `events/schemas/frames/<type>.schema.json` files are that output, and a
//! test keeps them equal.
//!
//! Frame types that no code writes yet (tool calls, HITL, judge progress…)
//! have an open-object payload until the work that writes them types it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::capability::{AgentType, NodeKind};
use crate::codes::{FailureCode, WarningCode};
use crate::compiler::FacetProvenance;
use crate::diagnostics::DiagnosticsBundle;
use crate::event::{EventDraft, EventType, FrameProvenance};
use crate::instant::Instant;
use crate::plan::{PlanEdge, PlanNode};
use crate::run::{RunState, RunStatus};
use crate::schema::SchemaViolation;

/// When a frame is written and under which plan version (0: no plan yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameStamp {
    timestamp: String,
    plan_version: u32,
}

impl FrameStamp {
    pub fn new(now: Instant, plan_version: u32) -> Self {
        FrameStamp {
            timestamp: now.rfc3339(),
            plan_version,
        }
    }

    /// Stamp for `state` at `now`: its current plan version.
    pub fn for_run(state: &RunState, now: Instant) -> Self {
        Self::new(now, state.plan_version())
    }

    pub fn timestamp(&self) -> &str {
        &self.timestamp
    }

    fn draft(&self, event_type: EventType) -> EventDraft {
        EventDraft::new(event_type, &self.timestamp, self.plan_version)
    }
}

fn to_payload<T: Serialize>(payload: &T) -> Value {
    serde_json::to_value(payload).unwrap_or(Value::Null)
}

fn node_scoped(draft: EventDraft, node: &PlanNode) -> EventDraft {
    draft.node(&node.node_id).provenance(FrameProvenance {
        input: node.input_contract.provenance.clone(),
        output: node.output_contract.provenance.clone(),
    })
}

/// `start`: the run was accepted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StartPayload {
    pub run_id: String,
    pub thread_id: String,
    pub correlation_id: String,
    pub objective: String,
}

pub fn start(stamp: &FrameStamp, payload: &StartPayload) -> EventDraft {
    stamp
        .draft(EventType::Start)
        .message("run accepted")
        .payload(to_payload(payload))
}

/// Which planner drafted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlannerKind {
    Deterministic,
    Llm,
}

/// The capabilities a planning attempt could choose from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CapabilitySnapshotSummary {
    pub count: usize,
    pub capability_ids: Vec<String>,
}

/// `plan_requested`: a planning attempt starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanRequestedPayload {
    /// 1 for the first draft; an LLM planner's re-prompts count on.
    pub attempt: u32,
    pub planner: PlannerKind,
    /// The envelope's policy keys the planner honours.
    pub policy_keys: Vec<String>,
    pub capability_snapshot: CapabilitySnapshotSummary,
}

pub fn plan_requested(stamp: &FrameStamp, payload: &PlanRequestedPayload) -> EventDraft {
    stamp
        .draft(EventType::PlanRequested)
        .message("planning")
        .payload(to_payload(payload))
}

/// `plan_rejected`: a draft failed validation (and, when `willRetry` is
/// false, no plan satisfies the contract).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanRejectedPayload {
    pub attempt: u32,
    /// True when the planner re-plans with these diagnostics.
    pub will_retry: bool,
    #[serde(flatten)]
    pub diagnostics: DiagnosticsBundle,
}

pub fn plan_rejected(stamp: &FrameStamp, payload: &PlanRejectedPayload) -> EventDraft {
    let message = if payload.will_retry {
        format!(
            "draft {} rejected; re-planning with its diagnostics",
            payload.attempt
        )
    } else {
        "no plan satisfies the contract".to_string()
    };
    stamp
        .draft(EventType::PlanRejected)
        .message(message)
        .payload(to_payload(payload))
}

/// One node as `plan_generated` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlannedNodeSummary {
    pub node_id: String,
    pub capability_id: String,
    pub label: String,
    pub kind: NodeKind,
    pub agent_type: AgentType,
    pub derived: bool,
    pub provides: Vec<String>,
    pub enforces: Vec<String>,
}

/// `plan_generated`: the validated plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanGeneratedPayload {
    pub plan_version: u32,
    pub planner_runtime: String,
    pub planner_model: Option<String>,
    pub nodes: Vec<PlannedNodeSummary>,
    pub edges: Vec<PlanEdge>,
    pub derived_capabilities: Vec<String>,
    pub branch_count: usize,
    pub normalization_injected: bool,
    pub metadata: Map<String, Value>,
    #[serde(flatten)]
    pub diagnostics: DiagnosticsBundle,
}

pub fn plan_generated(stamp: &FrameStamp, payload: &PlanGeneratedPayload) -> EventDraft {
    stamp
        .draft(EventType::PlanGenerated)
        .payload(to_payload(payload))
}

/// Who performs a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExecutorType {
    Ai,
    Human,
    /// Orchestrator-managed: computed by the engine, no capability called.
    Builtin,
}

/// What a human performer of a node needs: its contract, instructions and inputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeContractSummary {
    pub input_schema: Value,
    pub output_schema: Value,
    pub provenance: Vec<FacetProvenance>,
}

/// `node_start`: a node attempt begins (for a human node: the run parks on it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeStartPayload {
    pub capability_id: String,
    pub kind: NodeKind,
    pub executor_type: ExecutorType,
    pub attempt: u32,
    pub input_facets: Vec<String>,
    pub output_facets: Vec<String>,
    /// Human nodes: the contract the answer must meet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<NodeContractSummary>,
    /// Human nodes: the capability's instructions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Human nodes: the node's input facets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Map<String, Value>>,
}

pub fn node_start(stamp: &FrameStamp, node: &PlanNode, payload: &NodeStartPayload) -> EventDraft {
    node_scoped(stamp.draft(EventType::NodeStart), node)
        .message(node.label.clone())
        .payload(to_payload(payload))
}

/// `node_complete`: a node's answer met its output contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeCompletePayload {
    pub attempt: u32,
    pub output_facets: Vec<String>,
    pub output: Value,
}

pub fn node_complete(
    stamp: &FrameStamp,
    node: &PlanNode,
    payload: &NodeCompletePayload,
) -> EventDraft {
    node_scoped(stamp.draft(EventType::NodeComplete), node).payload(to_payload(payload))
}

/// `node_error`: a node failed for good.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeErrorPayload {
    pub code: FailureCode,
    pub attempt: u32,
}

pub fn node_error(
    stamp: &FrameStamp,
    node: &PlanNode,
    message: impl Into<String>,
    payload: &NodeErrorPayload,
) -> EventDraft {
    node_scoped(stamp.draft(EventType::NodeError), node)
        .message(message)
        .payload(to_payload(payload))
}

/// What a `validation_error` is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ValidationScope {
    /// A node's input against its compiled input contract.
    NodeInput,
    /// A node's answer against its compiled output contract.
    NodeOutput,
    /// The assembled output against the caller's schema.
    Output,
    /// The output against the contract's hard JSONLogic constraints.
    Constraints,
}

/// A hard constraint that does not hold on the output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BrokenConstraint {
    pub constraint_id: String,
    /// The JSONLogic expression.
    pub constraint: Value,
}

/// The errors of a `validation_error`: schema violations, or broken constraints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ValidationErrors {
    Schema(Vec<SchemaViolation>),
    Constraints(Vec<BrokenConstraint>),
}

/// `validation_error`: something failed its contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ValidationErrorPayload {
    pub scope: ValidationScope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    pub errors: ValidationErrors,
}

/// A node-scoped `validation_error` (input or output of `node`).
pub fn node_validation_error(
    stamp: &FrameStamp,
    node: &PlanNode,
    message: impl Into<String>,
    payload: &ValidationErrorPayload,
) -> EventDraft {
    node_scoped(stamp.draft(EventType::ValidationError), node)
        .message(message)
        .payload(to_payload(payload))
}

/// A run-level `validation_error` (the assembled output, the constraints).
pub fn run_validation_error(
    stamp: &FrameStamp,
    message: impl Into<String>,
    payload: &ValidationErrorPayload,
) -> EventDraft {
    stamp
        .draft(EventType::ValidationError)
        .message(message)
        .payload(to_payload(payload))
}

/// `warning`: something a reader should know; the run goes on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WarningPayload {
    pub code: WarningCode,
    /// `planner_fallback`: the planner that took over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<PlannerKind>,
    /// `planner_fallback`: how many drafts were rejected before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected_drafts: Option<u32>,
}

impl WarningPayload {
    pub fn of(code: WarningCode) -> Self {
        WarningPayload {
            code,
            fallback: None,
            rejected_drafts: None,
        }
    }
}

/// A `warning`, about `node_id` when given.
pub fn warning(
    stamp: &FrameStamp,
    node_id: Option<&str>,
    message: impl Into<String>,
    payload: &WarningPayload,
) -> EventDraft {
    let draft = stamp.draft(EventType::Warning);
    let draft = match node_id {
        Some(node_id) => draft.node(node_id),
        None => draft,
    };
    draft.message(message).payload(to_payload(payload))
}

/// `delta`: streamed answer text of a node (`message`); no payload.
pub fn delta(stamp: &FrameStamp, node_id: &str, text: String) -> EventDraft {
    stamp.draft(EventType::Delta).node(node_id).message(text)
}

/// `error`: the run ended without output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ErrorPayload {
    pub code: FailureCode,
    pub status: RunStatus,
}

pub fn error(stamp: &FrameStamp, message: impl Into<String>, payload: &ErrorPayload) -> EventDraft {
    stamp
        .draft(EventType::Error)
        .message(message)
        .payload(to_payload(payload))
}

/// Token totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenTotals {
    pub prompt: u64,
    pub completion: u64,
    pub total: u64,
}

/// `metrics`: the run's totals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetricsPayload {
    pub tokens: TokenTotals,
    pub nodes: usize,
}

pub fn metrics(stamp: &FrameStamp, payload: &MetricsPayload) -> EventDraft {
    stamp.draft(EventType::Metrics).payload(to_payload(payload))
}

/// `complete`: the run's output, valid for the caller's contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompletePayload {
    pub output: Value,
    pub status: RunStatus,
    /// The plan's symbolic satisfaction score.
    pub satisfaction_score: Option<f64>,
    /// The constraints' weighted score on the real output.
    pub observed_satisfaction: f64,
}

pub fn complete(stamp: &FrameStamp, payload: &CompletePayload) -> EventDraft {
    stamp
        .draft(EventType::Complete)
        .payload(to_payload(payload))
}

/// `log`: free text for operators (stores' conformance suite writes these).
pub fn log(stamp: &FrameStamp, message: impl Into<String>) -> EventDraft {
    stamp.draft(EventType::Log).message(message)
}

/// What a frame type's schema requires beyond the common fields.
struct FrameShape {
    payload: Option<Value>,
    payload_required: bool,
    message_required: bool,
    node_required: bool,
    provenance_required: bool,
}

fn payload_schema<T: JsonSchema>(definitions: &mut Map<String, Value>) -> Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null);
    if let Some(object) = schema.as_object_mut() {
        object.remove("$schema");
        if let Some(Value::Object(defs)) = object.remove("$defs") {
            definitions.extend(defs);
        }
    }
    schema
}

fn shape_of(event_type: EventType, definitions: &mut Map<String, Value>) -> FrameShape {
    let typed = |payload: Value| FrameShape {
        payload: Some(payload),
        payload_required: true,
        message_required: false,
        node_required: false,
        provenance_required: false,
    };
    let node_frame = |payload: Value| FrameShape {
        node_required: true,
        provenance_required: true,
        ..typed(payload)
    };
    match event_type {
        EventType::Start => typed(payload_schema::<StartPayload>(definitions)),
        EventType::PlanRequested => typed(payload_schema::<PlanRequestedPayload>(definitions)),
        EventType::PlanRejected => typed(payload_schema::<PlanRejectedPayload>(definitions)),
        EventType::PlanGenerated => typed(payload_schema::<PlanGeneratedPayload>(definitions)),
        EventType::NodeStart => node_frame(payload_schema::<NodeStartPayload>(definitions)),
        EventType::NodeComplete => node_frame(payload_schema::<NodeCompletePayload>(definitions)),
        EventType::NodeError => node_frame(payload_schema::<NodeErrorPayload>(definitions)),
        EventType::ValidationError => typed(payload_schema::<ValidationErrorPayload>(definitions)),
        EventType::Warning => typed(payload_schema::<WarningPayload>(definitions)),
        EventType::Error => typed(payload_schema::<ErrorPayload>(definitions)),
        EventType::Metrics => typed(payload_schema::<MetricsPayload>(definitions)),
        EventType::Complete => typed(payload_schema::<CompletePayload>(definitions)),
        EventType::Delta => FrameShape {
            payload: None,
            payload_required: false,
            message_required: true,
            node_required: true,
            provenance_required: false,
        },
        EventType::Log => FrameShape {
            payload: None,
            payload_required: false,
            message_required: true,
            node_required: false,
            provenance_required: false,
        },
        // Not written by any code yet: an open object until typed.
        _ => FrameShape {
            payload: Some(json!({"type": "object"})),
            payload_required: false,
            message_required: false,
            node_required: false,
            provenance_required: false,
        },
    }
}

/// The JSON Schema (draft 2020-12) of a whole `event_type` frame as the
/// stream carries it.
pub fn frame_schema(event_type: EventType) -> Value {
    let mut definitions = Map::new();
    let shape = shape_of(event_type, &mut definitions);
    let provenance = payload_schema::<FrameProvenance>(&mut definitions);
    let mut required = vec![
        "type",
        "id",
        "timestamp",
        "runId",
        "correlationId",
        "planVersion",
    ];
    let mut properties = Map::new();
    properties.insert("type".into(), json!({"const": event_type.as_str()}));
    properties.insert(
        "id".into(),
        json!({"type": "integer", "minimum": 1, "description": "the run's event sequence number"}),
    );
    properties.insert(
        "timestamp".into(),
        json!({"type": "string", "format": "date-time"}),
    );
    properties.insert("runId".into(), json!({"type": "string", "minLength": 1}));
    properties.insert(
        "correlationId".into(),
        json!({"type": "string", "minLength": 1}),
    );
    properties.insert(
        "planVersion".into(),
        json!({"type": "integer", "minimum": 0, "description": "the run's plan version when written; 0 before a plan exists"}),
    );
    properties.insert("nodeId".into(), json!({"type": "string", "minLength": 1}));
    properties.insert("message".into(), json!({"type": "string"}));
    properties.insert("facetProvenance".into(), provenance);
    if let Some(payload) = shape.payload {
        properties.insert("payload".into(), payload);
    }
    for (flag, name) in [
        (shape.payload_required, "payload"),
        (shape.message_required, "message"),
        (shape.node_required, "nodeId"),
        (shape.provenance_required, "facetProvenance"),
    ] {
        if flag {
            required.push(name);
        }
    }
    let mut schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": format!("https://baton.dev/schemas/frames/{}.schema.json", event_type.as_str()),
        "title": format!("`{}` frame", event_type.as_str()),
        "type": "object",
        "required": required,
        "properties": properties,
        "additionalProperties": false,
    });
    if !definitions.is_empty() {
        schema["$defs"] = Value::Object(definitions);
    }
    schema
}

/// Where the published frame schemas live, relative to the repository root.
pub const FRAME_SCHEMA_DIRECTORY: &str = "events/schemas/frames";

#[cfg(test)]
pub(crate) mod test_support {
    //! Checks frames against the published schema files (what clients read).

    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};

    use super::*;
    use crate::schema::{SharedValidator, compile_schema};

    fn schema_file(event_type: EventType) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(FRAME_SCHEMA_DIRECTORY)
            .join(format!("{}.schema.json", event_type.as_str()))
    }

    fn validator(event_type: EventType) -> SharedValidator {
        static CACHE: OnceLock<Mutex<HashMap<&'static str, SharedValidator>>> = OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        let mut cache = cache.lock().unwrap();
        cache
            .entry(event_type.as_str())
            .or_insert_with(|| {
                let path = schema_file(event_type);
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
                let schema: Value = serde_json::from_str(&text).unwrap();
                std::sync::Arc::new(compile_schema(&schema, &path.display().to_string()).unwrap())
            })
            .clone()
    }

    /// Stamps each draft as a store would and validates it against
    /// `events/schemas/frames/<type>.schema.json`.
    pub fn assert_frames_match_schemas(drafts: &[EventDraft]) {
        for (index, draft) in drafts.iter().enumerate() {
            let frame = draft
                .clone()
                .into_frame(index as u64 + 1, "run_1", "corr_1");
            let json = serde_json::to_value(&frame).unwrap();
            let violations = crate::schema::collect_violations(&validator(frame.event_type), &json);
            assert!(
                violations.is_empty(),
                "{} frame breaks its schema: {violations:?}\n{json:#}",
                frame.event_type.as_str()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_frame_schema_compiles_and_requires_the_common_fields() {
        for event_type in EventType::ALL {
            let schema = frame_schema(event_type);
            crate::schema::compile_schema(&schema, event_type.as_str()).unwrap();
            let required: Vec<&str> = schema["required"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
                .collect();
            for field in ["runId", "correlationId", "planVersion"] {
                assert!(required.contains(&field), "{event_type:?} {field}");
            }
        }
    }

    /// The checked-in schema files are what the Rust types generate.
    /// `BATON_UPDATE_SCHEMAS=1 cargo test -p baton-core frame_schema_files`
    /// rewrites them.
    #[test]
    fn frame_schema_files_match_the_rust_types() {
        let directory = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(FRAME_SCHEMA_DIRECTORY);
        let update = std::env::var("BATON_UPDATE_SCHEMAS").is_ok_and(|value| value == "1");
        let mut stale = Vec::new();
        for event_type in EventType::ALL {
            let path = directory.join(format!("{}.schema.json", event_type.as_str()));
            let generated = format!(
                "{}\n",
                serde_json::to_string_pretty(&frame_schema(event_type)).unwrap()
            );
            let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
            if on_disk != generated {
                if update {
                    std::fs::create_dir_all(&directory).unwrap();
                    std::fs::write(&path, generated).unwrap();
                } else {
                    stale.push(path.display().to_string());
                }
            }
        }
        assert!(
            stale.is_empty(),
            "frame schemas differ from the Rust types (rerun with BATON_UPDATE_SCHEMAS=1): {stale:?}"
        );
    }
}
