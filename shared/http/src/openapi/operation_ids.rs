//! The `operationId` of every operation, chosen by hand (what generated
//! clients name their methods), and the checks that keep the OpenAPI
//! document acceptable to client generators.

/// Every operation's hand-chosen `operationId` (what generated clients
/// name their methods): (method, path, id). A test keeps it covering every
/// operation with unique ids.
pub const OPERATION_IDS: &[(&str, &str, &str)] = &[
    ("post", "/api/v1/flex/runs", "submitRun"),
    ("get", "/api/v1/flex/audit", "listAuditRecords"),
    ("get", "/api/v1/flex/runs", "listRuns"),
    ("post", "/api/v1/flex/run.stream", "submitRunAndStream"),
    ("get", "/api/v1/flex/runs/{run_id}", "getRun"),
    (
        "get",
        "/api/v1/flex/runs/{run_id}/events",
        "streamRunEvents",
    ),
    ("post", "/api/v1/flex/runs/{run_id}/cancel", "cancelRun"),
    ("get", "/api/v1/flex/runs/{run_id}/history", "getRunHistory"),
    ("post", "/api/v1/flex/runs/{run_id}/fork", "forkRun"),
    ("get", "/api/v1/flex/capabilities", "listCapabilities"),
    (
        "post",
        "/api/v1/flex/capabilities/register",
        "registerCapability",
    ),
    ("post", "/api/v1/flex/run.resume", "resumeRun"),
    ("post", "/api/v1/flex/hitl/resolve", "resolveRequest"),
    (
        "post",
        "/api/v1/flex/runs/{run_id}/policies/{policy_id}/trigger",
        "triggerPolicy",
    ),
    ("get", "/api/v1/flex/tasks", "listTasks"),
    ("get", "/api/v1/flex/hitl/requests", "listRequests"),
    (
        "post",
        "/api/v1/flex/tasks/{task_id}/decline",
        "declineTask",
    ),
    ("post", "/api/v1/flex/schedules", "createSchedule"),
    ("get", "/api/v1/flex/schedules", "listSchedules"),
    ("get", "/api/v1/flex/schedules/{schedule_id}", "getSchedule"),
    (
        "delete",
        "/api/v1/flex/schedules/{schedule_id}",
        "deleteSchedule",
    ),
    (
        "post",
        "/api/v1/flex/schedules/{schedule_id}/pause",
        "pauseSchedule",
    ),
    (
        "post",
        "/api/v1/flex/schedules/{schedule_id}/resume",
        "resumeSchedule",
    ),
    (
        "post",
        "/api/v1/flex/evaluations",
        "createDatasetEvaluation",
    ),
    ("get", "/api/v1/flex/evaluations", "listDatasetEvaluations"),
    (
        "get",
        "/api/v1/flex/evaluations/{evaluation_id}",
        "getDatasetEvaluation",
    ),
    ("post", "/api/v1/judge/evaluations", "createEvaluation"),
    (
        "get",
        "/api/v1/judge/evaluations/{evaluation_id}",
        "getEvaluation",
    ),
    ("post", "/api/v1/chat", "sendChatMessage"),
    ("get", "/api/v1/threads", "listThreads"),
    ("get", "/api/v1/threads/{thread_id}", "getThread"),
    ("get", "/api/v1/flex/openapi.json", "getOpenApiDocument"),
    ("get", "/", "getViewer"),
    ("get", "/index.html", "getViewerPage"),
    ("get", "/viewer/{name}", "getViewerFile"),
];

/// The `operationId` of `method path` (the generated form when the table
/// lacks it, which a test refuses).
pub(super) fn operation_id(method: &str, path: &str) -> String {
    OPERATION_IDS
        .iter()
        .find(|(known_method, known_path, _)| *known_method == method && *known_path == path)
        .map(|(_, _, id)| id.to_string())
        .unwrap_or_else(|| format!("{method}{}", path.replace(['/', '.', '{', '}'], "_")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openapi::{document, operations};
    use serde_json::Value;

    #[test]
    fn every_operation_has_a_hand_chosen_unique_operation_id() {
        let mut seen = std::collections::BTreeSet::new();
        for operation in operations() {
            let id = OPERATION_IDS
                .iter()
                .find(|(method, path, _)| *method == operation.method && *path == operation.path)
                .map(|(_, _, id)| *id)
                .unwrap_or_else(|| {
                    panic!(
                        "{} {} has no operationId in OPERATION_IDS",
                        operation.method, operation.path
                    )
                });
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
        assert_eq!(
            seen.len(),
            OPERATION_IDS.len(),
            "no id without its operation"
        );
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
