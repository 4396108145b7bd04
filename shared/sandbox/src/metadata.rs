//! The registry as a developer reads it: `GET /sandbox/metadata` and the
//! viewer's sandbox page.

use baton_core::catalog::envelope_examples::EnvelopeExample;
use baton_core::catalog::registry::Registry;
use baton_core::contracts::capability::{AgentType, NodeKind};
use baton_core::contracts::facet::FacetDirection;
use serde::Serialize;
use serde_json::{Map, Value};

/// Everything a developer needs to write an envelope for this registry.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxMetadata {
    /// Every capability, by id.
    pub capabilities: Vec<SandboxCapability>,
    /// Every facet, by name.
    pub facets: Vec<SandboxFacet>,
    /// The JSON Schemas of an envelope, a capability and a facet, by name
    /// (`envelope`, `capability`, `facet`).
    pub schemas: Map<String, Value>,
    /// The envelope's `policies` keys, each with what it does.
    pub policies: Vec<SandboxPolicy>,
    /// The registry's example envelopes.
    pub examples: Vec<EnvelopeExample>,
}

/// One capability: who does it and what it consumes and produces.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxCapability {
    pub capability_id: String,
    pub display_name: String,
    pub summary: String,
    pub agent_type: AgentType,
    pub kind: NodeKind,
    pub consumes: Vec<String>,
    pub produces: Vec<String>,
}

/// One facet: its schema and the capabilities that make and read it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxFacet {
    pub name: String,
    pub title: String,
    pub description: String,
    pub direction: FacetDirection,
    /// Whether a capability that consumes it cannot run without it.
    pub required_by_default: bool,
    pub schema: Value,
    pub produced_by: Vec<String>,
    pub consumed_by: Vec<String>,
}

/// One key of the envelope's `policies`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxPolicy {
    pub name: String,
    pub description: String,
    /// Its schema, inside the envelope schema (`schemas.envelope`).
    pub schema: Value,
}

/// The sandbox's metadata of `registry`.
pub fn sandbox_metadata(registry: &Registry) -> SandboxMetadata {
    let capabilities = registry
        .capabilities()
        .map(|capability| SandboxCapability {
            capability_id: capability.capability_id.clone(),
            display_name: capability.display_name.clone(),
            summary: capability.summary.clone(),
            agent_type: capability.agent_type,
            kind: capability.kind,
            consumes: capability.input_contract.clone(),
            produces: capability.output_contract.clone(),
        })
        .collect();
    let ids_where =
        |wanted: &dyn Fn(&baton_core::contracts::capability::CapabilityRegistration) -> bool| {
            registry
                .capabilities()
                .filter(|capability| wanted(capability))
                .map(|capability| capability.capability_id.clone())
                .collect::<Vec<String>>()
        };
    let facets = registry
        .facets
        .list()
        .map(|facet| SandboxFacet {
            name: facet.name.clone(),
            title: facet.title.clone(),
            description: facet.description.clone(),
            direction: facet.direction,
            required_by_default: facet.required_by_default,
            schema: facet.schema.clone(),
            produced_by: ids_where(&|capability| capability.output_contract.contains(&facet.name)),
            consumed_by: ids_where(&|capability| capability.input_contract.contains(&facet.name)),
        })
        .collect();
    let mut schemas = Map::new();
    let mut envelope_schema = Value::Null;
    for (file_name, schema) in baton_core::catalog::registry_schemas::registry_file_schemas() {
        let name = file_name.trim_end_matches(".schema.json");
        if matches!(name, "envelope" | "capability" | "facet") {
            if name == "envelope" {
                envelope_schema = schema.clone();
            }
            schemas.insert(name.to_string(), schema);
        }
    }
    SandboxMetadata {
        capabilities,
        facets,
        schemas,
        policies: policies_of(&envelope_schema),
        examples: registry.examples().to_vec(),
    }
}

/// The `policies` keys of the envelope schema, each described by its own
/// description or its definition's.
fn policies_of(envelope_schema: &Value) -> Vec<SandboxPolicy> {
    let definitions = &envelope_schema["$defs"];
    let policies = &definitions["TaskPolicies"]["properties"];
    let Some(keys) = policies.as_object() else {
        return Vec::new();
    };
    keys.iter()
        .map(|(name, schema)| {
            let description = schema["description"]
                .as_str()
                .map(str::to_string)
                .or_else(|| {
                    referenced_definition(schema)
                        .and_then(|definition| definitions[definition]["description"].as_str())
                        .map(str::to_string)
                })
                .unwrap_or_default();
            SandboxPolicy {
                name: name.clone(),
                description,
                schema: schema.clone(),
            }
        })
        .collect()
}

/// The `$defs` name a schema refers to, directly, in an array's items or
/// in an `anyOf` branch.
fn referenced_definition(schema: &Value) -> Option<&str> {
    let reference = schema["$ref"]
        .as_str()
        .or_else(|| schema["items"]["$ref"].as_str())
        .or_else(|| {
            schema["anyOf"]
                .as_array()?
                .iter()
                .find_map(|branch| branch["$ref"].as_str())
        })?;
    reference.strip_prefix("#/$defs/")
}
