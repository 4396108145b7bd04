//! JSONLogic truth (through `datalogic-rs`): output-contract constraints
//! and runtime policy conditions are evaluated here, the same way, and
//! checked here when submitted (`check_expression`: every operator known to
//! the evaluator, the whole compiling; `variables_read`: the names an
//! expression reads, for the caller to check against what its trigger
//! provides).

use serde_json::Value;

/// Whether `rule` holds over `data`: JSONLogic truthiness of its result
/// (an error, `null`, `false`, `0`, `""` and `[]` do not hold).
pub fn holds(rule: &Value, data: &Value) -> bool {
    evaluate(rule, data).unwrap_or(false)
}

/// Why an expression could not be evaluated over its data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogicEvaluationError {
    /// The evaluator refused the expression or its data.
    #[error("{0}")]
    Refused(String),
    /// The evaluator's result is not JSON.
    #[error("the result is not JSON: {0}")]
    UnreadableResult(String),
}

/// The JSONLogic truthiness of `rule` over `data`, or why it could not be
/// evaluated.
pub fn evaluate(rule: &Value, data: &Value) -> Result<bool, LogicEvaluationError> {
    // One engine per thread: building one registers every operator.
    thread_local! {
        static ENGINE: datalogic_rs::Engine = datalogic_rs::Engine::new();
    }
    let result = ENGINE
        .with(|engine| engine.eval_str(&rule.to_string(), &data.to_string()))
        .map_err(|error| LogicEvaluationError::Refused(error.to_string()))?;
    let value = serde_json::from_str::<Value>(&result)
        .map_err(|error| LogicEvaluationError::UnreadableResult(error.to_string()))?;
    Ok(match value {
        Value::Bool(flag) => flag,
        Value::Null => false,
        Value::Number(number) => number.as_f64().is_some_and(|n| n != 0.0),
        Value::String(text) => !text.is_empty(),
        Value::Array(items) => !items.is_empty(),
        Value::Object(_) => true,
    })
}

/// What is wrong with a JSONLogic expression: where inside it (a JSON path
/// suffix such as `.and[1]`, empty for the expression itself) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogicProblem {
    pub inner_path: String,
    pub message: String,
}

/// Where a variable is read in an expression: its name as written (`a.b`)
/// and the JSON path suffix of the `var` that reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VariableRead {
    pub name: String,
    pub inner_path: String,
    /// The `var` gives a default (`{"var": ["a", 0]}`): its author expects
    /// the name may be missing.
    pub has_default: bool,
}

impl VariableRead {
    /// The name's first segment: the top-level field it reads.
    pub fn root(&self) -> &str {
        self.name.split('.').next().unwrap_or_default()
    }
}

/// The operators the evaluator knows (datalogic-rs's built-ins, as this
/// build compiles them).
fn is_known_operator(name: &str) -> bool {
    thread_local! {
        static KNOWN: std::collections::HashSet<&'static str> =
            datalogic_rs::Engine::new().builtin_operator_names().collect();
    }
    KNOWN.with(|known| known.contains(name))
}

/// Compiles `rule` once: every operator must be one the evaluator knows (an
/// unknown one would make the rule silently false at run time), and the
/// whole must compile. `between`, a name people reach for, is refused with
/// the JSONLogic form that means it.
pub fn check_expression(rule: &Value) -> Result<(), LogicProblem> {
    check_operators_at(rule, "")?;
    thread_local! {
        static ENGINE: datalogic_rs::Engine = datalogic_rs::Engine::new();
    }
    ENGINE
        .with(|engine| engine.compile(&rule.to_string()).map(|_| ()))
        .map_err(|error| LogicProblem {
            inner_path: String::new(),
            message: format!("not a valid JSONLogic expression: {error}"),
        })
}

fn check_operators_at(value: &Value, path: &str) -> Result<(), LogicProblem> {
    match value {
        Value::Object(map) if map.len() == 1 => {
            let Some((operator, arguments)) = map.iter().next() else {
                return Ok(());
            };
            if !is_known_operator(operator) {
                let hint = if operator == "between" {
                    ": write a range as JSONLogic's three-argument comparison, `{\"<=\": [low, {\"var\": \"x\"}, high]}` (or `<` for an open range)".to_string()
                } else {
                    String::new()
                };
                return Err(LogicProblem {
                    inner_path: path.to_string(),
                    message: format!("`{operator}` is not a JSONLogic operator{hint}"),
                });
            }
            let here = format!("{path}.{operator}");
            match arguments {
                Value::Array(items) => items.iter().enumerate().try_for_each(|(index, item)| {
                    check_operators_at(item, &format!("{here}[{index}]"))
                }),
                other => check_operators_at(other, &here),
            }
        }
        Value::Object(map) => map
            .iter()
            .try_for_each(|(key, item)| check_operators_at(item, &format!("{path}.{key}"))),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(index, item)| check_operators_at(item, &format!("{path}[{index}]"))),
        _ => Ok(()),
    }
}

/// Checks a guard: `rule` compiles ([`check_expression`]) and every name
/// it reads starts with one of `readable` (the facets the guarded node
/// consumes). A problem names where inside the rule it is.
pub fn check_expression_reads_only(rule: &Value, readable: &[String]) -> Result<(), LogicProblem> {
    check_expression(rule)?;
    for read in variables_read(rule) {
        if !readable.iter().any(|name| name == read.root()) {
            return Err(LogicProblem {
                inner_path: read.inner_path.clone(),
                message: format!(
                    "reads `{}`, which is none of the facets it may read ({})",
                    read.name,
                    if readable.is_empty() {
                        "none".to_string()
                    } else {
                        readable.join(", ")
                    }
                ),
            });
        }
    }
    Ok(())
}

/// Every variable `rule` reads by name (`{"var": "a.b"}`, `{"var": ["a",
/// default]}`; `val` alike), in the order written. A name computed at run
/// time (a `var` of an expression) is not listed.
pub fn variables_read(rule: &Value) -> Vec<VariableRead> {
    let mut found = Vec::new();
    collect_variables(rule, "", &mut found);
    found
}

fn collect_variables(value: &Value, path: &str, found: &mut Vec<VariableRead>) {
    match value {
        Value::Object(map) if map.len() == 1 => {
            let Some((operator, arguments)) = map.iter().next() else {
                return;
            };
            let here = format!("{path}.{operator}");
            if operator == "var" || operator == "val" {
                let (name, rest, first_rest_index): (Option<&String>, &[Value], usize) =
                    match arguments {
                        Value::String(name) => (Some(name), &[], 0),
                        Value::Array(items) => match items.split_first() {
                            Some((Value::String(name), rest)) => (Some(name), rest, 1),
                            _ => (None, items.as_slice(), 0),
                        },
                        other => (None, std::slice::from_ref(other), 0),
                    };
                if let Some(name) = name.filter(|name| !name.is_empty()) {
                    found.push(VariableRead {
                        name: name.clone(),
                        inner_path: here.clone(),
                        has_default: !rest.is_empty(),
                    });
                }
                for (index, item) in rest.iter().enumerate() {
                    collect_variables(
                        item,
                        &format!("{here}[{}]", index + first_rest_index),
                        found,
                    );
                }
                return;
            }
            match arguments {
                Value::Array(items) => {
                    for (index, item) in items.iter().enumerate() {
                        collect_variables(item, &format!("{here}[{index}]"), found);
                    }
                }
                other => collect_variables(other, &here, found),
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                collect_variables(item, &format!("{path}.{key}"), found);
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                collect_variables(item, &format!("{path}[{index}]"), found);
            }
        }
        _ => {}
    }
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

    #[test]
    fn an_unknown_operator_is_named_with_where_it_is() {
        let problem = check_expression(&json!({"and": [true, {"between": [{"var": "x"}, 0, 1]}]}))
            .unwrap_err();
        assert_eq!(problem.inner_path, ".and[1]");
        assert!(
            problem
                .message
                .contains("`between` is not a JSONLogic operator")
        );
        assert!(problem.message.contains("<="), "{}", problem.message);
        let problem = check_expression(&json!({"frobnicate": [1]})).unwrap_err();
        assert_eq!(problem.inner_path, "");
        assert!(problem.message.contains("`frobnicate`"));
        assert_eq!(
            check_expression(&json!({"<=": [0, {"var": "x"}, 1]})),
            Ok(())
        );
        assert_eq!(check_expression(&json!(true)), Ok(()));
    }

    #[test]
    fn the_variables_an_expression_reads_are_listed_with_their_place() {
        let read = variables_read(&json!({"and": [
            {"<": [{"var": "score.overall"}, 0.5]},
            {"==": [{"var": ["$node.kind", "ai"]}, "ai"]},
            {"var": {"cat": ["a", "b"]}}
        ]}));
        let names: Vec<(&str, &str, &str)> = read
            .iter()
            .map(|read| (read.name.as_str(), read.root(), read.inner_path.as_str()))
            .collect();
        assert_eq!(
            names,
            vec![
                ("score.overall", "score", ".and[0].<[0].var"),
                ("$node.kind", "$node", ".and[1].==[0].var"),
            ]
        );
    }
}
