//! Tools as registry data: the repository's tool files load, bad definitions
//! are refused naming the JSON path, a call's arguments are checked against
//! the tool's schema, capabilities may only name known tools, and the
//! read-only `registry_search` finds capabilities and facets.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::{Path, PathBuf};

use baton_core::basics::schema::ValidatorCache;
use baton_core::catalog::registry::{Registry, RegistryDocument};
use baton_core::catalog::registry_search::search_registry;
use baton_core::catalog::tools::{BuiltinTool, ToolDefinition, ToolExecutor};
use serde_json::{Value, json};

fn repository(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(relative)
}

fn read(folder: &str) -> Vec<RegistryDocument> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(repository(folder))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "json")
        })
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| RegistryDocument {
            source_name: path.display().to_string(),
            text: std::fs::read_to_string(&path).unwrap(),
        })
        .collect()
}

fn registry_with(
    tools: &[RegistryDocument],
    extra_capability: Option<Value>,
) -> Result<Registry, String> {
    let mut capabilities: Vec<(RegistryDocument, Option<String>)> = read("registry/capabilities")
        .into_iter()
        .map(|document| (document, None))
        .collect();
    if let Some(capability) = extra_capability {
        capabilities.push((
            RegistryDocument {
                source_name: "extra.json".into(),
                text: capability.to_string(),
            },
            None,
        ));
    }
    Registry::from_documents_with_tools(&read("registry/facets"), tools, &capabilities)
        .map_err(|error| error.to_string())
}

fn tool(definition: Value) -> RegistryDocument {
    RegistryDocument {
        source_name: "tools/t.json".into(),
        text: definition.to_string(),
    }
}

#[test]
fn the_repository_tools_load_and_the_plan_tool_keeps_its_published_definition() {
    let registry = registry_with(&read("registry/tools"), None).unwrap();
    let plan = registry.tool("agent_create_plan").unwrap();
    assert_eq!(
        plan.executor,
        ToolExecutor::Builtin {
            operation: BuiltinTool::AgentCreatePlan
        }
    );
    assert_eq!(plan.parameters["required"], json!(["objective"]));
    assert_eq!(
        plan.parameters["properties"]["execution_mode"]["enum"],
        json!(["auto_execute", "draft_only", "agent_review"])
    );
    assert!(registry.tool("registry_search").is_some());
}

#[test]
fn bad_tool_definitions_are_refused_with_the_path() {
    let http = |executor: Value| {
        json!({"name": "lookup", "description": "Looks a thing up.",
               "parameters": {"type": "object", "properties": {"id": {"type": "string"}}},
               "executor": executor})
    };
    let cases = [
        (
            json!({"name": "bad name!", "description": "d", "parameters": {"type": "object"},
                   "executor": {"kind": "builtin", "operation": "registry_search"}}),
            "$.name",
        ),
        (
            json!({"name": "t", "description": " ", "parameters": {"type": "object"},
                   "executor": {"kind": "builtin", "operation": "registry_search"}}),
            "$.description",
        ),
        (
            json!({"name": "t", "description": "d", "parameters": {"type": "string"},
                   "executor": {"kind": "builtin", "operation": "registry_search"}}),
            "$.parameters",
        ),
        (
            json!({"name": "t", "description": "d", "parameters": {"type": "object", "properties": {"a": {"type": "nonsense"}}},
                   "executor": {"kind": "builtin", "operation": "registry_search"}}),
            "$.parameters",
        ),
        (
            http(json!({"kind": "http", "method": "FETCH", "url": "https://tools.example/lookup"})),
            "$.executor.method",
        ),
        (
            http(json!({"kind": "http", "method": "GET", "url": "ftp://tools.example/lookup"})),
            "$.executor.url",
        ),
        (
            http(
                json!({"kind": "http", "method": "GET", "url": "https://tools.example/items/{item}"}),
            ),
            "$.executor.url",
        ),
        (
            http(
                json!({"kind": "http", "method": "GET", "url": "https://tools.example/items/{id}",
                        "headers": {"Authorization": "Bearer hard-coded"}}),
            ),
            "$.executor.headers.Authorization",
        ),
        (
            http(
                json!({"kind": "http", "method": "GET", "url": "https://tools.example/", "timeoutMs": 0}),
            ),
            "$.executor",
        ),
        (
            json!({"name": "t", "description": "d", "parameters": {"type": "object"},
                   "executor": {"kind": "mcp", "server": {"transport": "stdio", "command": ""}}}),
            "$.executor.server.command",
        ),
        (
            json!({"name": "t", "description": "d", "parameters": {"type": "object"},
                   "executor": {"kind": "teleport"}}),
            "$.executor",
        ),
    ];
    for (definition, path) in cases {
        let error = registry_with(&[tool(definition.clone())], None).unwrap_err();
        assert!(
            error.contains("tools/t.json") && error.contains(path),
            "{definition}: expected {path}, got {error}"
        );
    }
    let duplicate = read("registry/tools")
        .into_iter()
        .chain(read("registry/tools"))
        .collect::<Vec<_>>();
    assert!(
        registry_with(&duplicate, None)
            .unwrap_err()
            .contains("duplicate tool")
    );
}

#[test]
fn a_secret_header_comes_from_the_environment_and_placeholders_name_parameters() {
    let definition = json!({"name": "lookup", "description": "Looks a thing up.",
        "parameters": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}},
        "executor": {"kind": "http", "method": "GET", "url": "https://tools.example/items/{id}",
                     "headers": {"Authorization": {"env": "LOOKUP_TOKEN", "prefix": "Bearer "},
                                 "Accept": "application/json"}}});
    let registry = registry_with(&[tool(definition)], None).unwrap();
    let lookup: &ToolDefinition = registry.tool("lookup").unwrap();
    let validators = ValidatorCache::new();
    assert!(
        lookup
            .argument_violations(&json!({"id": "42"}), &validators)
            .is_empty()
    );
    let wrong = lookup.argument_violations(&json!({"id": 42}), &validators);
    assert_eq!(wrong.len(), 1);
    assert_eq!(wrong[0].instance_pointer, "/id");
    assert!(
        !lookup
            .argument_violations(&json!({}), &validators)
            .is_empty()
    );
}

#[test]
fn capabilities_may_name_only_known_tools() {
    let capability = |tools: Value| {
        json!({"capabilityId": "agent.researcher", "agentType": "ai", "version": "1", "displayName": "Researcher",
               "summary": "s", "inputContract": [], "outputContract": ["feedback"], "tools": tools, "maxIterations": 4})
    };
    let tools = read("registry/tools");
    let registry = registry_with(&tools, Some(capability(json!(["registry_search"])))).unwrap();
    let researcher = registry.capability("agent.researcher").unwrap();
    assert_eq!(researcher.tools, ["registry_search"]);
    assert_eq!(researcher.max_iterations, Some(4));
    let unknown = registry_with(
        &tools,
        Some(capability(json!(["registry_search", "teleport"]))),
    )
    .unwrap_err();
    assert!(
        unknown.contains("$.tools[1]") && unknown.contains("teleport"),
        "{unknown}"
    );
}

#[test]
fn registry_search_finds_capabilities_and_facets_by_their_words() {
    let registry = registry_with(&read("registry/tools"), None).unwrap();
    let found = search_registry(&registry, "copy variants", None, 10);
    let ids: Vec<&str> = found["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|found| found["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"ContentGenerator.copyVariants"), "{found}");
    assert!(ids.contains(&"copyVariants"), "{found}");
    let only_facets = search_registry(&registry, "copy variants", Some("facet"), 10);
    assert!(
        only_facets["matches"]
            .as_array()
            .unwrap()
            .iter()
            .all(|found| found["kind"] == "facet")
    );
    let limited = search_registry(&registry, "review", None, 1);
    assert_eq!(limited["matches"].as_array().unwrap().len(), 1);
    assert!(limited["total"].as_u64().unwrap() > 1);
    let nothing = search_registry(&registry, "zzzz", None, 10);
    assert_eq!(nothing["total"], 0);
}

/// Ranked by BM25, not by how many query words an entry shares: a word
/// few entries have counts for more than one many have. Here every match
/// shares one word with the query, so counting words would tie them all
/// and put the extra capability (its id sorts last) at the end.
#[test]
fn registry_search_puts_the_entry_with_the_rarer_word_first() {
    let registry = registry_with(
        &read("registry/tools"),
        Some(json!({
            "capabilityId": "Zz.extra",
            "agentType": "ai",
            "version": "1",
            "displayName": "Extra",
            "summary": "Answers from the quillwort archive.",
            "kind": "execution",
            "inputContract": ["writerBrief"],
            "outputContract": ["copyVariants"],
            "cost": {"tier": "standard", "estimatedTokens": 100}
        })),
    )
    .unwrap();
    let found = search_registry(&registry, "review quillwort", None, 25);
    let ids: Vec<&str> = found["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|found| found["id"].as_str().unwrap())
        .collect();
    assert!(ids.len() > 2, "{found}");
    assert_eq!(ids[0], "Zz.extra", "{found}");
    assert_eq!(found["searchedBy"], "words");
}

#[test]
fn context_types_are_registry_data_and_join_the_prompt_by_name_or_alias() {
    let mut registry = registry_with(&read("registry/tools"), None).unwrap();
    registry
        .add_context_documents(&read("registry/contexts"))
        .unwrap();
    let general = registry
        .context_guidance("global")
        .expect("an alias answers");
    assert_eq!(Some(general), registry.context_guidance("general"));
    let section = general.prompt_section();
    assert!(
        section.starts_with("Context: general. Intent: "),
        "{section}"
    );
    assert!(section.contains("\n- "), "{section}");
    assert!(registry.context_guidance("no-such-context").is_none());
    let twice = registry
        .add_context_documents(&[RegistryDocument {
            source_name: "contexts/again.json".into(),
            text: json!({"name": "other", "aliases": ["global"], "intent": "i"}).to_string(),
        }])
        .unwrap_err()
        .to_string();
    assert!(
        twice.contains("contexts/again.json") && twice.contains("`global`"),
        "{twice}"
    );
    let blank = registry
        .add_context_documents(&[RegistryDocument {
            source_name: "contexts/blank.json".into(),
            text: json!({"name": "blank", "intent": " "}).to_string(),
        }])
        .unwrap_err()
        .to_string();
    assert!(blank.contains("$.intent"), "{blank}");
}
