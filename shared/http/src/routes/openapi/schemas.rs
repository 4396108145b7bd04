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
        component::<baton_core::contracts::envelope::TaskEnvelope>(),
    );
    schemas.insert(
        "CapabilityRegistration".into(),
        component::<baton_core::contracts::capability::CapabilityRegistration>(),
    );
    schemas.insert(
        "RunListPage".into(),
        answer_component::<baton_core::state::listing::RunListPage>(),
    );
    schemas.insert(
        "AuditPage".into(),
        answer_component::<baton_runtime::ports::AuditPage>(),
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
            "ScheduleRequest",
            component::<baton_core::records::schedules::ScheduleRequest>(),
        ),
        (
            "Schedule",
            answer_component::<baton_core::records::schedules::Schedule>(),
        ),
        (
            "ScheduleList",
            answer_component::<crate::bodies::ScheduleList>(),
        ),
        (
            "EvaluationRequest",
            component::<baton_evaluation::served::EvaluationRequest>(),
        ),
        (
            "EvaluationRecord",
            answer_component::<baton_evaluation::served::EvaluationRecord>(),
        ),
        (
            "EvaluationList",
            answer_component::<baton_evaluation::served::EvaluationList>(),
        ),
        (
            "MemoryItemWrite",
            component::<crate::routes::memory::MemoryItemWrite>(),
        ),
        (
            "MemoryItem",
            answer_component::<baton_memory::item::MemoryItem>(),
        ),
        (
            "MemoryItemList",
            answer_component::<crate::routes::memory::MemoryItemList>(),
        ),
        (
            "MemorySearchRequest",
            component::<crate::routes::memory::MemorySearchRequest>(),
        ),
        (
            "MemorySearchAnswer",
            answer_component::<crate::routes::memory::MemorySearchAnswer>(),
        ),
        (
            "MemoryForgetRequest",
            component::<crate::routes::memory::MemoryForgetRequest>(),
        ),
        (
            "MemoryForgotten",
            answer_component::<crate::routes::memory::MemoryForgotten>(),
        ),
        (
            "SandboxMetadata",
            answer_component::<baton_sandbox::SandboxMetadata>(),
        ),
        ("DraftRequest", component::<baton_sandbox::DraftRequest>()),
        ("DraftTurn", answer_component::<baton_sandbox::DraftTurn>()),
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
            answer_component::<baton_core::records::thread_listing::ThreadListPage>(),
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
    for schema in schemas.values_mut() {
        spell_boolean_schemas(schema);
    }
    unroll_self_references(&mut schemas);
    for schema in schemas.values_mut() {
        refer_to_free_objects(schema);
    }
    schemas.insert(
        FREE_OBJECT.into(),
        json!({"type": "object", "additionalProperties": true, "description": "any JSON object"}),
    );
    schemas
}

/// The component a free-form object (any JSON object) refers to.
const FREE_OBJECT: &str = "JsonObject";

/// A free-form object that may be null (`"type": ["object", "null"]`
/// without properties, an optional map) becomes `anyOf` a reference to
/// [`FREE_OBJECT`] and null: generators refuse an inline object inside a
/// union.
fn refer_to_free_objects(schema: &mut Value) {
    match schema {
        Value::Object(fields) => {
            let nullable_free_object =
                fields
                    .get("type")
                    .and_then(Value::as_array)
                    .is_some_and(|types| {
                        types.len() == 2
                            && types.contains(&json!("object"))
                            && types.contains(&json!("null"))
                    })
                    && !fields.contains_key("properties");
            if nullable_free_object {
                fields.remove("type");
                fields.remove("additionalProperties");
                fields.insert(
                    "anyOf".into(),
                    json!([{"$ref": format!("#/components/schemas/{FREE_OBJECT}")}, {"type": "null"}]),
                );
            }
            fields.values_mut().for_each(refer_to_free_objects);
        }
        Value::Array(items) => items.iter_mut().for_each(refer_to_free_objects),
        _ => {}
    }
}

/// A schema that refers to itself (a `hitl` policy action's `approveAction`
/// is a policy action) is a recursive union generators refuse. The document
/// describes one level: the inner references point at `Nested{Name}`, the
/// same schema whose own inner references are any object. The server reads
/// deeper nesting all the same; only the document stops describing it.
fn unroll_self_references(schemas: &mut Map<String, Value>) {
    let recursive: Vec<String> = schemas
        .iter()
        .filter(|(name, schema)| {
            schema
                .to_string()
                .contains(&format!("\"#/components/schemas/{name}\""))
        })
        .map(|(name, _)| name.clone())
        .collect();
    for name in recursive {
        let reference = format!("\"#/components/schemas/{name}\"");
        let Some(schema) = schemas.get(&name) else {
            continue;
        };
        let text = schema.to_string();
        let nested_name = format!("Nested{name}");
        let outer = text.replace(
            &format!("{{\"$ref\":{reference}}}"),
            &format!("{{\"$ref\":\"#/components/schemas/{nested_name}\"}}"),
        );
        // Deeper than one level: any object.
        let inner = text.replace(
            &format!("{{\"$ref\":{reference}}}"),
            &format!("{{\"$ref\":\"#/components/schemas/{FREE_OBJECT}\"}}"),
        );
        if let (Ok(outer), Ok(inner)) = (serde_json::from_str(&outer), serde_json::from_str(&inner))
        {
            schemas.insert(name.clone(), outer);
            schemas.insert(nested_name, inner);
        }
    }
}

/// Keywords whose value is one schema.
const SCHEMA_KEYWORDS: [&str; 9] = [
    "items",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
];
/// Keywords whose value maps names to schemas.
const SCHEMA_MAP_KEYWORDS: [&str; 4] = [
    "properties",
    "patternProperties",
    "$defs",
    "dependentSchemas",
];
/// Keywords whose value is a list of schemas.
const SCHEMA_LIST_KEYWORDS: [&str; 4] = ["allOf", "anyOf", "oneOf", "prefixItems"];

/// Writes the boolean schemas `schemars` makes for "any JSON" (`true`) and
/// "nothing" (`false`) as `{}` and `{"not": {}}`: the same meaning in
/// JSON Schema 2020-12, and the form mainstream generators
/// (`openapi-python-client`) accept. `additionalProperties: false` is left
/// as it is: generators read that boolean.
fn spell_boolean_schemas(schema: &mut Value) {
    let spelled = |value: &mut Value| match value {
        Value::Bool(true) => *value = json!({}),
        Value::Bool(false) => *value = json!({"not": {}}),
        other => spell_boolean_schemas(other),
    };
    let Some(fields) = schema.as_object_mut() else {
        return;
    };
    for (keyword, value) in fields.iter_mut() {
        if SCHEMA_KEYWORDS.contains(&keyword.as_str()) {
            spelled(value);
        } else if SCHEMA_MAP_KEYWORDS.contains(&keyword.as_str()) {
            if let Some(map) = value.as_object_mut() {
                map.values_mut().for_each(spelled);
            }
        } else if SCHEMA_LIST_KEYWORDS.contains(&keyword.as_str()) {
            if let Some(list) = value.as_array_mut() {
                list.iter_mut().for_each(spelled);
            }
        } else if keyword == "additionalProperties" && value.is_object() {
            spell_boolean_schemas(value);
        }
    }
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
