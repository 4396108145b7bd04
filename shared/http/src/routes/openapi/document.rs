//! The OpenAPI 3.1 document assembled from the operations table
//! ([`super::operations`]) and the component schemas.

use serde_json::{Map, Value, json};

use super::{Body, operations, schemas};

fn content(body: Body) -> Option<Value> {
    match body {
        Body::Json(schema) => Some(json!({
            "application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}
        })),
        Body::Sse => Some(json!({
            "text/event-stream": {"schema": {
                "type": "string",
                "description": "`id: <sequence>`, `event: <frame type>`, `data: <frame JSON>` per frame (see the event frame schemas in events/schemas/)"
            }}
        })),
        Body::File => Some(json!({"text/html": {}, "text/javascript": {}, "text/css": {}})),
        Body::Empty => None,
    }
}
/// The whole OpenAPI 3.1 document.
pub fn document() -> Value {
    let mut paths = Map::new();
    for operation in operations() {
        let mut responses = Map::new();
        for answer in &operation.answers {
            let mut response = json!({"description": answer.description});
            if let Some(content) = content(answer.body) {
                response["content"] = content;
            }
            responses.insert(answer.status.to_string(), response);
        }
        let mut parameters: Vec<Value> = operation
            .path
            .split('/')
            .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
            .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
            .collect();
        parameters.extend(operation.query.iter().map(|(name, description)| {
            json!({"name": name, "in": "query", "required": false, "description": description, "schema": {"type": "string"}})
        }));
        if operation.idempotency_key {
            parameters.push(json!({
                "name": "Idempotency-Key", "in": "header", "required": false,
                "description": "Makes the request once: sent again with the same key (or the body's `idempotencyKey`), it answers with the first request's answer and makes no second effect; kept 24 h. The same key with another request is a 422 `idempotency_key_reused`; a header and a body key that differ are a 400.",
                "schema": {"type": "string", "minLength": 1, "maxLength": 255}
            }));
        }
        let mut entry = json!({
            "summary": operation.summary,
            "operationId": operation.id,
            "responses": responses,
        });
        if !parameters.is_empty() {
            entry["parameters"] = Value::Array(parameters);
        }
        if let Some(schema) = operation.request {
            entry["requestBody"] = json!({"required": true, "content": {
                "application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}
            }});
        }
        if !operation.authenticated {
            entry["security"] = json!([]);
        }
        if let Some(scope) = operation.scope {
            entry["security"] = json!([{"bearer": [scope.as_str()]}]);
            entry["x-baton-scope"] = json!(scope.as_str());
        }
        let path = paths
            .entry(operation.path.to_string())
            .or_insert_with(|| json!({}));
        path[operation.method] = entry;
    }
    let schemas = schemas::component_schemas();
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Baton",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "A plan-driven multi-agent orchestrator: submit a task envelope, follow its frames, answer what it asks people, get output that meets its contract."
        },
        "security": [{"bearer": []}],
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "a static token mapped to a tenant and its scopes (BATON_API_TOKENS), or an OIDC JWT of the configured issuer (BATON_OIDC_ISSUER); each operation names the scope it needs"}},
            "schemas": schemas
        },
        "paths": paths
    })
}
