//! Reads `registry/` from disk: `facets/*.json`, `tools/*.json` and
//! `contexts/*.json` (both optional),
//! `capabilities/*.json` and the prompt files capabilities name in
//! `promptTemplateFile`, the example envelopes of `examples/*.json` and
//! the content rules of `rules/*.json` (both optional). Every error names the file (and the JSON path
//! inside it).

use std::path::{Path, PathBuf};

use baton_core::CoreError;
use baton_core::catalog::registry::{Registry, RegistryDocument};
use serde_json::Value;

use crate::error::RuntimeError;

/// Where registry files come from: a directory, or the copy built into the binary.
trait RegistrySource {
    /// `(source name, text)` of every `*.json` file in `folder`, by name.
    fn json_files(&self, folder: &str) -> Result<Vec<(String, String)>, RuntimeError>;
    /// The text of `relative` (a prompt file, the chat agent, the price table).
    fn text(&self, relative: &str) -> Result<String, RuntimeError>;
    /// Whether the optional `folder` exists.
    fn has_folder(&self, folder: &str) -> bool;

    fn has_file(&self, relative: &str) -> bool;
}

struct DirectorySource<'a>(&'a Path);

impl RegistrySource for DirectorySource<'_> {
    fn json_files(&self, folder: &str) -> Result<Vec<(String, String)>, RuntimeError> {
        let directory = self.0.join(folder);
        let entries = std::fs::read_dir(&directory).map_err(|error| RuntimeError::Io {
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
        files
            .into_iter()
            .map(|path| {
                let text = std::fs::read_to_string(&path).map_err(|error| RuntimeError::Io {
                    path: path.display().to_string(),
                    message: error.to_string(),
                })?;
                Ok((path.display().to_string(), text))
            })
            .collect()
    }

    fn has_folder(&self, folder: &str) -> bool {
        self.0.join(folder).is_dir()
    }

    fn has_file(&self, relative: &str) -> bool {
        self.0.join(relative).is_file()
    }

    fn text(&self, relative: &str) -> Result<String, RuntimeError> {
        let path = self.0.join(relative);
        std::fs::read_to_string(&path).map_err(|error| RuntimeError::Io {
            path: path.display().to_string(),
            message: format!("cannot read it: {error}"),
        })
    }
}

/// The repository's `registry/`, built into the binary so a deployed
/// function needs no files beside it.
static EMBEDDED_REGISTRY: include_dir::Dir<'static> =
    include_dir::include_dir!("$CARGO_MANIFEST_DIR/../../registry");

struct EmbeddedSource;

impl RegistrySource for EmbeddedSource {
    fn json_files(&self, folder: &str) -> Result<Vec<(String, String)>, RuntimeError> {
        let directory = EMBEDDED_REGISTRY
            .get_dir(folder)
            .ok_or_else(|| RuntimeError::Io {
                path: format!("(built-in registry)/{folder}"),
                message: "missing from the built-in registry".into(),
            })?;
        let mut files: Vec<(String, String)> = directory
            .files()
            .filter(|file| {
                file.path()
                    .extension()
                    .is_some_and(|extension| extension == "json")
            })
            .map(|file| {
                (
                    format!("(built-in registry)/{}", file.path().display()),
                    file.contents_utf8().unwrap_or_default().to_string(),
                )
            })
            .collect();
        files.sort();
        Ok(files)
    }

    fn has_folder(&self, folder: &str) -> bool {
        EMBEDDED_REGISTRY.get_dir(folder).is_some()
    }

    fn has_file(&self, relative: &str) -> bool {
        EMBEDDED_REGISTRY.get_file(relative).is_some()
    }

    fn text(&self, relative: &str) -> Result<String, RuntimeError> {
        EMBEDDED_REGISTRY
            .get_file(relative)
            .and_then(|file| file.contents_utf8())
            .map(str::to_string)
            .ok_or_else(|| RuntimeError::Io {
                path: format!("(built-in registry)/{relative}"),
                message: "missing from the built-in registry".into(),
            })
    }
}

/// The orchestrator's chat agent (optional).
const CHAT_FILE: &str = "chat.json";
/// The example envelopes the developer sandbox offers (optional).
const EXAMPLES_FOLDER: &str = "examples";
/// Content rules checked on node answers (optional).
const CONTENT_RULES_FOLDER: &str = "rules";
/// The model catalog: providers and models (optional).
const MODEL_CATALOG_FILE: &str = "models.json";
/// Per-tenant settings (optional).
const TENANT_SETTINGS_FILE: &str = "tenants.json";

fn load_from(source: &dyn RegistrySource) -> Result<Registry, RuntimeError> {
    let facet_documents: Vec<RegistryDocument> = source
        .json_files("facets")?
        .into_iter()
        .map(|(source_name, text)| RegistryDocument { source_name, text })
        .collect();
    let tool_documents: Vec<RegistryDocument> = if source.has_folder("tools") {
        source
            .json_files("tools")?
            .into_iter()
            .map(|(source_name, text)| RegistryDocument { source_name, text })
            .collect()
    } else {
        Vec::new()
    };
    let mut capability_documents = Vec::new();
    for (source_name, text) in source.json_files("capabilities")? {
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
                let prompt = source.text(&relative).map_err(|error| {
                    RuntimeError::Registry(CoreError::InvalidRegistry {
                        source_name: source_name.clone(),
                        path: "$.promptTemplateFile".into(),
                        message: error.to_string(),
                    })
                })?;
                Some(prompt.trim_end().to_string())
            }
        };
        capability_documents.push((RegistryDocument { source_name, text }, instructions));
    }
    let mut registry = Registry::from_documents_with_tools(
        &facet_documents,
        &tool_documents,
        &capability_documents,
    )
    .map_err(RuntimeError::Registry)?;
    if source.has_folder("contexts") {
        let context_documents: Vec<RegistryDocument> = source
            .json_files("contexts")?
            .into_iter()
            .map(|(source_name, text)| RegistryDocument { source_name, text })
            .collect();
        registry
            .add_context_documents(&context_documents)
            .map_err(RuntimeError::Registry)?;
    }
    if source.has_folder(CONTENT_RULES_FOLDER) {
        for (source_name, text) in source.json_files(CONTENT_RULES_FOLDER)? {
            registry
                .add_content_rules_document(&RegistryDocument { source_name, text })
                .map_err(RuntimeError::Registry)?;
        }
    }
    if source.has_folder(EXAMPLES_FOLDER) {
        for (source_name, text) in source.json_files(EXAMPLES_FOLDER)? {
            registry
                .add_example_document(&RegistryDocument { source_name, text })
                .map_err(RuntimeError::Registry)?;
        }
    }
    if source.has_file(CHAT_FILE) {
        let text = source.text(CHAT_FILE)?;
        registry
            .add_chat_document(&RegistryDocument {
                source_name: CHAT_FILE.into(),
                text,
            })
            .map_err(RuntimeError::Registry)?;
    }
    if source.has_file(MODEL_CATALOG_FILE) {
        let text = source.text(MODEL_CATALOG_FILE)?;
        registry
            .add_model_catalog_document(&RegistryDocument {
                source_name: MODEL_CATALOG_FILE.into(),
                text,
            })
            .map_err(RuntimeError::Registry)?;
    }
    if source.has_file(TENANT_SETTINGS_FILE) {
        let text = source.text(TENANT_SETTINGS_FILE)?;
        registry
            .add_tenant_settings_document(&RegistryDocument {
                source_name: TENANT_SETTINGS_FILE.into(),
                text,
            })
            .map_err(RuntimeError::Registry)?;
    }
    // Capabilities and the chat agent name catalog models: checked once all are read.
    if let Some(settings) = registry.chat_settings() {
        baton_core::planning::model_choice::check_chat_model(settings, registry.models()).map_err(
            |(path, message)| {
                RuntimeError::Registry(CoreError::InvalidRegistry {
                    source_name: CHAT_FILE.into(),
                    path,
                    message,
                })
            },
        )?;
    }
    // Capabilities name catalog models.
    registry
        .capabilities()
        .try_for_each(|capability| {
            baton_core::planning::model_choice::check_capability_models(
                capability,
                registry.models(),
            )
            .map_err(|(path, message)| (capability.capability_id.clone(), path, message))
        })
        .map_err(|(capability_id, path, message)| {
            let source_name = capability_documents
                .iter()
                .find(|(document, _)| {
                    serde_json::from_str::<Value>(&document.text).is_ok_and(|value| {
                        value.get("capabilityId").and_then(Value::as_str)
                            == Some(capability_id.as_str())
                    })
                })
                .map(|(document, _)| document.source_name.clone())
                .unwrap_or(capability_id);
            RuntimeError::Registry(CoreError::InvalidRegistry {
                source_name,
                path,
                message,
            })
        })?;
    Ok(registry)
}

/// Loads and validates the registry rooted at `registry_root`.
pub fn load_registry(registry_root: &Path) -> Result<Registry, RuntimeError> {
    load_from(&DirectorySource(registry_root))
}

/// Loads and validates the registry built into the binary (the
/// repository's `registry/` when it was compiled).
pub fn load_embedded_registry() -> Result<Registry, RuntimeError> {
    load_from(&EmbeddedSource)
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
        let dated = registry.models().price_of("gpt-4o-mini-2024-07-18");
        assert_eq!(dated.map(|price| price.input_per_million_usd), Some(0.15));
    }

    #[test]
    fn the_built_in_registry_equals_the_repository_registry() {
        let built_in = load_embedded_registry().unwrap();
        let on_disk = load_registry(&repository_registry()).unwrap();
        let ids = |registry: &Registry| {
            registry
                .capabilities()
                .map(|capability| {
                    (
                        capability.capability_id.clone(),
                        capability.instructions.clone(),
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&built_in), ids(&on_disk));
        assert_eq!(built_in.facets.len(), on_disk.facets.len());
        let names = |registry: &Registry| {
            registry
                .tools()
                .map(|tool| tool.name.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&built_in), names(&on_disk));
        assert_eq!(
            names(&on_disk),
            [
                "agent_create_plan",
                "memory_put",
                "memory_search",
                "registry_search"
            ]
        );
        let general = built_in.context_guidance("global").unwrap();
        assert_eq!(Some(general), on_disk.context_guidance("general"));
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
