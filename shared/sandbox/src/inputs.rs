//! The inputs of a draft: a line's text shaped by its facet's schema,
//! each given input checked against its facet, and what the builder asks
//! for (a facet and its fields).

use baton_core::basics::error::Refusal;
use baton_core::basics::schema::{collect_violations, compile_schema, json_path_for_pointer};
use baton_core::catalog::registry::Registry;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::conversation::DraftProblem;

/// One field of an asked-for input.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AskedField {
    pub name: String,
    pub required: bool,
    pub description: String,
}

/// An input the plan needs, and its fields.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AskedInput {
    pub facet: String,
    pub title: String,
    pub description: String,
    /// The fields of an object facet (none for another kind).
    pub fields: Vec<AskedField>,
}

/// Shapes a line's text by the schema it is for: a list split at commas,
/// a number, a flag, JSON where JSON is written, else the text.
pub(crate) fn shape_text(text: &str, schema: &Value) -> Result<Value, Refusal> {
    let json = serde_json::from_str::<Value>(text).ok();
    match schema["type"].as_str() {
        Some("string") => Ok(Value::String(text.to_string())),
        Some("array") => Ok(match json {
            Some(Value::Array(items)) => Value::Array(items),
            _ => Value::Array(
                text.split(',')
                    .map(str::trim)
                    .filter(|item| !item.is_empty())
                    .map(|item| {
                        shape_text(item, &schema["items"])
                            .unwrap_or_else(|_| Value::String(item.to_string()))
                    })
                    .collect(),
            ),
        }),
        Some("object") => match json {
            Some(object @ Value::Object(_)) => Ok(object),
            _ => {
                let fields: Vec<String> = schema["properties"]
                    .as_object()
                    .map(|properties| properties.keys().cloned().collect())
                    .unwrap_or_default();
                Err(Refusal(format!(
                    "it is an object: give it as JSON or field by field (`KEY.FIELD: value`; fields: {})",
                    fields.join(", ")
                )))
            }
        },
        Some(kind @ ("integer" | "number" | "boolean")) => match json {
            Some(value @ (Value::Number(_) | Value::Bool(_))) => Ok(value),
            _ => Err(Refusal(format!("`{text}` is not a {kind}"))),
        },
        _ => Ok(json.unwrap_or_else(|| Value::String(text.to_string()))),
    }
}

/// Each given input checked against its facet's schema.
pub(crate) fn input_problems(
    registry: &Registry,
    inputs: &Map<String, Value>,
) -> Vec<DraftProblem> {
    let mut problems = Vec::new();
    for (name, value) in inputs {
        let Some(facet) = registry.facets.get(name) else {
            continue;
        };
        let prefix = format!("$.inputs.{name}");
        match compile_schema(&facet.schema, &prefix) {
            Ok(validator) => {
                problems.extend(collect_violations(&validator, value).into_iter().map(
                    |violation| {
                        DraftProblem::new(
                            json_path_for_pointer(&prefix, &violation.instance_pointer),
                            violation.message,
                        )
                    },
                ))
            }
            Err(error) => problems.push(DraftProblem::new(prefix, error.to_string())),
        }
    }
    problems
}

pub(crate) fn asked_input(registry: &Registry, name: &str) -> Option<AskedInput> {
    let facet = registry.facets.get(name)?;
    let required: Vec<&str> = facet.schema["required"]
        .as_array()
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let fields = facet.schema["properties"]
        .as_object()
        .map(|properties| {
            properties
                .iter()
                .map(|(field, schema)| AskedField {
                    name: field.clone(),
                    required: required.contains(&field.as_str()),
                    description: schema["description"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                })
                .collect()
        })
        .unwrap_or_default();
    Some(AskedInput {
        facet: facet.name.clone(),
        title: facet.title.clone(),
        description: facet.description.clone(),
        fields,
    })
}

pub(crate) fn not_a_facet(registry: &Registry, name: &str) -> String {
    let near: Vec<String> = registry
        .facets
        .list()
        .filter(|facet| {
            let lower = facet.name.to_lowercase();
            let wanted = name.to_lowercase();
            lower.contains(&wanted) || wanted.contains(&lower)
        })
        .map(|facet| format!("`{}`", facet.name))
        .collect();
    if near.is_empty() {
        format!(
            "`{name}` is not a facet of this registry (its facets are listed by GET /sandbox/metadata)"
        )
    } else {
        format!(
            "`{name}` is not a facet of this registry; did you mean {}?",
            near.join(" or ")
        )
    }
}
