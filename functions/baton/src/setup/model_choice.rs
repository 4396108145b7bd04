//! Which language model the CLI talks to.
//!
//! `BATON_LLM=remote` → the OpenAI-compatible endpoint (`BATON_LLM_BASE_URL`
//! …); `BATON_LLM=local` → the offline model in-process. Unset: remote when
//! an endpoint or key is configured, else local.

use std::sync::Arc;

use baton_bootstrap::{StartupError, VariableReader};
use baton_runtime::ports::LlmProvider;

/// The two kinds of model the CLI can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelChoice {
    Remote,
    Local,
}

const REMOTE_MARKERS: [&str; 3] = ["BATON_LLM_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY"];

/// A `BATON_LLM` that names neither kind (the value, trimmed and lowered).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "BATON_LLM={0:?} is not valid: use `local` (the offline model) or `remote` (BATON_LLM_BASE_URL)"
)]
pub struct UnknownModelChoice(String);

/// Reads `BATON_LLM` and the remote variables from `read`.
pub fn model_choice_from(
    read: &dyn Fn(&str) -> Option<String>,
) -> Result<ModelChoice, UnknownModelChoice> {
    let forced = read("BATON_LLM")
        .map(|value| value.trim().to_ascii_lowercase())
        .filter(|value| !value.is_empty());
    match forced.as_deref() {
        Some("local") => Ok(ModelChoice::Local),
        Some("remote") => Ok(ModelChoice::Remote),
        Some(other) => Err(UnknownModelChoice(other.to_string())),
        None => {
            let remote_configured = REMOTE_MARKERS.iter().any(|name| {
                read(name)
                    .map(|value| !value.trim().is_empty())
                    .unwrap_or(false)
            });
            Ok(if remote_configured {
                ModelChoice::Remote
            } else {
                ModelChoice::Local
            })
        }
    }
}

/// The provider the variables ask for, loaded and ready.
pub fn model_for_cli(read: VariableReader<'_>) -> Result<Arc<dyn LlmProvider>, StartupError> {
    let choice = model_choice_from(read).map_err(|error| StartupError(error.to_string()))?;
    match choice {
        ModelChoice::Remote => baton_bootstrap::model_from_variables(read),
        ModelChoice::Local => local_model(read),
    }
}

/// [`model_for_cli`] as the default, behind the router that sends a request
/// naming a catalog model to its provider (the offline model serves the
/// catalog's `local` provider when it is the default). Remote agents'
/// `{"secret": …}` headers are read from `secrets`.
pub fn routed_model_for_cli(
    registry: &baton_core::catalog::registry::Registry,
    read: VariableReader<'_>,
    secrets: Arc<dyn baton_runtime::ports::SecretStore>,
) -> Result<Arc<dyn LlmProvider>, StartupError> {
    let default = model_for_cli(read)?;
    let local = (model_choice_from(read) == Ok(ModelChoice::Local)).then(|| default.clone());
    Ok(baton_bootstrap::model_routes::routed_model(
        default, local, registry, read, secrets,
    ))
}

#[cfg(feature = "local-model")]
fn local_model(read: VariableReader<'_>) -> Result<Arc<dyn LlmProvider>, StartupError> {
    eprintln!("baton: no BATON_LLM_BASE_URL set; using the offline local model (BATON_LLM=local)");
    let provider = baton_llm_local::LocalModelProvider::from_variables(read)
        .map_err(|error| StartupError(error.to_string()))?;
    Ok(Arc::new(provider))
}

#[cfg(not(feature = "local-model"))]
fn local_model(_read: VariableReader<'_>) -> Result<Arc<dyn LlmProvider>, StartupError> {
    Err(StartupError(
        "no model configured: set BATON_LLM_BASE_URL to an OpenAI-compatible /v1 URL (this baton was built without the `local-model` feature, so the offline model is not available)".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name: &str| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| value.to_string())
        }
    }

    #[test]
    fn an_endpoint_selects_remote_and_nothing_selects_local() {
        assert_eq!(model_choice_from(&reader(&[])), Ok(ModelChoice::Local));
        assert_eq!(
            model_choice_from(&reader(&[("BATON_LLM_BASE_URL", "http://127.0.0.1:9/v1")])),
            Ok(ModelChoice::Remote)
        );
        assert_eq!(
            model_choice_from(&reader(&[("OPENAI_API_KEY", "sk-test")])),
            Ok(ModelChoice::Remote)
        );
        assert_eq!(
            model_choice_from(&reader(&[("BATON_LLM_BASE_URL", "  ")])),
            Ok(ModelChoice::Local)
        );
    }

    #[test]
    fn baton_llm_forces_either_and_rejects_anything_else() {
        assert_eq!(
            model_choice_from(&reader(&[
                ("BATON_LLM", "local"),
                ("BATON_LLM_BASE_URL", "http://127.0.0.1:9/v1")
            ])),
            Ok(ModelChoice::Local)
        );
        assert_eq!(
            model_choice_from(&reader(&[("BATON_LLM", "Remote")])),
            Ok(ModelChoice::Remote)
        );
        let error = model_choice_from(&reader(&[("BATON_LLM", "gpu")])).unwrap_err();
        assert_eq!(error, UnknownModelChoice("gpu".into()));
        let message = error.to_string();
        assert!(message.contains("BATON_LLM=\"gpu\""), "{message}");
        assert!(message.contains("`local`"), "{message}");
    }
}
