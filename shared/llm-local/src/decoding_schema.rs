//! The schema the grammar is derived from: the node's output schema with
//! decoding budgets added where it leaves lengths open.
//!
//! A small model held to a grammar will happily write one string forever; a
//! budget (`maxLength` on free strings, `maxItems` on open arrays) makes every
//! answer end inside the token limit. Budgets only ever narrow what the
//! schema allows, so an answer that fits the budgeted schema fits the
//! original, which the engine still validates as usual.
//!
//! `allOf` is merged here before conversion (properties merged deeply,
//! `required` united, the tighter of each bound kept): llama.cpp's converter
//! lets a later component's property replace an earlier one's, which drops
//! constraints (a caller's `{"type": "array", "minItems": 2}` would erase the
//! facet's item schema). Keywords that cannot be intersected keep the first
//! component's value; validation after decoding still checks the original.
//!
//! llama.cpp's converter bounds integers but not other numbers, so a bounded
//! `number` is rewritten to values it can hold the model to: a grid of 21
//! values across a range up to 10 wide (`[0, 1]` → 0, 0.05, … 1), else the
//! whole numbers inside the bounds.

use serde_json::{Map, Value};

/// Longest free string the model may write, in characters.
pub const STRING_BUDGET_CHARACTERS: u64 = 200;
/// Most items of an array that leaves `maxItems` open.
pub const ARRAY_BUDGET_ITEMS: u64 = 4;
/// Widest number range decoded as a grid of values rather than whole numbers.
const NUMBER_GRID_WIDEST_RANGE: f64 = 10.0;
const NUMBER_GRID_STEPS: u32 = 20;

/// `schema` with `allOf` merged and decoding budgets on every free string,
/// open array and bounded number.
pub fn with_decoding_budgets(schema: &Value) -> Value {
    let mut budgeted = schema.clone();
    merge_all_of(&mut budgeted);
    add_budgets(&mut budgeted);
    budgeted
}

/// Applies `visit` to every direct subschema of `schema`.
fn for_each_subschema(schema: &mut Map<String, Value>, visit: &mut dyn FnMut(&mut Value)) {
    for keyword in ["items", "additionalProperties", "not", "contains"] {
        if let Some(child) = schema.get_mut(keyword) {
            visit(child);
        }
    }
    for keyword in ["allOf", "anyOf", "oneOf", "prefixItems"] {
        if let Some(Value::Array(children)) = schema.get_mut(keyword) {
            children.iter_mut().for_each(&mut *visit);
        }
    }
    for keyword in ["properties", "$defs", "definitions", "patternProperties"] {
        if let Some(Value::Object(children)) = schema.get_mut(keyword) {
            children.values_mut().for_each(&mut *visit);
        }
    }
}

/// Replaces every `allOf` of plain object schemas by one merged schema.
fn merge_all_of(schema: &mut Value) {
    let Value::Object(object) = schema else {
        return;
    };
    for_each_subschema(object, &mut merge_all_of);
    let mergeable = matches!(
        object.get("allOf"),
        Some(Value::Array(parts)) if parts.iter().all(|part| part.is_object() && part.get("$ref").is_none())
    );
    if !mergeable {
        return;
    }
    if let Some(Value::Array(parts)) = object.remove("allOf") {
        for part in parts {
            if let Value::Object(part) = part {
                merge_into(object, part);
            }
        }
    }
}

fn merge_into(target: &mut Map<String, Value>, source: Map<String, Value>) {
    for (keyword, incoming) in source {
        let Some(existing) = target.get_mut(&keyword) else {
            target.insert(keyword, incoming);
            continue;
        };
        match keyword.as_str() {
            "properties" => {
                if let (Value::Object(existing), Value::Object(incoming)) = (existing, incoming) {
                    for (name, incoming_property) in incoming {
                        match existing.get_mut(&name) {
                            Some(Value::Object(existing_property)) => {
                                if let Value::Object(incoming_property) = incoming_property {
                                    merge_into(existing_property, incoming_property);
                                }
                            }
                            _ => {
                                existing.insert(name, incoming_property);
                            }
                        }
                    }
                }
            }
            "items" | "additionalProperties" => match (existing, incoming) {
                (Value::Object(existing), Value::Object(incoming)) => {
                    merge_into(existing, incoming)
                }
                (existing, Value::Bool(false)) => *existing = Value::Bool(false),
                _ => {}
            },
            "required" => {
                if let (Value::Array(existing), Value::Array(incoming)) = (existing, incoming) {
                    for name in incoming {
                        if !existing.contains(&name) {
                            existing.push(name);
                        }
                    }
                }
            }
            "enum" => {
                if let (Value::Array(existing), Value::Array(incoming)) = (existing, incoming) {
                    existing.retain(|value| incoming.contains(value));
                }
            }
            "minItems" | "minLength" | "minProperties" | "minimum" | "exclusiveMinimum"
                if incoming.as_f64() > existing.as_f64() =>
            {
                *existing = incoming;
            }
            "maxItems" | "maxLength" | "maxProperties" | "maximum" | "exclusiveMaximum" => {
                if let (Some(incoming_bound), Some(existing_bound)) =
                    (incoming.as_f64(), existing.as_f64())
                    && incoming_bound < existing_bound
                {
                    *existing = incoming;
                }
            }
            _ => {}
        }
    }
}

fn declares_type(schema: &Map<String, Value>, wanted: &str) -> bool {
    match schema.get("type") {
        Some(Value::String(name)) => name == wanted,
        Some(Value::Array(names)) => names.iter().any(|name| name.as_str() == Some(wanted)),
        _ => false,
    }
}

/// One side of a number's range: the bound and whether it is exclusive.
fn number_bound(
    object: &Map<String, Value>,
    inclusive: &str,
    exclusive: &str,
) -> Option<(f64, bool)> {
    let inclusive_bound = object.get(inclusive).and_then(Value::as_f64);
    let exclusive_bound = object.get(exclusive).and_then(Value::as_f64);
    match (inclusive_bound, exclusive_bound) {
        (Some(bound), None) => Some((bound, false)),
        (None, Some(bound)) => Some((bound, true)),
        (Some(inclusive_bound), Some(exclusive_bound)) => {
            // The tighter of the two wins; `inclusive` is the lower or upper side's name.
            let lower_side = inclusive == "minimum";
            let exclusive_is_tighter = if lower_side {
                exclusive_bound >= inclusive_bound
            } else {
                exclusive_bound <= inclusive_bound
            };
            Some(if exclusive_is_tighter {
                (exclusive_bound, true)
            } else {
                (inclusive_bound, false)
            })
        }
        (None, None) => None,
    }
}

fn inside(value: f64, lower: Option<(f64, bool)>, upper: Option<(f64, bool)>) -> bool {
    let above = lower.is_none_or(|(bound, exclusive)| {
        if exclusive {
            value > bound
        } else {
            value >= bound
        }
    });
    let below = upper.is_none_or(|(bound, exclusive)| {
        if exclusive {
            value < bound
        } else {
            value <= bound
        }
    });
    above && below
}

/// A bounded `number` as values the grammar can hold the model to.
fn bound_number(object: &mut Map<String, Value>) {
    let is_plain_number = object.get("type").and_then(Value::as_str) == Some("number")
        && !object.contains_key("enum")
        && !object.contains_key("const");
    if !is_plain_number {
        return;
    }
    let lower = number_bound(object, "minimum", "exclusiveMinimum");
    let upper = number_bound(object, "maximum", "exclusiveMaximum");
    if lower.is_none() && upper.is_none() {
        return;
    }
    if let (Some((low, _)), Some((high, _))) = (lower, upper)
        && high > low
        && high - low <= NUMBER_GRID_WIDEST_RANGE
    {
        let step = (high - low) / f64::from(NUMBER_GRID_STEPS);
        let grid: Vec<Value> = (0..=NUMBER_GRID_STEPS)
            .map(|index| ((low + step * f64::from(index)) * 10_000.0).round() / 10_000.0)
            .filter(|value| inside(*value, lower, upper))
            .filter_map(|value| serde_json::Number::from_f64(value).map(Value::Number))
            .collect();
        if !grid.is_empty() {
            for keyword in [
                "type",
                "minimum",
                "maximum",
                "exclusiveMinimum",
                "exclusiveMaximum",
            ] {
                object.remove(keyword);
            }
            object.insert("enum".into(), Value::Array(grid));
            return;
        }
    }
    let whole_lower = lower.map(|(bound, exclusive)| {
        if exclusive && bound.fract() == 0.0 {
            bound + 1.0
        } else {
            bound.ceil()
        }
    });
    let whole_upper = upper.map(|(bound, exclusive)| {
        if exclusive && bound.fract() == 0.0 {
            bound - 1.0
        } else {
            bound.floor()
        }
    });
    if let (Some(low), Some(high)) = (whole_lower, whole_upper)
        && low > high
    {
        // No whole number fits: leave the number to validation.
        return;
    }
    for keyword in ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"] {
        object.remove(keyword);
    }
    object.insert("type".into(), Value::from("integer"));
    if let Some(low) = whole_lower {
        object.insert("minimum".into(), Value::from(low as i64));
    }
    if let Some(high) = whole_upper {
        object.insert("maximum".into(), Value::from(high as i64));
    }
}

fn add_budgets(schema: &mut Value) {
    let Value::Object(object) = schema else {
        return;
    };
    bound_number(object);
    let is_free_string = declares_type(object, "string")
        && !object.contains_key("maxLength")
        && !["enum", "const", "pattern", "format"]
            .iter()
            .any(|keyword| object.contains_key(*keyword));
    if is_free_string {
        let minimum = object.get("minLength").and_then(Value::as_u64).unwrap_or(0);
        object.insert(
            "maxLength".into(),
            Value::from(STRING_BUDGET_CHARACTERS.max(minimum)),
        );
    }
    if declares_type(object, "array") && !object.contains_key("maxItems") {
        let minimum = object.get("minItems").and_then(Value::as_u64).unwrap_or(0);
        object.insert(
            "maxItems".into(),
            Value::from(ARRAY_BUDGET_ITEMS.max(minimum)),
        );
    }
    for_each_subschema(object, &mut add_budgets);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn free_strings_and_open_arrays_get_budgets_at_every_depth() {
        let schema = json!({
            "type": "object",
            "properties": {
                "headline": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string", "minLength": 3}},
                "variants": {"type": "array", "minItems": 6, "items": {"$ref": "#/$defs/variant"}}
            },
            "$defs": {"variant": {"type": "object", "properties": {"body": {"type": ["string", "null"]}}}}
        });
        let budgeted = with_decoding_budgets(&schema);
        assert_eq!(budgeted["properties"]["headline"]["maxLength"], 200);
        assert_eq!(budgeted["properties"]["tags"]["maxItems"], 4);
        assert_eq!(budgeted["properties"]["tags"]["items"]["maxLength"], 200);
        // A budget never undercuts a minimum the schema sets.
        assert_eq!(budgeted["properties"]["variants"]["maxItems"], 6);
        assert_eq!(
            budgeted["$defs"]["variant"]["properties"]["body"]["maxLength"],
            200
        );
    }

    #[test]
    fn bounded_numbers_become_values_the_grammar_can_enforce() {
        let schema = json!({
            "type": "object",
            "properties": {
                "confidence": {"type": "number", "minimum": 0, "maximum": 1, "description": "0..1"},
                "score": {"type": "number", "exclusiveMinimum": 0, "maximum": 100},
                "positive": {"type": "number", "minimum": 0.5},
                "free": {"type": "number"}
            }
        });
        let budgeted = with_decoding_budgets(&schema);
        let confidence = &budgeted["properties"]["confidence"];
        assert_eq!(confidence["enum"].as_array().map(Vec::len), Some(21));
        assert_eq!(confidence["enum"][1], 0.05);
        assert_eq!(confidence["enum"][20], 1.0);
        assert_eq!(confidence["description"], "0..1");
        assert!(confidence.get("type").is_none());
        assert_eq!(
            budgeted["properties"]["score"],
            json!({"type": "integer", "minimum": 1, "maximum": 100})
        );
        assert_eq!(
            budgeted["properties"]["positive"],
            json!({"type": "integer", "minimum": 1})
        );
        assert_eq!(budgeted["properties"]["free"], json!({"type": "number"}));
        // Every grid value fits the original bounds.
        let grid = confidence["enum"].as_array().cloned().unwrap_or_default();
        assert!(
            grid.iter()
                .filter_map(Value::as_f64)
                .all(|value| (0.0..=1.0).contains(&value))
        );
        let exclusive = with_decoding_budgets(
            &json!({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}),
        );
        let grid = exclusive["enum"].as_array().cloned().unwrap_or_default();
        assert_eq!(grid.len(), 19, "both ends excluded");
    }

    #[test]
    fn all_of_merges_deeply_keeping_every_constraint() {
        let facet = json!({
            "type": "object",
            "required": ["factors", "rationale"],
            "additionalProperties": false,
            "properties": {
                "factors": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}},
                "rationale": {"type": "string", "maxLength": 500}
            }
        });
        let caller = json!({
            "type": "object",
            "required": ["factors"],
            "properties": {
                "factors": {"type": "array", "minItems": 2, "maxItems": 3},
                "rationale": {"type": "string", "maxLength": 300}
            }
        });
        let merged = with_decoding_budgets(&json!({"allOf": [facet, caller]}));
        assert!(merged.get("allOf").is_none());
        assert_eq!(merged["required"], json!(["factors", "rationale"]));
        assert_eq!(merged["additionalProperties"], false);
        let factors = &merged["properties"]["factors"];
        assert_eq!(factors["minItems"], 2);
        assert_eq!(factors["maxItems"], 3);
        assert_eq!(factors["items"]["required"], json!(["name"]));
        assert_eq!(merged["properties"]["rationale"]["maxLength"], 300);
    }

    #[test]
    fn bounded_or_shaped_values_are_left_as_the_schema_says() {
        let schema = json!({
                "type": "object",
                "properties": {
                    "tone": {"type": "string", "enum": ["calm", "bold"]},
                    "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
                    "short": {"type": "string", "maxLength": 12},
                    "pair": {"type": "array", "maxItems": 2}
                }
        });
        let budgeted = with_decoding_budgets(&schema);
        assert_eq!(budgeted, schema);
    }
}
