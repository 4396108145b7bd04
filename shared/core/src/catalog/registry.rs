//! The registry: the facet catalog plus capability registrations, built from
//! data documents and validated as a whole. Unknown facets, direction
//! mismatches, duplicate ids and schemas that do not compile are errors that
//! name the document and the JSON path.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;

use crate::catalog::model_catalog::ModelCatalog;

use crate::basics::error::CoreError;
use crate::basics::schema::compile_schema;
use crate::contracts::capability::CapabilityRegistration;
use crate::contracts::facet::{Facet, FacetCatalog};

/// One registry document as text, with the name it came from (a file path).
#[derive(Debug, Clone)]
pub struct RegistryDocument {
    pub source_name: String,
    pub text: String,
}

/// A validated registry.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    pub facets: FacetCatalog,
    capabilities_by_id: BTreeMap<String, CapabilityRegistration>,
    tools_by_name: BTreeMap<String, crate::catalog::tools::ToolDefinition>,
    contexts: Vec<crate::catalog::contexts::ContextGuidance>,
    chat: Option<crate::records::chat::ChatSettings>,
    models: ModelCatalog,
    tenants: crate::catalog::tenant_settings::TenantSettings,
    examples: Vec<crate::catalog::envelope_examples::EnvelopeExample>,
    content_rules: Vec<crate::contracts::content_rules::ContentRules>,
}

fn registry_error(
    source_name: &str,
    path: impl Into<String>,
    message: impl Into<String>,
) -> CoreError {
    CoreError::InvalidRegistry {
        source_name: source_name.to_string(),
        path: path.into(),
        message: message.into(),
    }
}

fn parse_document<T: DeserializeOwned>(document: &RegistryDocument) -> Result<T, CoreError> {
    let mut value: serde_json::Value = serde_json::from_str(&document.text).map_err(|error| {
        registry_error(
            &document.source_name,
            "$",
            format!(
                "not JSON (line {}, column {}): {error}",
                error.line(),
                error.column()
            ),
        )
    })?;
    // The file's own `$schema` (for editors) is not part of the document.
    if let Some(fields) = value.as_object_mut() {
        fields.remove("$schema");
    }
    serde_path_to_error::deserialize(value).map_err(|error| {
        let path = error.path().to_string();
        let path = if path == "." {
            "$".to_string()
        } else if path.starts_with('[') {
            format!("${path}")
        } else {
            format!("$.{path}")
        };
        registry_error(&document.source_name, path, error.inner().to_string())
    })
}

impl Registry {
    /// Builds a registry from facet documents and capability documents.
    /// Capability documents must already have their prompt files inlined.
    pub fn from_documents(
        facet_documents: &[RegistryDocument],
        capability_documents: &[(RegistryDocument, Option<String>)],
    ) -> Result<Self, CoreError> {
        Self::from_documents_with_tools(facet_documents, &[], capability_documents)
    }

    /// Same, with tool documents (`registry/tools/*.json`), added before the
    /// capabilities that name them.
    pub fn from_documents_with_tools(
        facet_documents: &[RegistryDocument],
        tool_documents: &[RegistryDocument],
        capability_documents: &[(RegistryDocument, Option<String>)],
    ) -> Result<Self, CoreError> {
        let mut registry = Registry::default();
        for document in facet_documents {
            let facet: Facet = parse_document(document)?;
            registry.add_facet(facet, &document.source_name)?;
        }
        for document in tool_documents {
            let tool: crate::catalog::tools::ToolDefinition = parse_document(document)?;
            registry.add_tool(tool, &document.source_name)?;
        }
        for (document, inlined_instructions) in capability_documents {
            let mut capability: CapabilityRegistration = parse_document(document)?;
            if let Some(instructions) = inlined_instructions {
                capability.instructions = Some(instructions.clone());
            }
            registry.add_capability(capability, &document.source_name)?;
        }
        Ok(registry)
    }

    /// Adds one facet after checking its name and schema.
    pub fn add_facet(&mut self, facet: Facet, source_name: &str) -> Result<(), CoreError> {
        if facet.name.is_empty()
            || !facet
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(registry_error(
                source_name,
                "$.name",
                format!(
                    "facet name `{}` must be non-empty ASCII letters, digits or `_`",
                    facet.name
                ),
            ));
        }
        compile_schema(&facet.schema, "$.schema")
            .map_err(|error| registry_error(source_name, "$.schema", error.to_string()))?;
        if let Some(widget) = &facet.widget {
            widget
                .check(&facet.schema, "$.widget")
                .map_err(|(path, message)| registry_error(source_name, path, message))?;
        }
        if facet.drives_revisions
            && facet.schema.get("type").and_then(serde_json::Value::as_str) != Some("array")
        {
            return Err(registry_error(
                source_name,
                "$.schema.type",
                "a facet that drives revisions holds a list of feedback items (`\"type\": \"array\"`, items naming `facet` or `nodeId`)",
            ));
        }
        if self.facets.contains(&facet.name) {
            return Err(registry_error(
                source_name,
                "$.name",
                format!("duplicate facet `{}`", facet.name),
            ));
        }
        self.facets.insert(facet);
        Ok(())
    }

    /// Adds one tool after checking it; a duplicate name is an error.
    pub fn add_tool(
        &mut self,
        tool: crate::catalog::tools::ToolDefinition,
        source_name: &str,
    ) -> Result<(), CoreError> {
        tool.check()
            .map_err(|(path, message)| registry_error(source_name, path, message))?;
        if self.tools_by_name.contains_key(&tool.name) {
            return Err(registry_error(
                source_name,
                "$.name",
                format!("duplicate tool `{}`", tool.name),
            ));
        }
        self.tools_by_name.insert(tool.name.clone(), tool);
        Ok(())
    }

    /// Adds one context type after checking it; a name or alias already
    /// answered by another context is an error.
    pub fn add_context(
        &mut self,
        context: crate::catalog::contexts::ContextGuidance,
        source_name: &str,
    ) -> Result<(), CoreError> {
        context
            .check()
            .map_err(|(path, message)| registry_error(source_name, path, message))?;
        if let Some((path, message)) =
            context.unknown_step_capability(|id| self.capability(id).is_some())
        {
            return Err(registry_error(source_name, path, message));
        }
        let names = std::iter::once(&context.name).chain(&context.aliases);
        for name in names {
            if self.context_guidance(name).is_some() {
                return Err(registry_error(
                    source_name,
                    "$.name",
                    format!("context type `{name}` is defined twice"),
                ));
            }
        }
        self.contexts.push(context);
        Ok(())
    }

    /// Adds the context types of `documents` (`registry/contexts/*.json`).
    pub fn add_context_documents(
        &mut self,
        documents: &[RegistryDocument],
    ) -> Result<(), CoreError> {
        for document in documents {
            let context: crate::catalog::contexts::ContextGuidance = parse_document(document)?;
            self.add_context(context, &document.source_name)?;
        }
        Ok(())
    }

    /// Sets the orchestrator's chat agent (`registry/chat.json`) after
    /// checking it against the tools already added.
    pub fn set_chat_settings(
        &mut self,
        settings: crate::records::chat::ChatSettings,
        source_name: &str,
    ) -> Result<(), CoreError> {
        settings
            .check(self)
            .map_err(|(path, message)| registry_error(source_name, path, message))?;
        self.chat = Some(settings);
        Ok(())
    }

    /// Reads and sets `registry/chat.json`.
    pub fn add_chat_document(&mut self, document: &RegistryDocument) -> Result<(), CoreError> {
        let settings: crate::records::chat::ChatSettings = parse_document(document)?;
        self.set_chat_settings(settings, &document.source_name)
    }

    /// Reads and sets the model catalog (`registry/models.json`): a literal
    /// credential is refused before anything else, naming its path.
    pub fn add_model_catalog_document(
        &mut self,
        document: &RegistryDocument,
    ) -> Result<(), CoreError> {
        if let Ok(raw) = serde_json::from_str::<serde_json::Value>(&document.text) {
            ModelCatalog::refuse_literal_credentials(&raw)
                .map_err(|(path, message)| registry_error(&document.source_name, path, message))?;
        }
        let catalog: ModelCatalog = parse_document(document)?;
        catalog
            .check()
            .map_err(|(path, message)| registry_error(&document.source_name, path, message))?;
        self.models = catalog;
        Ok(())
    }

    /// Reads and sets the per-tenant settings (`registry/tenants.json`).
    pub fn add_tenant_settings_document(
        &mut self,
        document: &RegistryDocument,
    ) -> Result<(), CoreError> {
        let settings: crate::catalog::tenant_settings::TenantSettings = parse_document(document)?;
        settings
            .check()
            .map_err(|(path, message)| registry_error(&document.source_name, path, message))?;
        self.tenants = settings;
        Ok(())
    }

    /// Reads an example envelope (`registry/examples/*.json`) and keeps it
    /// for the developer sandbox.
    pub fn add_example_document(&mut self, document: &RegistryDocument) -> Result<(), CoreError> {
        let example = crate::catalog::envelope_examples::EnvelopeExample::from_text(
            &document.source_name,
            &document.text,
        )?;
        if self.examples.iter().any(|kept| kept.name == example.name) {
            return Err(registry_error(
                &document.source_name,
                "$",
                format!("a second example named `{}`", example.name),
            ));
        }
        self.examples.push(example);
        Ok(())
    }

    /// Reads a content rule set (`registry/rules/*.json`) after checking
    /// it against the facets; a second set of one name is an error.
    pub fn add_content_rules_document(
        &mut self,
        document: &RegistryDocument,
    ) -> Result<(), CoreError> {
        let rules: crate::contracts::content_rules::ContentRules = parse_document(document)?;
        rules
            .check(|facet| self.facets.contains(facet))
            .map_err(|(path, message)| registry_error(&document.source_name, path, message))?;
        if self
            .content_rules
            .iter()
            .any(|kept| kept.name == rules.name)
        {
            let message = format!("a second rule set named `{}`", rules.name);
            return Err(registry_error(&document.source_name, "$.name", message));
        }
        self.content_rules.push(rules);
        Ok(())
    }

    /// The content rule sets, in the order they were read (by file name).
    pub fn content_rules(&self) -> &[crate::contracts::content_rules::ContentRules] {
        &self.content_rules
    }

    /// The example envelopes, in the order they were read (by file name).
    pub fn examples(&self) -> &[crate::catalog::envelope_examples::EnvelopeExample] {
        &self.examples
    }

    /// The per-tenant settings (none when the registry has no `tenants.json`).
    pub fn tenant_settings(&self) -> &crate::catalog::tenant_settings::TenantSettings {
        &self.tenants
    }

    /// The model catalog (empty when the registry has none).
    pub fn models(&self) -> &ModelCatalog {
        &self.models
    }

    /// The registry with the deployment's default model in its catalog
    /// (`ModelCatalog::with_deployment_default`): every AI node without a
    /// preference, and a judge naming no model, then names it.
    pub fn with_deployment_default_model(
        mut self,
        name: &str,
        kind: crate::catalog::model_catalog::ProviderKind,
    ) -> Registry {
        self.models = std::mem::take(&mut self.models).with_deployment_default(name, kind);
        self
    }

    /// The orchestrator's chat agent, when the registry has one.
    pub fn chat_settings(&self) -> Option<&crate::records::chat::ChatSettings> {
        self.chat.as_ref()
    }

    /// The guidance for `context_type` (by name or alias).
    pub fn context_guidance(
        &self,
        context_type: &str,
    ) -> Option<&crate::catalog::contexts::ContextGuidance> {
        self.contexts
            .iter()
            .find(|context| context.answers_to(context_type))
    }

    pub fn tool(&self, name: &str) -> Option<&crate::catalog::tools::ToolDefinition> {
        self.tools_by_name.get(name)
    }

    pub fn tools(&self) -> impl Iterator<Item = &crate::catalog::tools::ToolDefinition> {
        self.tools_by_name.values()
    }

    /// Checks a capability against the catalog without adding it.
    pub fn check_capability(
        &self,
        capability: &CapabilityRegistration,
        source_name: &str,
    ) -> Result<(), CoreError> {
        if capability.capability_id.trim().is_empty() {
            return Err(registry_error(
                source_name,
                "$.capabilityId",
                "must be a non-empty string",
            ));
        }
        if capability.agent_type == crate::contracts::capability::AgentType::Builtin {
            return Err(registry_error(
                source_name,
                "$.agentType",
                "`builtin` is reserved for orchestrator-managed nodes; register `ai` or `human`",
            ));
        }
        if capability.catch_all {
            return capability
                .check_catch_all()
                .map_err(|(path, message)| registry_error(source_name, path, message));
        }
        if capability.output_contract.is_empty() {
            return Err(registry_error(
                source_name,
                "$.outputContract",
                "a capability must produce at least one facet",
            ));
        }
        for (index, facet_name) in capability.input_contract.iter().enumerate() {
            let path = format!("$.inputContract[{index}]");
            let facet = self.facets.get(facet_name).ok_or_else(|| {
                registry_error(source_name, &path, format!("unknown facet `{facet_name}`"))
            })?;
            if !facet.direction.allows_input() {
                return Err(registry_error(
                    source_name,
                    &path,
                    format!("facet `{facet_name}` is output-only and cannot be consumed"),
                ));
            }
        }
        for (index, tool) in capability.tools.iter().enumerate() {
            if !self.tools_by_name.contains_key(tool) {
                return Err(registry_error(
                    source_name,
                    format!("$.tools[{index}]"),
                    format!("unknown tool `{tool}`"),
                ));
            }
        }
        if let Err((path, message)) = capability.check_guard() {
            return Err(registry_error(source_name, path, message));
        }
        if let Err((path, message)) = capability.check_remember() {
            return Err(registry_error(source_name, path, message));
        }
        if capability.max_iterations == Some(0) || capability.max_tool_calls_per_turn == Some(0) {
            return Err(registry_error(
                source_name,
                "$.maxIterations",
                "`maxIterations` and `maxToolCallsPerTurn` are at least 1",
            ));
        }
        if let Some(panel) = &capability.panel
            && let Err((path, message)) =
                panel.check(&capability.input_contract, &capability.output_contract)
        {
            return Err(registry_error(source_name, &path, message));
        }
        for (index, facet_name) in capability.output_contract.iter().enumerate() {
            let path = format!("$.outputContract[{index}]");
            let facet = self.facets.get(facet_name).ok_or_else(|| {
                registry_error(source_name, &path, format!("unknown facet `{facet_name}`"))
            })?;
            if !facet.direction.allows_output() {
                return Err(registry_error(
                    source_name,
                    &path,
                    format!("facet `{facet_name}` is input-only and cannot be produced"),
                ));
            }
        }
        Ok(())
    }

    /// Adds a capability; a duplicate id is an error.
    pub fn add_capability(
        &mut self,
        capability: CapabilityRegistration,
        source_name: &str,
    ) -> Result<(), CoreError> {
        self.check_capability(&capability, source_name)?;
        if self
            .capabilities_by_id
            .contains_key(&capability.capability_id)
        {
            return Err(registry_error(
                source_name,
                "$.capabilityId",
                format!("duplicate capability `{}`", capability.capability_id),
            ));
        }
        self.capabilities_by_id
            .insert(capability.capability_id.clone(), capability);
        Ok(())
    }

    /// This registry plus `additional` capabilities (registered at run time),
    /// each checked against the catalog; the ones that no longer fit it (a
    /// facet removed since they registered) or clash with an id already
    /// here are left out and returned with the reason.
    pub fn with_additional_capabilities<'a>(
        &self,
        additional: impl IntoIterator<Item = &'a CapabilityRegistration>,
    ) -> (Registry, Vec<(String, CoreError)>) {
        let mut snapshot = self.clone();
        let mut left_out = Vec::new();
        for capability in additional {
            let source_name = format!("registration {}", capability.capability_id);
            if let Err(error) = snapshot.add_capability(capability.clone(), &source_name) {
                left_out.push((capability.capability_id.clone(), error));
            }
        }
        (snapshot, left_out)
    }

    pub fn capability(&self, capability_id: &str) -> Option<&CapabilityRegistration> {
        self.capabilities_by_id.get(capability_id)
    }

    pub fn capabilities(&self) -> impl Iterator<Item = &CapabilityRegistration> {
        self.capabilities_by_id.values()
    }

    /// Capabilities that produce `facet_name`, in id order.
    pub fn producers_of(&self, facet_name: &str) -> Vec<&CapabilityRegistration> {
        self.capabilities_by_id
            .values()
            .filter(|capability| {
                capability
                    .output_contract
                    .iter()
                    .any(|name| name == facet_name)
            })
            .collect()
    }
}

/// The registry checks its chat file against its tools.
impl crate::records::chat::ChatSettings {
    /// Checks the settings against the registry's tools; an error is
    /// `(JSON path, message)`.
    pub fn check(&self, registry: &Registry) -> Result<(), (String, String)> {
        if self.instructions.trim().is_empty() {
            return Err((
                "$.instructions".into(),
                "the agent needs instructions".into(),
            ));
        }
        if self.clarifying_question.trim().is_empty() {
            return Err((
                "$.clarifyingQuestion".into(),
                "a blank message needs a question to answer it with".into(),
            ));
        }
        for (index, tool) in self.tools.iter().enumerate() {
            if registry.tool(tool).is_none() {
                return Err((
                    format!("$.tools[{index}]"),
                    format!("no tool `{tool}` in the registry"),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
