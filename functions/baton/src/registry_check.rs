//! `baton registry check [DIR]`: every file of a registry folder against
//! its JSON Schema (`registry/schemas/`, generated from the Rust types),
//! every error with its file and JSON path; then, when the shapes hold,
//! the registry loaded as Baton loads it (facets exist, schemas compile,
//! prompt files are there, tools are known), the first error named the
//! same way.

use std::path::{Path, PathBuf};

use baton_core::basics::schema::{compile_schema, json_path_for_pointer};
use baton_core::catalog::registry_schemas::{registry_file_schemas, schema_file_for_folder};
use baton_runtime::RuntimeError;
use serde_json::Value;

use crate::failure::{Ended, Outcome, invalid};

fn json_files(folder: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(folder)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .filter(|path| path.extension().and_then(|e| e.to_str()) == Some("json"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// Every shape error of the folder's files: `file: $.path: message`.
fn shape_errors(directory: &Path) -> (Vec<String>, usize) {
    let schemas: std::collections::BTreeMap<&str, Value> =
        registry_file_schemas().into_iter().collect();
    let mut errors = Vec::new();
    let mut checked = 0;
    let mut targets: Vec<(PathBuf, &str)> = Vec::new();
    for folder in ["capabilities", "facets", "tools"] {
        if let Some(schema) = schema_file_for_folder(folder) {
            for file in json_files(&directory.join(folder)) {
                targets.push((file, schema));
            }
        }
    }
    let prices = directory.join("models.json");
    if prices.exists() {
        targets.push((prices, "models.schema.json"));
    }
    let tenants = directory.join("tenants.json");
    if tenants.exists() {
        targets.push((tenants, "tenants.schema.json"));
    }
    for (file, schema_name) in targets {
        checked += 1;
        let shown = file.display();
        let text = match std::fs::read_to_string(&file) {
            Ok(text) => text,
            Err(error) => {
                errors.push(format!("{shown}: cannot be read: {error}"));
                continue;
            }
        };
        let document: Value = match serde_json::from_str(&text) {
            Ok(document) => document,
            Err(error) => {
                errors.push(format!(
                    "{shown}: $: not JSON (line {}, column {}): {error}",
                    error.line(),
                    error.column()
                ));
                continue;
            }
        };
        // A credential written in the catalog gets the message that says
        // what to write instead, not the schema's "unexpected property".
        if schema_name == "models.schema.json"
            && let Err((path, message)) =
                baton_core::catalog::model_catalog::ModelCatalog::refuse_literal_credentials(
                    &document,
                )
        {
            errors.push(format!("{shown}: {path}: {message}"));
            continue;
        }
        let validator = match compile_schema(&schemas[schema_name], schema_name) {
            Ok(validator) => validator,
            Err(error) => {
                errors.push(format!("{schema_name}: {error}"));
                continue;
            }
        };
        for error in validator.iter_errors(&document) {
            let path = json_path_for_pointer("$", &error.instance_path().to_string());
            errors.push(format!("{shown}: {path}: {error}"));
        }
    }
    (errors, checked)
}

/// `baton registry check [DIR]`: exit 0 when the folder is a registry
/// Baton loads, 2 with every error on stderr.
pub fn check(directory: &Path) -> Outcome {
    if !directory.is_dir() {
        return Err(invalid(format!(
            "registry check: {} is not a folder",
            directory.display()
        )));
    }
    let (errors, checked) = shape_errors(directory);
    if !errors.is_empty() {
        for error in &errors {
            eprintln!("{error}");
        }
        return Err(invalid(format!(
            "registry check: {} error(s) in {} file(s) checked",
            errors.len(),
            checked
        )));
    }
    match baton_runtime::registry_loader::load_registry(directory) {
        Ok(registry) => {
            println!(
                "ok: {}: {} file(s) follow their schemas; {} capabilities, {} facets, {} tools, {} models",
                directory.display(),
                checked,
                registry.capabilities().count(),
                registry.facets.len(),
                registry.tools().count(),
                registry.models().models.len()
            );
            for (name, provider) in &registry.models().providers {
                let models: Vec<&str> = registry
                    .models()
                    .models
                    .iter()
                    .filter(|(_, model)| &model.provider == name)
                    .map(|(model, _)| model.as_str())
                    .collect();
                println!(
                    "provider {name} ({}): {}{}",
                    provider.kind,
                    provider_reach(provider),
                    if models.is_empty() {
                        "; no models".to_string()
                    } else {
                        format!("; models: {}", models.join(", "))
                    }
                );
            }
            print_default_model(directory);
            Ok(Ended::Completed)
        }
        Err(RuntimeError::Registry(baton_core::CoreError::InvalidRegistry {
            source_name,
            path,
            message,
        })) => {
            // Folder files are named by their path; root files by their name.
            let file = if Path::new(&source_name).exists() {
                PathBuf::from(&source_name)
            } else {
                directory.join(&source_name)
            };
            Err(invalid(format!("{}: {path}: {message}", file.display())))
        }
        Err(other) => Err(invalid(format!("{}: {other}", directory.display()))),
    }
}

/// Where a provider is reached and where its key comes from, as
/// `registry check` lists it (never a key's value).
fn provider_reach(provider: &baton_core::catalog::model_catalog::ProviderSettings) -> String {
    let endpoint = match (&provider.base_url_variable, &provider.base_url) {
        (Some(variable), Some(url)) => format!("endpoint ${variable} (else {url})"),
        (Some(variable), None) => format!("endpoint ${variable}"),
        (None, Some(url)) => format!("endpoint {url}"),
        (None, None) => "in process".to_string(),
    };
    match &provider.api_key_variable {
        Some(variable) => format!("{endpoint}, key ${variable}"),
        None => endpoint,
    }
}

/// The deployment's default model as the catalog lists it once the
/// deployment starts (`BATON_LLM_MODEL`, or the offline model), with its
/// provider and whether the file prices it.
fn print_default_model(directory: &Path) {
    let Ok(configuration) = crate::setup::configuration() else {
        return;
    };
    let Ok(registry) = crate::setup::load_registry(Some(directory.to_path_buf()), &configuration)
    else {
        return;
    };
    let catalog = registry.models();
    match catalog
        .deployment_default
        .as_deref()
        .and_then(|name| catalog.model(name).map(|model| (name, model)))
    {
        Some((name, model)) => println!(
            "default model {name}: provider {}; {}",
            model.provider,
            if catalog.is_priced(name) {
                "priced by models.json"
            } else {
                "prices unknown (not in models.json): its cost is not counted"
            }
        ),
        None => println!(
            "default model: none named (set BATON_LLM_MODEL, or give the catalog a `local` model)"
        ),
    }
}
