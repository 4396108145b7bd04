//! The model catalog (`registry/models.json`): the providers a deployment
//! reaches (each configured once: its kind, its endpoint, and the
//! environment variable its key comes from, never the key itself), and the models, each with its provider, the
//! provider's model id, its prices, limits and what it supports.
//!
//! Prices make a node's `node_complete` and every `metrics` frame carry
//! `costUsd`. A model the catalog does not name has no cost (the engine
//! says so once per run with a `model_price_unknown` warning); it is never
//! guessed. A provider often answers with a dated name
//! (`vendor-model-2025-01-01`) for the name it was asked for: a model is
//! priced by its exact entry, else by the longest entry it starts with
//! followed by `-`.
//!
//! Invariant: no credential is ever a literal in the catalog; a field that
//! looks like one (`apiKey`, `secretAccessKey`, `token`, `password`) is
//! refused when the file is read, naming its JSON path.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::basics::usage::TokenUsage;

/// The wire protocol a provider speaks.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema, strum::Display,
)]
#[serde(rename_all = "camelCase")]
#[strum(serialize_all = "camelCase")]
pub enum ProviderKind {
    /// Any OpenAI-compatible chat-completions endpoint (OpenAI, Ollama,
    /// vLLM, Groq, LM Studio), by base URL.
    Openai,
    /// Anthropic's Messages API (its public endpoint unless `baseUrl`).
    Anthropic,
    /// Amazon Bedrock's Converse API, signed with the process's AWS
    /// credentials (the function's IAM role) in its region.
    Bedrock,
    /// The offline model built into the CLI.
    Local,
}

/// One provider, configured once. Credentials are named, never written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderSettings {
    pub kind: ProviderKind,
    /// The endpoint: for `openai`, the deployment's `BATON_LLM_BASE_URL`
    /// when absent; for `anthropic`, `https://api.anthropic.com`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The environment variable holding the endpoint (read at start-up;
    /// wins over `baseUrl` when set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url_variable: Option<String>,
    /// The environment variable holding the API key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_variable: Option<String>,
    /// At most this many calls to the provider at once, per process (the
    /// others wait their turn); unlimited when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_calls: Option<u32>,
}

/// What a model can do.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelSupports {
    /// It calls tools (an agent node needs this).
    #[serde(default)]
    pub tools: bool,
    /// Strict structured output against a JSON Schema.
    #[serde(default)]
    pub json_schema: bool,
    /// It streams its text.
    #[serde(default)]
    pub streaming: bool,
    /// The provider caches a marked prompt prefix.
    #[serde(default)]
    pub prompt_cache: bool,
}

/// One model of the catalog: its provider, the provider's id for it, its
/// prices in US dollars per million tokens, its limits and what it supports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CatalogModel {
    /// A provider of `providers`.
    pub provider: String,
    /// The provider's id for the model; the catalog name when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_id: Option<String>,
    pub input_per_million_usd: f64,
    pub output_per_million_usd: f64,
    /// Prompt tokens the provider served from its cache (defaults to the
    /// input price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_per_million_usd: Option<f64>,
    /// Prompt tokens written to the provider's cache (defaults to the input
    /// price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_per_million_usd: Option<f64>,
    /// Tokens the model reads at most (prompt and answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// Tokens the model writes at most in one answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    #[serde(default)]
    pub supports: ModelSupports,
    /// Models of the catalog that answer in its place, in order, when its
    /// provider keeps failing (rate limited, server errors, timeouts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallback_models: Vec<String>,
}

impl CatalogModel {
    /// The provider's id for the model named `name` in the catalog.
    pub fn model_id_or<'a>(&'a self, name: &'a str) -> &'a str {
        self.model_id.as_deref().unwrap_or(name)
    }
}

/// `registry/models.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelCatalog {
    /// The JSON Schema this file follows (ignored).
    #[serde(default, rename = "$schema", skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// Provider name → how to reach it.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderSettings>,
    /// Model name → the model.
    pub models: BTreeMap<String, CatalogModel>,
    /// The model the LLM planner drafts plans with (`BATON_PLANNER=llm`);
    /// the deployment's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planner_model: Option<String>,
    /// The deployment's default model (`BATON_LLM_MODEL`, or the offline
    /// model), set when the deployment starts, never read from the file:
    /// every AI node with no preference names it.
    #[serde(skip)]
    #[schemars(skip)]
    pub deployment_default: Option<String>,
    /// Models the deployment added that the file does not price: their cost
    /// is unknown (`model_price_unknown`), never zero.
    #[serde(skip)]
    #[schemars(skip)]
    pub unpriced: std::collections::BTreeSet<String>,
}

/// The provider name given to a default model's endpoint when the catalog
/// has no provider of its kind.
pub const DEPLOYMENT_DEFAULT_PROVIDER: &str = "deployment-default";

/// Field names a credential would have: refused in a provider's settings.
const LITERAL_CREDENTIAL_FIELDS: [&str; 7] = [
    "apiKey",
    "key",
    "secret",
    "secretAccessKey",
    "accessKeyId",
    "token",
    "password",
];

impl ModelCatalog {
    /// Refuses a literal credential in the raw document (before it is read
    /// as a catalog, so the message says what to do instead): `(JSON path,
    /// message)`.
    pub fn refuse_literal_credentials(
        document: &serde_json::Value,
    ) -> Result<(), (String, String)> {
        let Some(providers) = document
            .get("providers")
            .and_then(serde_json::Value::as_object)
        else {
            return Ok(());
        };
        for (name, settings) in providers {
            let Some(fields) = settings.as_object() else {
                continue;
            };
            if let Some(field) = LITERAL_CREDENTIAL_FIELDS
                .iter()
                .find(|field| fields.contains_key(**field))
            {
                return Err((
                    format!("$.providers['{name}'].{field}"),
                    "a credential is never written in the catalog: name the environment variable that holds it (`apiKeyVariable`)".to_string(),
                ));
            }
        }
        Ok(())
    }

    /// Prices are finite numbers ≥ 0, every model's provider is one of
    /// `providers`, and the planner's model is a catalog model with strict
    /// structured output: `(JSON path, message)`.
    pub fn check(&self) -> Result<(), (String, String)> {
        let reserved = crate::contracts::capability::REMOTE_AGENT_PROVIDER;
        if self.providers.contains_key(reserved) {
            return Err((
                format!("$.providers['{reserved}']"),
                format!(
                    "`{reserved}` is reserved for remote agents (a capability's `remoteAgent`)"
                ),
            ));
        }
        if let Some(planner) = &self.planner_model {
            match self.models.get(planner) {
                None => {
                    return Err((
                        "$.plannerModel".into(),
                        format!("`{planner}` is not a model of this catalog"),
                    ));
                }
                Some(model) if !model.supports.json_schema => {
                    return Err((
                        "$.plannerModel".into(),
                        format!(
                            "`{planner}` cannot do strict structured output (`supports.jsonSchema`), which a plan draft needs"
                        ),
                    ));
                }
                Some(_) => {}
            }
        }
        for (name, model) in &self.models {
            let fields = [
                ("inputPerMillionUsd", Some(model.input_per_million_usd)),
                ("outputPerMillionUsd", Some(model.output_per_million_usd)),
                ("cacheReadPerMillionUsd", model.cache_read_per_million_usd),
                ("cacheWritePerMillionUsd", model.cache_write_per_million_usd),
            ];
            for (field, value) in fields {
                if let Some(value) = value
                    && !(value.is_finite() && value >= 0.0)
                {
                    return Err((
                        format!("$.models['{name}'].{field}"),
                        format!("a price must be a number ≥ 0, not {value}"),
                    ));
                }
            }
            for (index, fallback) in model.fallback_models.iter().enumerate() {
                if !self.models.contains_key(fallback) || fallback == name {
                    return Err((
                        format!("$.models['{name}'].fallbackModels[{index}]"),
                        format!("`{fallback}` is not another model of this catalog"),
                    ));
                }
            }
            if !self.providers.contains_key(&model.provider) {
                let known: Vec<&str> = self.providers.keys().map(String::as_str).collect();
                return Err((
                    format!("$.models['{name}'].provider"),
                    format!(
                        "`{}` is not a provider of this catalog (providers: {})",
                        model.provider,
                        if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        }
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The catalog with the deployment's default model `name` in it, served
    /// by a provider of `kind`. A name the file lists keeps its entry (its
    /// prices, limits and fallbacks). Any other becomes an entry whose
    /// prices are unknown and which is assumed to do everything a node asks
    /// (it is the model that serves every node without a preference), on
    /// the file's provider of that kind (for `openai`, the one reading
    /// `BATON_LLM_BASE_URL` first), else on a provider
    /// [`DEPLOYMENT_DEFAULT_PROVIDER`] added for it.
    pub fn with_deployment_default(mut self, name: &str, kind: ProviderKind) -> Self {
        let name = name.trim();
        if name.is_empty() {
            return self;
        }
        if !self.models.contains_key(name) {
            let provider = self.provider_for_default(kind);
            self.models.insert(
                name.to_string(),
                CatalogModel {
                    provider,
                    model_id: None,
                    input_per_million_usd: 0.0,
                    output_per_million_usd: 0.0,
                    cache_read_per_million_usd: None,
                    cache_write_per_million_usd: None,
                    context_window: None,
                    max_output_tokens: None,
                    supports: ModelSupports {
                        tools: true,
                        json_schema: true,
                        streaming: true,
                        prompt_cache: false,
                    },
                    fallback_models: Vec::new(),
                },
            );
            self.unpriced.insert(name.to_string());
        }
        self.deployment_default = Some(name.to_string());
        self
    }

    /// The provider a default model of `kind` is served by, added when the
    /// file has none of that kind.
    fn provider_for_default(&mut self, kind: ProviderKind) -> String {
        let of_kind = |settings: &ProviderSettings| settings.kind == kind;
        let reads_default_endpoint = |settings: &ProviderSettings| {
            settings.base_url_variable.as_deref() == Some("BATON_LLM_BASE_URL")
        };
        let found = self
            .providers
            .iter()
            .find(|(_, settings)| of_kind(settings) && reads_default_endpoint(settings))
            .or_else(|| {
                self.providers
                    .iter()
                    .find(|(_, settings)| of_kind(settings))
            })
            .map(|(name, _)| name.clone());
        if let Some(name) = found {
            return name;
        }
        let settings = match kind {
            ProviderKind::Openai => ProviderSettings {
                kind,
                base_url: None,
                base_url_variable: Some("BATON_LLM_BASE_URL".into()),
                api_key_variable: Some("BATON_LLM_API_KEY".into()),
                max_concurrent_calls: None,
            },
            _ => ProviderSettings {
                kind,
                base_url: None,
                base_url_variable: None,
                api_key_variable: None,
                max_concurrent_calls: None,
            },
        };
        self.providers
            .insert(DEPLOYMENT_DEFAULT_PROVIDER.to_string(), settings);
        DEPLOYMENT_DEFAULT_PROVIDER.to_string()
    }

    /// Whether the file prices `name` (a default model it does not list has
    /// unknown prices).
    pub fn is_priced(&self, name: &str) -> bool {
        !self.unpriced.contains(name)
    }

    /// The first model of a provider of `kind`, by name.
    pub fn first_model_of_kind(&self, kind: ProviderKind) -> Option<&str> {
        self.models
            .iter()
            .find(|(_, model)| {
                self.providers
                    .get(&model.provider)
                    .is_some_and(|settings| settings.kind == kind)
            })
            .map(|(name, _)| name.as_str())
    }

    /// The model named `name`, exactly.
    pub fn model(&self, name: &str) -> Option<&CatalogModel> {
        self.models.get(name)
    }

    /// The catalog provider a caller's `text` names: a provider's name, or
    /// the one provider of that kind (`anthropic`, `bedrock`, …), compared
    /// without case (callers write `OpenAI`, `Anthropic`).
    pub fn provider_named(&self, text: &str) -> Option<&str> {
        let wanted = text.trim().to_ascii_lowercase();
        if let Some((name, _)) = self
            .providers
            .iter()
            .find(|(name, _)| name.to_ascii_lowercase() == wanted)
        {
            return Some(name);
        }
        let of_kind: Vec<&String> = self
            .providers
            .iter()
            .filter(|(_, settings)| {
                serde_json::to_value(settings.kind)
                    .ok()
                    .and_then(|kind| kind.as_str().map(str::to_string))
                    .is_some_and(|kind| kind == wanted)
            })
            .map(|(name, _)| name)
            .collect();
        match of_kind.as_slice() {
            [only] => Some(only.as_str()),
            _ => None,
        }
    }

    /// The first model (by name) of `provider` that gives structured output.
    pub fn first_structured_model_of(&self, provider: &str) -> Option<&str> {
        self.models
            .iter()
            .find(|(_, model)| model.provider == provider && model.supports.json_schema)
            .map(|(name, _)| name.as_str())
    }

    /// The provider settings of the model named `name`.
    pub fn provider_of(&self, name: &str) -> Option<(&str, &ProviderSettings)> {
        let model = self.models.get(name)?;
        self.providers
            .get_key_value(&model.provider)
            .map(|(provider, settings)| (provider.as_str(), settings))
    }

    /// The entry that prices `model`: its exact entry, else the longest
    /// entry it starts with followed by `-`.
    /// A model the deployment added without prices has none.
    pub fn price_of(&self, model: &str) -> Option<&CatalogModel> {
        if let Some(entry) = self.models.get(model) {
            return self.is_priced(model).then_some(entry);
        }
        self.models
            .iter()
            .filter(|(name, _)| self.is_priced(name))
            .filter(|(name, _)| {
                model.len() > name.len()
                    && model.starts_with(name.as_str())
                    && model.as_bytes().get(name.len()) == Some(&b'-')
            })
            .max_by_key(|(name, _)| name.len())
            .map(|(_, entry)| entry)
    }

    /// What `usage` on `model` cost, when the catalog prices it.
    pub fn cost_usd(&self, model: &str, usage: &TokenUsage) -> Option<f64> {
        let price = self.price_of(model)?;
        let cached = usage.cached_prompt_tokens.min(usage.prompt_tokens);
        let written = usage
            .cache_write_prompt_tokens
            .min(usage.prompt_tokens - cached);
        let uncached = usage.prompt_tokens - cached - written;
        let read_price = price
            .cache_read_per_million_usd
            .unwrap_or(price.input_per_million_usd);
        let write_price = price
            .cache_write_per_million_usd
            .unwrap_or(price.input_per_million_usd);
        let micro_dollars = uncached as f64 * price.input_per_million_usd
            + cached as f64 * read_price
            + written as f64 * write_price
            + usage.completion_tokens as f64 * price.output_per_million_usd;
        Some(micro_dollars / 1_000_000.0)
    }
}

/// Rounds a cost for display in frames (to a millionth of a cent), so
/// float noise does not show.
pub fn round_cost(cost_usd: f64) -> f64 {
    (cost_usd * 1e8).round() / 1e8
}

#[cfg(test)]
mod tests;
