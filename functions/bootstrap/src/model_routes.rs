//! The model port of a deployment: the default model (`BATON_LLM_*`, or
//! the CLI's offline model) behind a `ModelRouter` that sends each request
//! naming a catalog model to that model's provider, configured from the
//! registry's `models.json` (the endpoint and key read from the variables
//! the catalog names).

use std::sync::Arc;

use baton_core::catalog::model_catalog::{ProviderKind, ProviderSettings};
use baton_core::catalog::registry::Registry;
use baton_runtime::models::router::{ModelRouter, ProviderRoute};
use baton_runtime::ports::LlmProvider;

use crate::config::VariableReader;

/// `default` for requests naming no model; the catalog's providers for the
/// others. `local` is the offline model when this process runs it.
pub fn routed_model(
    default: Arc<dyn LlmProvider>,
    local: Option<Arc<dyn LlmProvider>>,
    registry: &Registry,
    read: VariableReader<'_>,
    secrets: Arc<dyn baton_runtime::ports::SecretStore>,
) -> Arc<dyn LlmProvider> {
    // `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`: model spans
    // carry the prompt and completion (redacted like snapshots).
    let capture = variable(read, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
        .is_some_and(|value| value.eq_ignore_ascii_case("true"));
    let mut router = ModelRouter::new(default).with_content_capture(capture);
    for (name, settings) in &registry.models().providers {
        let route = match settings.kind {
            ProviderKind::Openai => openai_route(settings, read),
            ProviderKind::Anthropic => anthropic_route(registry, name, settings, read),
            ProviderKind::Bedrock => bedrock_route(registry, name),
            ProviderKind::Local => match &local {
                Some(offline) => ProviderRoute::Ready(offline.clone()),
                None => ProviderRoute::Unavailable(
                    "the offline model runs only in the `baton` CLI with no BATON_LLM_BASE_URL set"
                        .into(),
                ),
            },
        };
        router = router.with_provider(name.clone(), route);
        if let Some(calls) = settings.max_concurrent_calls {
            router = router.with_limit(name.clone(), calls);
        }
    }
    // Remote agents (a capability's `remoteAgent`) through the outbound guard.
    router = router.with_provider(
        baton_core::contracts::capability::REMOTE_AGENT_PROVIDER.to_string(),
        ProviderRoute::Ready(Arc::new(
            baton_a2a_client::RemoteAgents::new(
                &variable(read, "BATON_OUTBOUND_HTTP_HOSTS").unwrap_or_default(),
            )
            .with_secrets(secrets, Arc::new(crate::config::process_environment)),
        )),
    );
    // The default model (added to the catalog when the deployment started,
    // `crate::default_model`) takes its fallbacks and its provider's limit;
    // it is still called on the default endpoint.
    if let Some(target) = baton_core::planning::model_choice::default_target(registry.models())
        .or_else(|| {
            variable(read, "BATON_LLM_MODEL").and_then(|name| {
                baton_core::planning::model_choice::target_of(registry.models(), &name)
            })
        })
    {
        router = router.with_default_target(target);
    }
    Arc::new(router)
}

fn variable(read: VariableReader<'_>, name: &str) -> Option<String> {
    read(name)
        .map(|value| value.trim().to_string())
        .filter(|value| !value.is_empty())
}

/// An OpenAI-compatible provider at the catalog's endpoint.
fn openai_route(settings: &ProviderSettings, read: VariableReader<'_>) -> ProviderRoute {
    let base_url = settings
        .base_url_variable
        .as_deref()
        .and_then(|name| variable(read, name))
        .or_else(|| settings.base_url.clone());
    let Some(base_url) = base_url else {
        return ProviderRoute::Unavailable(match &settings.base_url_variable {
            Some(name) => format!("no endpoint: set {name} (or `baseUrl` in models.json)"),
            None => "no endpoint: give it `baseUrl` or `baseUrlVariable` in models.json".into(),
        });
    };
    let api_key = settings
        .api_key_variable
        .as_deref()
        .and_then(|name| variable(read, name));
    // Every routed request names its model; this one only fills the
    // configuration's default.
    let fallback_model = variable(read, "BATON_LLM_MODEL").unwrap_or_default();
    let mut config = baton_llm::OpenAiCompatibleConfig::new(base_url, fallback_model, api_key);
    if let Some(name) = &settings.api_key_variable {
        config.api_key_variable = name.clone();
    }
    if let Ok(defaults) = baton_llm::OpenAiCompatibleConfig::from_variables(read) {
        config.max_attempts = defaults.max_attempts;
        config.request_timeout = defaults.request_timeout;
    }
    match baton_llm::OpenAiCompatibleProvider::new(config) {
        Ok(provider) => ProviderRoute::Ready(Arc::new(provider)),
        Err(error) => ProviderRoute::Unavailable(error.to_string()),
    }
}

/// The largest answer every one of `provider`'s models may write (a
/// request's `max_tokens` above a model's own limit is refused), at most
/// 8,192.
fn max_output_tokens(registry: &Registry, provider: &str) -> Option<u32> {
    registry
        .models()
        .models
        .values()
        .filter(|model| model.provider == provider)
        .filter_map(|model| model.max_output_tokens)
        .min()
        .map(|fewest| u32::try_from(fewest.min(8_192)).unwrap_or(8_192))
}

/// Bedrock's Converse API with the process's AWS credentials and region.
fn bedrock_route(registry: &Registry, provider: &str) -> ProviderRoute {
    let mut settings = baton_aws::bedrock::BedrockSettings::default();
    if let Some(most) = max_output_tokens(registry, provider) {
        settings.max_tokens = most;
    }
    ProviderRoute::Ready(Arc::new(
        baton_aws::bedrock::BedrockProvider::from_environment(settings),
    ))
}

/// Anthropic's Messages API at the catalog's endpoint (its public one by
/// default), the key from the variable the catalog names.
fn anthropic_route(
    registry: &Registry,
    provider: &str,
    settings: &ProviderSettings,
    read: VariableReader<'_>,
) -> ProviderRoute {
    let base_url = settings
        .base_url_variable
        .as_deref()
        .and_then(|name| variable(read, name))
        .or_else(|| settings.base_url.clone())
        .unwrap_or_else(|| baton_llm::anthropic::ANTHROPIC_BASE_URL.to_string());
    let Some(key_variable) = settings.api_key_variable.clone() else {
        return ProviderRoute::Unavailable(
            "no key: name its variable in `apiKeyVariable` in models.json".into(),
        );
    };
    let Some(api_key) = variable(read, &key_variable) else {
        return ProviderRoute::Unavailable(format!("no key: set {key_variable}"));
    };
    let mut config =
        baton_llm::anthropic::AnthropicConfig::new(base_url, Some(api_key), key_variable);
    if let Some(most) = max_output_tokens(registry, provider) {
        config.max_tokens = most;
    }
    match baton_llm::anthropic::AnthropicProvider::new(config) {
        Ok(provider) => ProviderRoute::Ready(Arc::new(provider)),
        Err(error) => ProviderRoute::Unavailable(error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::catalog::registry::RegistryDocument;
    use baton_core::contracts::model_request::ModelTarget;
    use baton_core::state::context::ModelRequest;

    /// Test double for the default model: never asked in these tests.
    struct Unused;

    #[async_trait::async_trait]
    impl LlmProvider for Unused {
        fn model_name(&self) -> String {
            "unused".into()
        }
        async fn complete(
            &self,
            _request: &ModelRequest,
            _deltas: tokio::sync::mpsc::UnboundedSender<baton_runtime::ports::ModelDelta>,
        ) -> Result<baton_runtime::ports::ModelAnswer, baton_runtime::error::LlmError> {
            panic!("the default model is not asked for a catalog model")
        }
    }

    fn request_for(provider: &str) -> ModelRequest {
        ModelRequest {
            system_instruction: String::new(),
            user_message: String::new(),
            schema_name: "s".into(),
            output_schema: Arc::new(serde_json::json!({"type": "object"})),
            model: Some(Box::new(ModelTarget {
                name: "m".into(),
                provider: provider.into(),
                model_id: "m".into(),
                fallbacks: Vec::new(),
                ..Default::default()
            })),
        }
    }

    /// Test double for a model endpoint that keeps answering 429 (as a
    /// provider gives up after its own retries).
    struct RateLimited;

    #[async_trait::async_trait]
    impl LlmProvider for RateLimited {
        fn model_name(&self) -> String {
            "main".into()
        }
        async fn complete(
            &self,
            _request: &ModelRequest,
            _deltas: tokio::sync::mpsc::UnboundedSender<baton_runtime::ports::ModelDelta>,
        ) -> Result<baton_runtime::ports::ModelAnswer, baton_runtime::error::LlmError> {
            Err(baton_runtime::error::LlmError::RateLimited { attempts: 5 })
        }
    }

    /// Test double for a model endpoint that answers.
    struct Answers;

    #[async_trait::async_trait]
    impl LlmProvider for Answers {
        fn model_name(&self) -> String {
            "spare".into()
        }
        async fn complete(
            &self,
            request: &ModelRequest,
            _deltas: tokio::sync::mpsc::UnboundedSender<baton_runtime::ports::ModelDelta>,
        ) -> Result<baton_runtime::ports::ModelAnswer, baton_runtime::error::LlmError> {
            Ok(baton_runtime::ports::ModelAnswer {
                content: "{}".into(),
                usage: Default::default(),
                model: request
                    .model
                    .as_ref()
                    .map(|target| target.model_id.clone())
                    .unwrap_or_default(),
            })
        }
    }

    #[tokio::test]
    async fn a_default_model_the_catalog_names_falls_back_like_a_chosen_one() {
        let mut registry = Registry::default();
        registry
            .add_model_catalog_document(&RegistryDocument {
                source_name: "models.json".into(),
                text: r#"{"providers": {"hosted": {"kind": "openai", "baseUrlVariable": "HOSTED_BASE_URL"}, "local": {"kind": "local"}},
                          "models": {"main": {"provider": "hosted", "inputPerMillionUsd": 1, "outputPerMillionUsd": 1,
                                              "supports": {"jsonSchema": true}, "fallbackModels": ["spare"]},
                                     "spare": {"provider": "local", "inputPerMillionUsd": 0, "outputPerMillionUsd": 0,
                                               "supports": {"jsonSchema": true}}}}"#.into(),
            })
            .unwrap();
        let default_is_main = |name: &str| (name == "BATON_LLM_MODEL").then(|| "main".to_string());
        let router = routed_model(
            Arc::new(RateLimited),
            Some(Arc::new(Answers)),
            &registry,
            &default_is_main,
            Arc::new(baton_runtime::ports::NoSecrets),
        );
        let mut request = request_for("unused");
        request.model = None;
        let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
        let answer = router.complete(&request, sender).await.unwrap();
        assert_eq!(answer.model, "spare");
        match receiver.try_recv() {
            Ok(baton_runtime::ports::ModelDelta::FellBack(fallback)) => {
                assert_eq!(
                    (fallback.from.as_str(), fallback.to.as_str()),
                    ("main", "spare")
                );
            }
            other => panic!("a fallback is told, got {other:?}"),
        }
        // Not a catalog name: the default fails as before, with no fallback.
        let unnamed = |_: &str| Some("not-in-the-catalog".to_string());
        let router = routed_model(
            Arc::new(RateLimited),
            Some(Arc::new(Answers)),
            &registry,
            &unnamed,
            Arc::new(baton_runtime::ports::NoSecrets),
        );
        let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
        assert!(router.complete(&request, sender).await.is_err());
    }

    #[tokio::test]
    async fn a_provider_without_its_endpoint_or_outside_the_cli_says_what_to_set() {
        let mut registry = Registry::default();
        registry
            .add_model_catalog_document(&RegistryDocument {
                source_name: "models.json".into(),
                text: r#"{"providers": {"hosted": {"kind": "openai", "baseUrlVariable": "HOSTED_BASE_URL", "apiKeyVariable": "HOSTED_KEY"}, "claude": {"kind": "anthropic", "apiKeyVariable": "ANTHROPIC_API_KEY"}, "local": {"kind": "local"}}, "models": {}}"#.into(),
            })
            .unwrap();
        let nothing_set = |_: &str| None;
        let router = routed_model(
            Arc::new(Unused),
            None,
            &registry,
            &nothing_set,
            Arc::new(baton_runtime::ports::NoSecrets),
        );
        for (provider, expected) in [
            ("hosted", "no endpoint: set HOSTED_BASE_URL"),
            ("claude", "no key: set ANTHROPIC_API_KEY"),
            ("local", "the offline model runs only in the `baton` CLI"),
            ("elsewhere", "which this process was not given"),
        ] {
            let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
            let error = router
                .complete(&request_for(provider), sender)
                .await
                .unwrap_err()
                .to_string();
            assert!(error.contains(expected), "{provider}: {error}");
        }
    }
}
