//! The checks that keep the operations' ids, chosen by hand in the table
//! (what generated clients name their methods), and the OpenAPI document
//! acceptable to client generators.

#[cfg(test)]
mod tests {
    use crate::openapi::{document, operations};
    use serde_json::Value;

    #[test]
    fn every_operation_has_a_hand_chosen_unique_operation_id() {
        let mut seen = std::collections::BTreeSet::new();
        for operation in operations() {
            let id = operation.id;
            assert!(
                id.chars()
                    .next()
                    .is_some_and(|first| first.is_ascii_lowercase())
                    && id
                        .chars()
                        .all(|character| character.is_ascii_alphanumeric()),
                "{id}: lowerCamelCase"
            );
            assert!(seen.insert(id), "{id} twice");
        }
        assert!(seen.len() >= 30, "the table was read: {seen:?}");
    }

    /// Where a schema may sit, a boolean one is refused by generators: none
    /// is left (only `additionalProperties: false`, which they read).
    #[test]
    fn no_boolean_schema_is_left_for_a_generator_to_refuse() {
        fn walk(value: &Value, path: &str, found: &mut Vec<String>) {
            match value {
                Value::Object(fields) => {
                    for (key, child) in fields {
                        let at = format!("{path}/{key}");
                        if child.is_boolean()
                            && key != "additionalProperties"
                            && !path.ends_with("/properties")
                            && !path.ends_with("/$defs")
                        {
                            if ["items", "not", "if", "then", "else", "contains"]
                                .contains(&key.as_str())
                            {
                                found.push(at.clone());
                            }
                        } else if child.is_boolean()
                            && (path.ends_with("/properties") || path.ends_with("/$defs"))
                        {
                            found.push(at.clone());
                        }
                        walk(child, &at, found);
                    }
                }
                Value::Array(items) => {
                    for (index, item) in items.iter().enumerate() {
                        let at = format!("{path}/{index}");
                        let in_schema_list = ["allOf", "anyOf", "oneOf", "prefixItems"]
                            .iter()
                            .any(|keyword| path.ends_with(&format!("/{keyword}")));
                        if item.is_boolean() && in_schema_list {
                            found.push(at.clone());
                        }
                        walk(item, &at, found);
                    }
                }
                _ => {}
            }
        }
        let document = document();
        let mut found = Vec::new();
        walk(
            &document["components"]["schemas"],
            "#/components/schemas",
            &mut found,
        );
        assert!(found.is_empty(), "boolean schemas: {found:?}");
    }
}
