//! JSON Schemas of the files a registry folder and a caller write: the task
//! envelope, a capability, a facet, a tool and the model price table,
//! generated from the Rust types that read them (so they cannot drift) and
//! checked into `registry/schemas/` (a test compares;
//! `BATON_UPDATE_SCHEMAS=1 cargo test -p baton-core registry_schema_files`
//! rewrites them). Registry files name theirs with `$schema`, which the
//! readers ignore. The schemas describe the shape; meaning (a facet's
//! schema compiles, a capability's facets exist, …) is checked by the
//! registry loader and `baton registry check`.

use serde_json::{Value, json};

/// Where the schema files live, from the repository root.
pub const REGISTRY_SCHEMA_DIRECTORY: &str = "registry/schemas";

fn schema_of<T: schemars::JsonSchema>(title: &str, description: &str) -> Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null);
    if let Some(fields) = schema.as_object_mut() {
        fields.insert("title".into(), json!(title));
        fields.insert("description".into(), json!(description));
        // The file's own `$schema` reference is allowed (and ignored).
        if let Some(Value::Object(properties)) = fields.get_mut("properties") {
            properties.insert(
                "$schema".into(),
                json!({"type": "string", "description": "this file's JSON Schema (for editors; ignored)"}),
            );
        }
    }
    schema
}

/// `(file name, schema)` of every registry file kind and the envelope.
pub fn registry_file_schemas() -> Vec<(&'static str, Value)> {
    vec![
        (
            "envelope.schema.json",
            schema_of::<crate::contracts::envelope::TaskEnvelope>(
                "Baton task envelope",
                "What a caller submits: objective, inputs, constraints, policies and the exact JSON output contract.",
            ),
        ),
        (
            "capability.schema.json",
            schema_of::<crate::contracts::capability::CapabilityRegistration>(
                "Baton capability",
                "A registry capability (registry/capabilities/*.json) or a tenant's registration.",
            ),
        ),
        (
            "facet.schema.json",
            schema_of::<crate::contracts::facet::Facet>(
                "Baton facet",
                "A named input or output with its JSON Schema (registry/facets/*.json).",
            ),
        ),
        (
            "tool.schema.json",
            schema_of::<crate::catalog::tools::ToolDefinition>(
                "Baton tool",
                "A tool agents may call, with its parameters' JSON Schema and executor (registry/tools/*.json).",
            ),
        ),
        (
            "models.schema.json",
            schema_of::<crate::catalog::model_catalog::ModelCatalog>(
                "Baton model catalog",
                "The providers a deployment reaches (credentials named, never written) and the models: provider, model id, prices per million tokens, limits and what each supports (registry/models.json).",
            ),
        ),
        (
            "dataset.schema.json",
            schema_of::<crate::contracts::dataset::DatasetLine>(
                "Baton evaluation dataset line",
                "One line of an evaluation dataset (JSONL, registry/examples/datasets/): the optional header `{\"dataset\": {name, template?, judges?}}`, then one example per line: `{id, envelope | inputs, expect?}`.",
            ),
        ),
        (
            "content-rules.schema.json",
            schema_of::<crate::contracts::content_rules::ContentRules>(
                "Baton content rules",
                "Limits a delivered text keeps where the registry declares them (registry/rules/*.json): its length, forbidden words and hashtags, on the facets named, for runs whose envelope matches `appliesWhen` (JSONLogic over objective, inputs and constraints).",
            ),
        ),
        (
            "tenants.schema.json",
            schema_of::<crate::catalog::tenant_settings::TenantSettings>(
                "Baton tenant settings",
                "Per-tenant settings over the deployment's defaults: how long a tenant's ended runs are kept (registry/tenants.json).",
            ),
        ),
    ]
}

/// The schema of a registry folder's file, by the folder it is in.
pub fn schema_file_for_folder(folder: &str) -> Option<&'static str> {
    match folder {
        "capabilities" => Some("capability.schema.json"),
        "facets" => Some("facet.schema.json"),
        "tools" => Some("tool.schema.json"),
        "rules" => Some("content-rules.schema.json"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checked-in schema files are what the Rust types generate.
    #[test]
    fn registry_schema_files_match_the_rust_types() {
        let directory = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(REGISTRY_SCHEMA_DIRECTORY);
        let update = std::env::var("BATON_UPDATE_SCHEMAS").is_ok_and(|value| value == "1");
        let mut stale = Vec::new();
        for (name, schema) in registry_file_schemas() {
            let path = directory.join(name);
            let generated = format!("{}\n", serde_json::to_string_pretty(&schema).unwrap());
            if std::fs::read_to_string(&path).unwrap_or_default() != generated {
                if update {
                    std::fs::create_dir_all(&directory).unwrap();
                    std::fs::write(&path, generated).unwrap();
                } else {
                    stale.push(path.display().to_string());
                }
            }
        }
        assert!(
            stale.is_empty(),
            "registry schemas differ from the Rust types (rerun with BATON_UPDATE_SCHEMAS=1): {stale:?}"
        );
    }

    /// Every file of the repository's registry and every example envelope
    /// follows its schema and names it with `$schema`.
    #[test]
    fn the_repository_registry_follows_its_schemas() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let schemas: std::collections::BTreeMap<&str, Value> =
            registry_file_schemas().into_iter().collect();
        let mut checked = 0;
        for (folder, schema_name) in [
            ("registry/capabilities", "capability.schema.json"),
            ("registry/facets", "facet.schema.json"),
            ("registry/tools", "tool.schema.json"),
            ("registry/examples", "envelope.schema.json"),
        ] {
            let validator =
                crate::basics::schema::compile_schema(&schemas[schema_name], schema_name).unwrap();
            for entry in std::fs::read_dir(root.join(folder)).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().and_then(|e| e.to_str()) != Some("json") {
                    continue;
                }
                let document: Value =
                    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
                let errors: Vec<String> = validator
                    .iter_errors(&document)
                    .map(|error| format!("{}: {error}", error.instance_path()))
                    .collect();
                assert!(errors.is_empty(), "{}: {errors:?}", path.display());
                assert_eq!(
                    document["$schema"],
                    json!(format!("../schemas/{schema_name}")),
                    "{} names its schema",
                    path.display()
                );
                checked += 1;
            }
        }
        assert!(checked >= 30, "{checked} files");
    }
}
