//! Which catalog model serves a node, in one documented order:
//!
//! 1. the capability's `model`;
//! 2. the capability's `preferredModels`, in order;
//! 3. the envelope's `constraints.preferredModels`, in order;
//! 4. the deployment's default model (`BATON_LLM_MODEL`, or the offline
//!    model), which the deployment adds to the catalog when it starts
//!    (`ModelCatalog::with_deployment_default`), so every AI node names
//!    its model. Only a catalog without a default (a bare library use)
//!    leaves a node's model unnamed.
//!
//! The first the catalog names that can do what the node needs is chosen:
//! tools for an agent session or a chat reply, strict structured output for
//! a model node. A judge's model is its own (`modelName` in the panel
//! request), resolved the same way. Names are checked where they are
//! written: a capability's when the registry loads, an envelope's when it is
//! submitted, so a run never fails later for a name it was given.
//!
//! The chosen model carries its fallbacks (the capability's
//! `fallbackModels`, else the catalog entry's): the models that answer in its
//! place when its provider keeps failing.

use crate::basics::error::CoreError;
use crate::catalog::model_catalog::{CatalogModel, ModelCatalog};
use crate::contracts::capability::CapabilityRegistration;
use crate::contracts::envelope::TaskEnvelope;
use crate::contracts::model_request::ModelTarget;
use crate::planning::plan::NodeExecutor;

/// What a node asks of its model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelNeed {
    /// Strict structured output (a model node's contract).
    StructuredOutput,
    /// Tool calls (an agent session, a chat reply).
    Tools,
}

impl ModelNeed {
    /// What `executor` needs of a model; `None` when no model runs it.
    pub fn of(executor: &NodeExecutor) -> Option<ModelNeed> {
        match executor {
            NodeExecutor::Model => Some(ModelNeed::StructuredOutput),
            NodeExecutor::AgentSession(_) | NodeExecutor::Chat(_) => Some(ModelNeed::Tools),
            NodeExecutor::Human | NodeExecutor::Builtin(_) | NodeExecutor::Panel(_) => None,
        }
    }

    fn met_by(self, model: &CatalogModel) -> bool {
        match self {
            ModelNeed::StructuredOutput => model.supports.json_schema,
            ModelNeed::Tools => model.supports.tools,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            ModelNeed::StructuredOutput => "strict structured output (`supports.jsonSchema`)",
            ModelNeed::Tools => "tool calls (`supports.tools`)",
        }
    }
}

/// The catalog model named `name`, as a request names it, with the
/// catalog's fallbacks for it.
pub fn target_of(catalog: &ModelCatalog, name: &str) -> Option<ModelTarget> {
    let model = catalog.model(name)?;
    let mut target = bare_target(catalog, name)?;
    target.fallbacks = model
        .fallback_models
        .iter()
        .filter_map(|fallback| bare_target(catalog, fallback))
        .collect();
    Some(target)
}

/// The model named `name` without fallbacks (a fallback has none of its own).
fn bare_target(catalog: &ModelCatalog, name: &str) -> Option<ModelTarget> {
    let model = catalog.model(name)?;
    Some(ModelTarget {
        name: name.to_string(),
        provider: model.provider.clone(),
        model_id: model.model_id_or(name).to_string(),
        fallbacks: Vec::new(),
        strict_output: model.supports.json_schema,
        prompt_cache: model.supports.prompt_cache,
        remote_headers: Default::default(),
    })
}

/// `target` with the capability's fallbacks when it names some (those that
/// can do what the node needs), else the catalog's.
fn with_capability_fallbacks(
    mut target: ModelTarget,
    capability: &CapabilityRegistration,
    need: ModelNeed,
    catalog: &ModelCatalog,
) -> ModelTarget {
    if !capability.fallback_models.is_empty() {
        target.fallbacks = capability
            .fallback_models
            .iter()
            .filter(|name| **name != target.name)
            .filter(|name| catalog.model(name).is_some_and(|model| need.met_by(model)))
            .filter_map(|name| bare_target(catalog, name))
            .collect();
    }
    target
}

/// The model serving a node of `capability` in `envelope`'s run, in the
/// documented order; `None` only when no model runs the node, or no
/// default is known.
pub fn model_for(
    capability: &CapabilityRegistration,
    envelope: &TaskEnvelope,
    catalog: &ModelCatalog,
) -> Option<ModelTarget> {
    let need = ModelNeed::of(&NodeExecutor::for_capability(capability))?;
    if let Some(agent) = &capability.remote_agent {
        return Some(remote_agent_target(capability, agent));
    }
    capability
        .model
        .iter()
        .chain(&capability.preferred_models)
        .chain(&envelope.constraints.preferred_models)
        .find(|name| catalog.model(name).is_some_and(|model| need.met_by(model)))
        .and_then(|name| target_of(catalog, name))
        .map(|target| with_capability_fallbacks(target, capability, need, catalog))
        .or_else(|| default_target(catalog))
}

/// The request target of a remote agent: the A2A provider, the card URL as
/// the model id, no fallback (another model would not be the agent).
pub fn remote_agent_target(
    capability: &CapabilityRegistration,
    agent: &crate::contracts::capability::RemoteAgent,
) -> ModelTarget {
    ModelTarget {
        name: format!("agent:{}", capability.capability_id),
        provider: crate::contracts::capability::REMOTE_AGENT_PROVIDER.to_string(),
        model_id: agent.card_url.clone(),
        fallbacks: Vec::new(),
        strict_output: false,
        prompt_cache: false,
        remote_headers: agent.headers.clone(),
    }
}

/// The deployment's default model, when the catalog has one.
pub fn default_target(catalog: &ModelCatalog) -> Option<ModelTarget> {
    catalog
        .deployment_default
        .as_deref()
        .and_then(|name| target_of(catalog, name))
}

/// The model serving a chat reply (tool calls): the specialist
/// `capability`'s when it names one, else, for the orchestrator agent,
/// chat.json's `profileModels` entry for the context type's `profile`,
/// then chat.json's `model`; `None` for the deployment's default.
pub fn model_for_chat(
    capability: Option<&CapabilityRegistration>,
    settings: &crate::records::chat::ChatSettings,
    profile: Option<&str>,
    catalog: &ModelCatalog,
) -> Option<ModelTarget> {
    let Some(capability) = capability else {
        // The orchestrator agent: its context's profile, then chat.json's model.
        let by_profile = profile.and_then(|profile| settings.profile_models.get(profile));
        return by_profile
            .or(settings.model.as_ref())
            .and_then(|name| target_of(catalog, name))
            .or_else(|| default_target(catalog));
    };
    capability
        .model
        .iter()
        .chain(&capability.preferred_models)
        .find(|name| {
            catalog
                .model(name)
                .is_some_and(|model| ModelNeed::Tools.met_by(model))
        })
        .and_then(|name| target_of(catalog, name))
        .or_else(|| default_target(catalog))
}

/// The model reviewing an agent's plans (`agent_review`): chat.json's
/// `profileModels` entry for its `planReviewProfile`; `None` for the
/// deployment's default.
pub fn model_for_plan_review(
    settings: &crate::records::chat::ChatSettings,
    catalog: &ModelCatalog,
) -> Option<ModelTarget> {
    settings
        .plan_review_profile
        .as_ref()
        .and_then(|profile| settings.profile_models.get(profile))
        .and_then(|name| target_of(catalog, name))
}

/// The chat agent's `model` (chat.json) is a catalog model that calls tools:
/// `(JSON path, message)`.
pub fn check_chat_model(
    settings: &crate::records::chat::ChatSettings,
    catalog: &ModelCatalog,
) -> Result<(), (String, String)> {
    for (profile, name) in &settings.profile_models {
        check_named_model(catalog, name, Some(ModelNeed::Tools))
            .map_err(|problem| (format!("$.profileModels.{profile}"), problem.to_string()))?;
    }
    match &settings.model {
        Some(name) => check_named_model(catalog, name, Some(ModelNeed::Tools))
            .map_err(|problem| ("$.model".to_string(), problem.to_string())),
        None => Ok(()),
    }
}

/// A capability's `model` and `preferredModels` name catalog models that can
/// do what its nodes need: `(JSON path, message)`.
pub fn check_capability_models(
    capability: &CapabilityRegistration,
    catalog: &ModelCatalog,
) -> Result<(), (String, String)> {
    let need = ModelNeed::of(&NodeExecutor::for_capability(capability));
    if let Some(agent) = &capability.remote_agent {
        return check_remote_agent(capability, agent);
    }
    let named = capability
        .model
        .iter()
        .map(|name| ("$.model".to_string(), name))
        .chain(
            capability
                .preferred_models
                .iter()
                .enumerate()
                .map(|(index, name)| (format!("$.preferredModels[{index}]"), name)),
        )
        .chain(
            capability
                .fallback_models
                .iter()
                .enumerate()
                .map(|(index, name)| (format!("$.fallbackModels[{index}]"), name)),
        );
    for (path, name) in named {
        check_named_model(catalog, name, need).map_err(|problem| (path, problem.to_string()))?;
    }
    Ok(())
}

/// A remote agent runs itself: it names no model and no tools, is an `ai`
/// capability, and its card URL is an http(s) URL.
fn check_remote_agent(
    capability: &CapabilityRegistration,
    agent: &crate::contracts::capability::RemoteAgent,
) -> Result<(), (String, String)> {
    let runs_itself = "a remote agent runs itself: it takes no";
    if capability.agent_type != crate::contracts::capability::AgentType::Ai {
        return Err((
            "$.agentType".into(),
            "a remote agent is an `ai` capability".into(),
        ));
    }
    if capability.model.is_some() {
        return Err(("$.model".into(), format!("{runs_itself} model")));
    }
    if !capability.preferred_models.is_empty() || !capability.fallback_models.is_empty() {
        return Err(("$.preferredModels".into(), format!("{runs_itself} models")));
    }
    if !capability.tools.is_empty() {
        return Err(("$.tools".into(), format!("{runs_itself} tools")));
    }
    if capability.panel.is_some() {
        return Err(("$.panel".into(), format!("{runs_itself} panel")));
    }
    let url = agent.card_url.trim();
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        return Err((
            "$.remoteAgent.cardUrl".into(),
            "must be an http(s) URL of the agent card".into(),
        ));
    }
    if agent.timeout_seconds == Some(0) {
        return Err((
            "$.remoteAgent.timeoutSeconds".into(),
            "must be at least 1".into(),
        ));
    }
    crate::basics::credentials::check_header_sources(&agent.headers, "$.remoteAgent.headers")
}

/// The envelope's `constraints.preferredModels` name catalog models that
/// give structured output (every model node needs it); an error names the
/// entry's JSON path.
pub fn check_envelope_models(
    envelope: &TaskEnvelope,
    catalog: &ModelCatalog,
) -> Result<(), CoreError> {
    for (index, name) in envelope.constraints.preferred_models.iter().enumerate() {
        check_named_model(catalog, name, Some(ModelNeed::StructuredOutput)).map_err(|problem| {
            CoreError::InvalidEnvelope {
                path: format!("$.constraints.preferredModels[{index}]"),
                message: problem.to_string(),
            }
        })?;
    }
    Ok(())
}

/// Why a named model cannot serve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NamedModelProblem {
    #[error("`{name}` is not a model of the registry's catalog (models.json: {known})")]
    NotInCatalog { name: String, known: String },
    #[error("`{name}` cannot do {need}, which this needs")]
    CannotDo { name: String, need: String },
}

fn check_named_model(
    catalog: &ModelCatalog,
    name: &str,
    need: Option<ModelNeed>,
) -> Result<(), NamedModelProblem> {
    let Some(model) = catalog.model(name) else {
        let known: Vec<&str> = catalog.models.keys().map(String::as_str).collect();
        return Err(NamedModelProblem::NotInCatalog {
            name: name.to_string(),
            known: if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            },
        });
    };
    match need {
        Some(need) if !need.met_by(model) => Err(NamedModelProblem::CannotDo {
            name: name.to_string(),
            need: need.describe().to_string(),
        }),
        _ => Ok(()),
    }
}

/// A judge's model: its `modelName`, else its `modelProvider`'s first
/// catalog model with structured output, else the deployment's default.
pub fn model_for_judge(
    catalog: &ModelCatalog,
    model_name: Option<&str>,
    model_provider: Option<&str>,
) -> Option<ModelTarget> {
    model_name
        .or_else(|| {
            model_provider
                .and_then(|text| catalog.provider_named(text))
                .and_then(|provider| catalog.first_structured_model_of(provider))
        })
        .and_then(|name| target_of(catalog, name))
        .or_else(|| default_target(catalog))
}

/// Checks each judge's `modelName` and `modelProvider` against the
/// catalog: an unknown model or provider, a provider that does not serve
/// the named model, or a provider alone with no structured-output model is
/// refused as (JSON path, why).
pub fn check_judge_models(
    catalog: &ModelCatalog,
    request: &baton_judge::request::PanelRequest,
) -> Result<(), (String, String)> {
    for (index, judge) in request.request.selected_agents.iter().enumerate() {
        let Some(capabilities) = judge.capabilities.as_ref() else {
            continue;
        };
        let at = |field: &str| format!("$.request.selectedAgents[{index}].capabilities.{field}");
        let provider = match capabilities.model_provider.as_deref() {
            None => None,
            Some(text) => Some(catalog.provider_named(text).ok_or_else(|| {
                let known: Vec<&str> = catalog.providers.keys().map(String::as_str).collect();
                (
                    at("modelProvider"),
                    format!(
                        "`{text}` is not a provider of the registry's catalog (models.json: {})",
                        known.join(", ")
                    ),
                )
            })?),
        };
        let named = capabilities.model_name.as_deref();
        if let Some(name) = named {
            let Some(model) = catalog.model(name) else {
                return Err((
                    at("modelName"),
                    format!("`{name}` is not a model of the registry's catalog (models.json)"),
                ));
            };
            if let Some(provider) = provider
                && model.provider != provider
            {
                return Err((
                    at("modelProvider"),
                    format!(
                        "`{name}` is served by the catalog's `{}` provider, not `{provider}`",
                        model.provider
                    ),
                ));
            }
        } else if let Some(provider) = provider
            && catalog.first_structured_model_of(provider).is_none()
        {
            return Err((
                at("modelProvider"),
                format!(
                    "the catalog's `{provider}` provider has no model with structured output (`supports.jsonSchema`)"
                ),
            ));
        }
    }
    Ok(())
}
