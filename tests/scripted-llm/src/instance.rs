//! Generates a small JSON instance that satisfies a JSON Schema (the subset
//! facet and contract schemas use: object, array, string with formats and
//! lengths, number bounds, enum/const, allOf/anyOf/oneOf). Written by hand
//! because this test double only needs the subset, and no maintained crate
//! generates instances from schemas offline.

use serde_json::{Map, Value, json};

/// Merges `allOf` members into one schema (properties and bounds combined).
pub fn merge_schemas(first: &Value, second: &Value) -> Value {
    let (Some(a), Some(b)) = (first.as_object(), second.as_object()) else {
        return if second.is_object() {
            second.clone()
        } else {
            first.clone()
        };
    };
    let mut merged = a.clone();
    for (key, value) in b {
        let combined = match (key.as_str(), merged.get(key)) {
            (_, None) => value.clone(),
            ("properties", Some(existing)) => {
                let mut properties = existing.as_object().cloned().unwrap_or_default();
                for (name, schema) in value.as_object().into_iter().flatten() {
                    let next = match properties.get(name) {
                        Some(previous) => merge_schemas(previous, schema),
                        None => schema.clone(),
                    };
                    properties.insert(name.clone(), next);
                }
                Value::Object(properties)
            }
            ("required", Some(existing)) => {
                let mut names: Vec<Value> = existing.as_array().cloned().unwrap_or_default();
                for name in value.as_array().into_iter().flatten() {
                    if !names.contains(name) {
                        names.push(name.clone());
                    }
                }
                Value::Array(names)
            }
            ("minItems" | "minLength" | "minimum", Some(existing)) => max_number(existing, value),
            ("maxItems" | "maxLength" | "maximum", Some(existing)) => min_number(existing, value),
            ("items", Some(existing)) => merge_schemas(existing, value),
            (_, Some(existing)) => existing.clone(),
        };
        merged.insert(key.clone(), combined);
    }
    Value::Object(merged)
}

fn max_number(a: &Value, b: &Value) -> Value {
    if a.as_f64().unwrap_or(f64::MIN) >= b.as_f64().unwrap_or(f64::MIN) {
        a.clone()
    } else {
        b.clone()
    }
}

fn min_number(a: &Value, b: &Value) -> Value {
    if a.as_f64().unwrap_or(f64::MAX) <= b.as_f64().unwrap_or(f64::MAX) {
        a.clone()
    } else {
        b.clone()
    }
}

fn flatten_all_of(schema: &Value) -> Value {
    let Some(object) = schema.as_object() else {
        return schema.clone();
    };
    let Some(members) = object.get("allOf").and_then(Value::as_array) else {
        return schema.clone();
    };
    let mut base = object.clone();
    base.remove("allOf");
    members
        .iter()
        .map(flatten_all_of)
        .fold(Value::Object(base), |merged, member| {
            merge_schemas(&merged, &member)
        })
}

/// A valid instance of `schema`; `hint` names the property, for readable text.
pub fn generate_instance(schema: &Value, hint: &str) -> Value {
    let schema = flatten_all_of(schema);
    let Some(object) = schema.as_object() else {
        return json!(format!("scripted {hint}"));
    };
    if let Some(constant) = object.get("const") {
        return constant.clone();
    }
    if let Some(first) = object
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|values| values.first())
    {
        return first.clone();
    }
    for alternatives in ["anyOf", "oneOf"] {
        if let Some(first) = object
            .get(alternatives)
            .and_then(Value::as_array)
            .and_then(|members| members.first())
        {
            let mut rest = object.clone();
            rest.remove(alternatives);
            return generate_instance(&merge_schemas(&Value::Object(rest), first), hint);
        }
    }
    let declared_type = match object.get("type") {
        Some(Value::String(name)) => name.clone(),
        Some(Value::Array(names)) => names
            .iter()
            .filter_map(Value::as_str)
            .find(|name| *name != "null")
            .unwrap_or("null")
            .to_string(),
        _ if object.contains_key("properties") => "object".into(),
        _ if object.contains_key("items") => "array".into(),
        _ => "string".into(),
    };
    match declared_type.as_str() {
        "object" => {
            let mut instance = Map::new();
            for (name, property_schema) in object
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                instance.insert(name.clone(), generate_instance(property_schema, name));
            }
            Value::Object(instance)
        }
        "array" => {
            let minimum = object
                .get("minItems")
                .and_then(Value::as_u64)
                .unwrap_or(1)
                .max(1);
            let count = object
                .get("maxItems")
                .and_then(Value::as_u64)
                .map_or(minimum, |maximum| minimum.min(maximum));
            let item_schema = object.get("items").cloned().unwrap_or(json!({}));
            (0..count)
                .map(|index| {
                    let mut item = generate_instance(&item_schema, hint);
                    if let Value::String(text) = &mut item
                        && object
                            .get("items")
                            .and_then(|items| items.get("format"))
                            .is_none()
                    {
                        text.push_str(&format!(" {}", index + 1));
                    }
                    item
                })
                .collect()
        }
        "integer" | "number" => {
            let low = object.get("minimum").and_then(Value::as_f64).unwrap_or(0.0);
            let high = object
                .get("maximum")
                .and_then(Value::as_f64)
                .unwrap_or(f64::MAX);
            let value = if high >= 1.0 && low <= 1.0 {
                1.0
            } else {
                low.min(high)
            };
            if declared_type == "integer" {
                json!(value.ceil() as i64)
            } else {
                json!(value)
            }
        }
        "boolean" => json!(true),
        "null" => Value::Null,
        _ => {
            let text = match object.get("format").and_then(Value::as_str) {
                Some("uri" | "url" | "iri") => {
                    format!("https://example.com/{}", hint.replace('_', "-"))
                }
                Some("date") => "2026-01-01".to_string(),
                Some("date-time") => "2026-01-01T00:00:00Z".to_string(),
                Some("email") => "scripted@example.com".to_string(),
                _ => format!("Scripted {}", hint.replace('_', " ")),
            };
            let min_length = object.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
            let max_length = object
                .get("maxLength")
                .and_then(Value::as_u64)
                .map(|length| length as usize);
            let mut text = text;
            while text.chars().count() < min_length {
                text.push_str(" and more");
            }
            if let Some(maximum) = max_length {
                text = text.chars().take(maximum).collect();
            }
            json!(text)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_instances_validate() {
        let schema = json!({
            "type": "object",
            "properties": {
                "copyVariants": {"allOf": [
                    {"type": "array", "minItems": 1, "items": {"type": "object", "required": ["headline"], "properties": {"headline": {"type": "string", "minLength": 1}}, "additionalProperties": false}},
                    {"type": "array", "minItems": 2, "maxItems": 2}
                ]},
                "tone": {"anyOf": [{"type": "string", "minLength": 30}, {"type": "array"}]},
                "score": {"type": "number", "minimum": 0, "maximum": 0.5},
                "site": {"type": "string", "format": "uri"}
            },
            "required": ["copyVariants", "tone", "score", "site"],
            "additionalProperties": false
        });
        let instance = generate_instance(&schema, "root");
        assert!(jsonschema_free_check(&instance), "{instance}");
        assert_eq!(instance["copyVariants"].as_array().map(Vec::len), Some(2));
        assert!(
            instance["tone"]
                .as_str()
                .is_some_and(|text| text.len() >= 30)
        );
        assert_eq!(instance["score"], json!(0.0));
    }

    fn jsonschema_free_check(instance: &Value) -> bool {
        instance["site"]
            .as_str()
            .is_some_and(|site| site.starts_with("https://"))
    }
}
