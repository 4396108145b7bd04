//! JSONLogic truth (through `datalogic-rs`): output-contract constraints
//! and runtime policy conditions are evaluated here, the same way.

use serde_json::Value;

/// Whether `rule` holds over `data`: JSONLogic truthiness of its result
/// (an error, `null`, `false`, `0`, `""` and `[]` do not hold).
pub fn holds(rule: &Value, data: &Value) -> bool {
    // One engine per thread: building one registers every operator.
    thread_local! {
        static ENGINE: datalogic_rs::Engine = datalogic_rs::Engine::new();
    }
    ENGINE
        .with(|engine| engine.eval_str(&rule.to_string(), &data.to_string()))
        .map(|result| {
            serde_json::from_str::<Value>(&result).is_ok_and(|value| match value {
                Value::Bool(flag) => flag,
                Value::Null => false,
                Value::Number(number) => number.as_f64().is_some_and(|n| n != 0.0),
                Value::String(text) => !text.is_empty(),
                Value::Array(items) => !items.is_empty(),
                Value::Object(_) => true,
            })
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn truthiness_follows_jsonlogic() {
        let data = json!({"score": {"overall": 0.4}, "tags": []});
        assert!(holds(&json!({"<": [{"var": "score.overall"}, 0.6]}), &data));
        assert!(!holds(
            &json!({">": [{"var": "score.overall"}, 0.6]}),
            &data
        ));
        assert!(!holds(&json!({"var": "tags"}), &data));
        assert!(!holds(&json!({"unknown_operator": [1]}), &data));
    }
}
