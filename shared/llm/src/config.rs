//! Provider configuration from the environment.

use std::time::Duration;

use baton_runtime::error::LlmError;

/// Settings of an OpenAI-compatible endpoint.
#[derive(Clone)]
pub struct OpenAiCompatibleConfig {
    /// Base URL ending in `/v1` (no trailing slash needed).
    pub base_url: String,
    pub api_key: Option<String>,
    /// The variable the key came from, named when the endpoint refuses it.
    pub api_key_variable: String,
    pub model: String,
    /// Whole-request timeout (streaming included).
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    /// Total attempts per request, the first included.
    pub max_attempts: u32,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// Upper bound on a server's `Retry-After`.
    pub max_retry_after: Duration,
}

impl std::fmt::Debug for OpenAiCompatibleConfig {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("OpenAiCompatibleConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("max_attempts", &self.max_attempts)
            .finish()
    }
}

fn non_empty_variable(read: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    read(name)
        .map(|value| value.trim().to_string())
        .filter(|value| !value.is_empty())
}

impl OpenAiCompatibleConfig {
    /// Defaults around an endpoint and model.
    pub fn new(
        base_url: impl Into<String>,
        model: impl Into<String>,
        api_key: Option<String>,
    ) -> Self {
        OpenAiCompatibleConfig {
            base_url: base_url.into().trim_end_matches('/').to_string(),
            api_key,
            api_key_variable: "BATON_LLM_API_KEY".to_string(),
            model: model.into(),
            request_timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(10),
            max_attempts: 5,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(20),
            max_retry_after: Duration::from_secs(60),
        }
    }

    /// Reads `BATON_LLM_BASE_URL`, `BATON_LLM_API_KEY`, `BATON_LLM_MODEL`
    /// (falling back to `OPENAI_BASE_URL`, `OPENAI_API_KEY`, `OPENAI_MODEL`),
    /// and `BATON_LLM_MAX_ATTEMPTS`, `BATON_LLM_TIMEOUT_SECONDS`.
    /// The variables come from `read` (the process environment in production).
    pub fn from_variables(read: &dyn Fn(&str) -> Option<String>) -> Result<Self, LlmError> {
        let from_openai_variable = non_empty_variable(read, "BATON_LLM_API_KEY").is_none()
            && non_empty_variable(read, "OPENAI_API_KEY").is_some();
        let api_key = non_empty_variable(read, "BATON_LLM_API_KEY")
            .or_else(|| non_empty_variable(read, "OPENAI_API_KEY"));
        let base_url = non_empty_variable(read, "BATON_LLM_BASE_URL")
            .or_else(|| non_empty_variable(read, "OPENAI_BASE_URL"))
            .or_else(|| api_key.as_ref().map(|_| "https://api.openai.com/v1".to_string()))
            .ok_or_else(|| {
                LlmError::Configuration(
                    "no model endpoint configured: set BATON_LLM_BASE_URL to an OpenAI-compatible /v1 URL (or OPENAI_API_KEY for api.openai.com)".into(),
                )
            })?;
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(LlmError::Configuration(format!(
                "BATON_LLM_BASE_URL must start with http:// or https:// (got `{base_url}`)"
            )));
        }
        let model = non_empty_variable(read, "BATON_LLM_MODEL")
            .or_else(|| non_empty_variable(read, "OPENAI_MODEL"))
            .ok_or_else(|| {
                LlmError::Configuration("BATON_LLM_MODEL is not set: name the model to call".into())
            })?;
        let mut config = OpenAiCompatibleConfig::new(base_url, model, api_key);
        if from_openai_variable {
            config.api_key_variable = "OPENAI_API_KEY".to_string();
        }
        if let Some(text) = non_empty_variable(read, "BATON_LLM_MAX_ATTEMPTS") {
            config.max_attempts = text
                .parse::<u32>()
                .ok()
                .filter(|attempts| *attempts >= 1)
                .ok_or_else(|| {
                    LlmError::Configuration(format!(
                        "BATON_LLM_MAX_ATTEMPTS must be a positive integer (got `{text}`)"
                    ))
                })?;
        }
        if let Some(text) = non_empty_variable(read, "BATON_LLM_TIMEOUT_SECONDS") {
            let seconds = text
                .parse::<u64>()
                .ok()
                .filter(|seconds| *seconds >= 1)
                .ok_or_else(|| {
                    LlmError::Configuration(format!(
                        "BATON_LLM_TIMEOUT_SECONDS must be a positive integer (got `{text}`)"
                    ))
                })?;
            config.request_timeout = Duration::from_secs(seconds);
        }
        if let Some(text) = non_empty_variable(read, "BATON_LLM_INITIAL_BACKOFF_MS") {
            let millis = text.parse::<u64>().map_err(|_| {
                LlmError::Configuration(format!(
                    "BATON_LLM_INITIAL_BACKOFF_MS must be an integer (got `{text}`)"
                ))
            })?;
            config.initial_backoff = Duration::from_millis(millis);
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn variables(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn missing_endpoint_is_a_clear_error() {
        let error = OpenAiCompatibleConfig::from_variables(&variables(&[])).unwrap_err();
        assert!(error.to_string().contains("BATON_LLM_BASE_URL"), "{error}");
    }

    #[test]
    fn baton_variables_win_over_openai_ones() {
        let config = OpenAiCompatibleConfig::from_variables(&variables(&[
            ("BATON_LLM_BASE_URL", "http://localhost:1/v1/"),
            ("OPENAI_BASE_URL", "http://other/v1"),
            ("BATON_LLM_MODEL", "m"),
            ("OPENAI_API_KEY", "sk-secret"),
        ]))
        .unwrap();
        assert_eq!(config.base_url, "http://localhost:1/v1");
        assert_eq!(config.api_key.as_deref(), Some("sk-secret"));
        assert!(!format!("{config:?}").contains("sk-secret"));
    }

    #[test]
    fn missing_model_is_a_clear_error() {
        let error = OpenAiCompatibleConfig::from_variables(&variables(&[(
            "BATON_LLM_BASE_URL",
            "http://x/v1",
        )]))
        .unwrap_err();
        assert!(error.to_string().contains("BATON_LLM_MODEL"));
    }

    #[test]
    fn bad_attempt_count_is_rejected() {
        let error = OpenAiCompatibleConfig::from_variables(&variables(&[
            ("BATON_LLM_BASE_URL", "http://x/v1"),
            ("BATON_LLM_MODEL", "m"),
            ("BATON_LLM_MAX_ATTEMPTS", "zero"),
        ]))
        .unwrap_err();
        assert!(error.to_string().contains("BATON_LLM_MAX_ATTEMPTS"));
    }
}
