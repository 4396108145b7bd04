//! Reads `registry/` from disk: `facets/*.json`, `capabilities/*.json` and the
//! prompt files capabilities name in `promptTemplateFile`. Every error names
//! the file (and the JSON path inside it).

use std::path::{Path, PathBuf};

use baton_core::CoreError;
use baton_core::registry::{Registry, RegistryDocument};
use serde_json::Value;

use crate::error::RuntimeError;

fn json_files_in(directory: &Path) -> Result<Vec<PathBuf>, RuntimeError> {
    let entries = std::fs::read_dir(directory).map_err(|error| RuntimeError::Io {
        path: directory.display().to_string(),
        message: error.to_string(),
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "json")
        })
        .collect();
    files.sort();
    Ok(files)
}

fn read_text(path: &Path) -> Result<String, RuntimeError> {
    std::fs::read_to_string(path).map_err(|error| RuntimeError::Io {
        path: path.display().to_string(),
        message: error.to_string(),
    })
}

/// Loads and validates the registry rooted at `registry_root`.
pub fn load_registry(registry_root: &Path) -> Result<Registry, RuntimeError> {
    let mut facet_documents = Vec::new();
    for path in json_files_in(&registry_root.join("facets"))? {
        facet_documents.push(RegistryDocument {
            source_name: path.display().to_string(),
            text: read_text(&path)?,
        });
    }
    let mut capability_documents = Vec::new();
    for path in json_files_in(&registry_root.join("capabilities"))? {
        let text = read_text(&path)?;
        let source_name = path.display().to_string();
        let prompt_file = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|document| {
                document
                    .get("promptTemplateFile")
                    .and_then(Value::as_str)
                    .map(String::from)
            });
        let instructions = match prompt_file {
            None => None,
            Some(relative) => {
                let prompt_path = registry_root.join(&relative);
                let prompt = std::fs::read_to_string(&prompt_path).map_err(|error| {
                    RuntimeError::Registry(CoreError::InvalidRegistry {
                        source_name: source_name.clone(),
                        path: "$.promptTemplateFile".into(),
                        message: format!("cannot read {}: {error}", prompt_path.display()),
                    })
                })?;
                Some(prompt.trim_end().to_string())
            }
        };
        capability_documents.push((RegistryDocument { source_name, text }, instructions));
    }
    Registry::from_documents(&facet_documents, &capability_documents)
        .map_err(RuntimeError::Registry)
}

/// `BATON_REGISTRY_DIR`, else `./registry`.
pub fn default_registry_root() -> PathBuf {
    std::env::var_os("BATON_REGISTRY_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("registry"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repository_registry() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../registry")
    }

    #[test]
    fn the_repository_registry_loads() {
        let registry = load_registry(&repository_registry()).unwrap();
        assert!(
            registry.facets.len() >= 25,
            "{} facets",
            registry.facets.len()
        );
        assert!(registry.capabilities().count() >= 11);
        assert!(
            registry
                .capabilities()
                .all(|capability| capability.instructions.is_some())
        );
    }

    #[test]
    fn a_missing_prompt_file_names_the_capability_file() {
        let root = std::env::temp_dir().join(format!("baton-registry-{}", std::process::id()));
        std::fs::create_dir_all(root.join("facets")).unwrap();
        std::fs::create_dir_all(root.join("capabilities")).unwrap();
        std::fs::write(
            root.join("facets/a.json"),
            r#"{"name": "a", "title": "A", "description": "d", "schema": {"type": "string"}, "direction": "bidirectional"}"#,
        )
        .unwrap();
        std::fs::write(
            root.join("capabilities/c.json"),
            r#"{"capabilityId": "c", "agentType": "ai", "version": "1", "displayName": "C", "summary": "s",
                "inputContract": [], "outputContract": ["a"], "promptTemplateFile": "prompts/missing.md"}"#,
        )
        .unwrap();
        let error = load_registry(&root).unwrap_err().to_string();
        std::fs::remove_dir_all(&root).unwrap();
        assert!(
            error.contains("c.json") && error.contains("promptTemplateFile"),
            "{error}"
        );
    }
}
