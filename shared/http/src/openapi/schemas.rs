//! The component schemas of the OpenAPI document: the JSON Schemas
//! `schemars` generates for the request types (as serde reads them) and the
//! response types (as serde writes them), their shared definitions hoisted
//! into `components.schemas`.

use serde_json::{Map, Value, json};

/// Every named schema the document's operations refer to.
pub(crate) fn component_schemas() -> Map<String, Value> {
    let mut schemas = Map::new();
    schemas.insert(
        "TaskEnvelope".into(),
        component::<baton_core::envelope::TaskEnvelope>(),
    );
    schemas.insert(
        "CapabilityRegistration".into(),
        component::<baton_core::capability::CapabilityRegistration>(),
    );
    schemas.insert(
        "RunListPage".into(),
        answer_component::<baton_core::listing::RunListPage>(),
    );
    schemas.insert(
        "Error".into(),
        json!({
            "type": "object", "required": ["error"],
            "properties": {"error": {
                "type": "object", "required": ["code", "message"],
                "properties": {
                    "code": {"type": "string", "description": "stable, machine-readable"},
                    "message": {"type": "string"},
                    "details": {"type": "object", "description": "`path` (a JSON path), `errors[]`, `parameter`, …"}
                }
            }}
        }),
    );
    for (name, schema) in [
        (
            "RunAccepted",
            answer_component::<crate::bodies::RunAccepted>(),
        ),
        (
            "RunStatusAnswer",
            answer_component::<crate::bodies::RunStatusAnswer>(),
        ),
        (
            "RunSnapshotResponse",
            answer_component::<crate::snapshot::RunSnapshotResponse>(),
        ),
        (
            "CapabilityList",
            answer_component::<crate::bodies::CapabilityList>(),
        ),
        (
            "CapabilityRegistered",
            answer_component::<crate::bodies::CapabilityRegistered>(),
        ),
        ("ResumeRequest", component::<crate::bodies::ResumeRequest>()),
        (
            "ResolveRequest",
            component::<crate::bodies::ResolveRequest>(),
        ),
        (
            "DeclineRequest",
            component::<crate::bodies::DeclineRequest>(),
        ),
        (
            "HumanActionApplied",
            answer_component::<crate::bodies::HumanActionApplied>(),
        ),
        ("TaskList", answer_component::<crate::bodies::TaskList>()),
        (
            "RequestList",
            answer_component::<crate::bodies::RequestList>(),
        ),
        (
            "PanelRequest",
            component::<baton_judge::request::PanelRequest>(),
        ),
        (
            "PanelOutput",
            answer_component::<baton_judge::panel::PanelOutput>(),
        ),
        (
            "EvaluationPending",
            answer_component::<crate::bodies::EvaluationPending>(),
        ),
        (
            "ChatMessageRequest",
            component::<crate::bodies::ChatMessageRequest>(),
        ),
        ("ForkRequest", component::<crate::bodies::ForkRequest>()),
        (
            "RunHistory",
            answer_component::<crate::bodies::RunHistory>(),
        ),
        (
            "ThreadListPage",
            answer_component::<baton_core::thread_listing::ThreadListPage>(),
        ),
        (
            "ThreadView",
            answer_component::<crate::bodies::ThreadView>(),
        ),
        (
            "OpenApiDocument",
            answer_component::<crate::bodies::OpenApiDocument>(),
        ),
    ] {
        schemas.insert(name.into(), schema);
    }
    hoist_definitions(&mut schemas);
    schemas
}

/// The JSON Schema of what a route reads (`T` as serde deserializes it).
fn component<T: schemars::JsonSchema>() -> Value {
    without_meta(serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null))
}

/// The JSON Schema of what a route answers (`T` as serde serializes it: a
/// field skipped when empty is optional, an `Option` without a skip is
/// present, maybe null).
fn answer_component<T: schemars::JsonSchema>() -> Value {
    let schema = schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<T>();
    without_meta(serde_json::to_value(schema).unwrap_or(Value::Null))
}

fn without_meta(mut schema: Value) -> Value {
    if let Some(fields) = schema.as_object_mut() {
        fields.remove("$schema");
    }
    schema
}

/// Moves a component's own `$defs` into `components.schemas` (OpenAPI
/// resolves `#/components/schemas/…`), rewriting its references.
fn hoist_definitions(schemas: &mut Map<String, Value>) {
    let mut hoisted = Map::new();
    for schema in schemas.values_mut() {
        if let Some(Value::Object(definitions)) = schema
            .as_object_mut()
            .and_then(|fields| fields.remove("$defs"))
        {
            hoisted.extend(definitions);
        }
    }
    schemas.extend(hoisted);
    let text = Value::Object(schemas.clone())
        .to_string()
        .replace("\"#/$defs/", "\"#/components/schemas/");
    if let Ok(Value::Object(rewritten)) = serde_json::from_str(&text) {
        *schemas = rewritten;
    }
}
