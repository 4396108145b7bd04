//! The JSON Schema of each frame type, rendered from the payload types
//! (schemars) and the common frame fields. The files in
//! `events/schemas/frames/` are this output; a test keeps them equal.

use schemars::JsonSchema;
use serde_json::{Map, Value, json};

use super::*;
use crate::wire::event::{EventType, FrameProvenance};

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
        EventType::NodeStart => {
            node_frame(payload_schema::<NodeStartPayload<'static>>(definitions))
        }
        EventType::NodeComplete => {
            node_frame(payload_schema::<NodeCompletePayload<'static>>(definitions))
        }
        EventType::NodeError => node_frame(payload_schema::<NodeErrorPayload>(definitions)),
        EventType::NodeSkipped => {
            let mut shape = node_frame(payload_schema::<NodeSkippedPayload>(definitions));
            shape.message_required = true;
            shape
        }
        EventType::ValidationError => typed(payload_schema::<ValidationErrorPayload>(definitions)),
        EventType::Warning => typed(payload_schema::<WarningPayload>(definitions)),
        EventType::Error => typed(payload_schema::<ErrorPayload>(definitions)),
        EventType::Metrics => typed(payload_schema::<MetricsPayload>(definitions)),
        EventType::Phase => typed(payload_schema::<PhasePayload>(definitions)),
        EventType::Session => typed(payload_schema::<super::SessionPayload>(definitions)),
        EventType::OntologyLoaded => {
            typed(payload_schema::<super::OntologyLoadedPayload>(definitions))
        }
        EventType::LastTurnContext => {
            typed(payload_schema::<super::LastTurnContextPayload>(definitions))
        }
        EventType::Handoff => FrameShape {
            node_required: true,
            ..typed(payload_schema::<HandoffPayload>(definitions))
        },
        EventType::Progress => FrameShape {
            node_required: true,
            ..typed(payload_schema::<ProgressPayload>(definitions))
        },
        EventType::MemoryRecalled => FrameShape {
            node_required: true,
            ..typed(payload_schema::<MemoryRecalledPayload>(definitions))
        },
        EventType::ToolCall => FrameShape {
            node_required: true,
            ..typed(payload_schema::<ToolCallPayload>(definitions))
        },
        EventType::ToolResult => FrameShape {
            node_required: true,
            ..typed(payload_schema::<ToolResultPayload>(definitions))
        },
        EventType::AgentState => FrameShape {
            node_required: true,
            ..typed(payload_schema::<AgentStatePayload>(definitions))
        },
        EventType::Message => FrameShape {
            message_required: true,
            ..typed(payload_schema::<MessagePayload>(definitions))
        },
        EventType::PlanReadyForReview => FrameShape {
            node_required: true,
            ..typed(payload_schema::<PlanReadyForReviewPayload>(definitions))
        },
        EventType::PlanReview => FrameShape {
            node_required: true,
            ..typed(payload_schema::<PlanReviewPayload>(definitions))
        },
        EventType::Complete => typed(payload_schema::<CompletePayload>(definitions)),
        EventType::Delta => FrameShape {
            payload: None,
            payload_required: false,
            message_required: true,
            node_required: true,
            provenance_required: false,
        },
        EventType::PolicyTriggered => typed(payload_schema::<PolicyTriggeredPayload>(definitions)),
        EventType::PlanUpdated => typed(payload_schema::<PlanUpdatedPayload>(definitions)),
        EventType::HitlRequest => typed(payload_schema::<HitlRequestPayload>(definitions)),
        EventType::HitlResolved => typed(payload_schema::<HitlResolvedPayload>(definitions)),
        EventType::Log => FrameShape {
            // A policy's `emit` action carries its event here.
            payload: Some(payload_schema::<PolicyEventPayload>(definitions)),
            payload_required: false,
            message_required: true,
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
    properties.insert(
        "parentRunId".into(),
        json!({"type": "string", "minLength": 1, "description": "a child run's frames: the run whose agent started it"}),
    );
    properties.insert(
        "traceId".into(),
        json!({"type": "string", "pattern": "^[0-9a-f]{32}$", "description": "the run's W3C trace id"}),
    );
    properties.insert(
        "spanId".into(),
        json!({"type": "string", "pattern": "^[0-9a-f]{16}$", "description": "the span that wrote the frame, when traces are exported"}),
    );
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
    use crate::basics::schema::{SharedValidator, compile_schema};

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
            let violations =
                crate::basics::schema::collect_violations(&validator(frame.event_type), &json);
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
        for &event_type in EventType::ALL {
            let schema = frame_schema(event_type);
            crate::basics::schema::compile_schema(&schema, event_type.as_str()).unwrap();
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

    /// The schema every frame shares lists every frame type, no more.
    #[test]
    fn the_common_frame_schema_names_every_frame_type() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../events/schemas/event-frame.schema.json");
        let schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let listed: std::collections::BTreeSet<&str> = schema["properties"]["type"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let types: std::collections::BTreeSet<&str> = EventType::ALL
            .iter()
            .map(|event_type| event_type.as_str())
            .collect();
        assert_eq!(listed, types, "{}", path.display());
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
        for &event_type in EventType::ALL {
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
