//! Local model settings from the environment.

use std::path::PathBuf;

/// The model file the fetch script installs.
pub const DEFAULT_MODEL_FILE_NAME: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// The command that installs (or repairs) the default model file.
pub const FETCH_MODEL_COMMAND: &str = "bash scripts/fetch-local-model.sh";

/// How the local provider loads and samples its model.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalModelConfig {
    /// The GGUF file.
    pub model_path: PathBuf,
    /// CPU threads for decoding (and prompt processing).
    pub threads: i32,
    /// Context window in tokens (prompt and answer together).
    pub context_tokens: u32,
    /// Upper bound on generated tokens per answer.
    pub max_answer_tokens: u32,
    /// Sampling temperature; 0 decodes greedily.
    pub temperature: f32,
    /// Seed of the sampler, so a run is reproducible on one machine.
    pub seed: u32,
    /// Tool calls a session's turns may make before the grammar offers only
    /// the answer (a small model does not reliably stop calling tools).
    pub max_tool_rounds: u32,
}

fn non_empty_variable(read: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    read(name)
        .map(|value| value.trim().to_string())
        .filter(|value| !value.is_empty())
}

/// A malformed local-model variable, named.
#[derive(Debug, thiserror::Error)]
#[error("{variable}={value:?} is not valid: {expected}")]
pub struct LocalModelConfigError {
    pub variable: &'static str,
    pub value: String,
    pub expected: &'static str,
}

fn parsed_variable<T: std::str::FromStr>(
    read: &dyn Fn(&str) -> Option<String>,
    variable: &'static str,
    expected: &'static str,
    default: T,
    accept: impl Fn(&T) -> bool,
) -> Result<T, LocalModelConfigError> {
    match non_empty_variable(read, variable) {
        None => Ok(default),
        Some(value) => match value.parse::<T>() {
            Ok(parsed) if accept(&parsed) => Ok(parsed),
            _ => Err(LocalModelConfigError {
                variable,
                value,
                expected,
            }),
        },
    }
}

/// The model directory: `$BATON_MODEL_DIR`, else `$XDG_CACHE_HOME/baton/models`,
/// else `$HOME/.cache/baton/models` (the fetch script uses the same rule).
pub fn default_model_directory(read: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    if let Some(directory) = non_empty_variable(read, "BATON_MODEL_DIR") {
        return PathBuf::from(directory);
    }
    let cache_home = non_empty_variable(read, "XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| non_empty_variable(read, "HOME").map(|home| PathBuf::from(home).join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"));
    cache_home.join("baton").join("models")
}

impl LocalModelConfig {
    /// Reads `BATON_LOCAL_MODEL_PATH` (default: the fetch script's file in
    /// [`default_model_directory`]), `BATON_LOCAL_THREADS` (default: the
    /// available cores, at most 4), `BATON_LOCAL_CONTEXT_TOKENS` (4096),
    /// `BATON_LOCAL_MAX_TOKENS` (768), `BATON_LOCAL_TEMPERATURE` (0.2),
    /// `BATON_LOCAL_SEED` (42) and `BATON_LOCAL_TOOL_ROUNDS` (1).
    /// The variables come from `read` (the process environment in production).
    pub fn from_variables(
        read: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, LocalModelConfigError> {
        let model_path = non_empty_variable(read, "BATON_LOCAL_MODEL_PATH")
            .map(PathBuf::from)
            .unwrap_or_else(|| default_model_directory(read).join(DEFAULT_MODEL_FILE_NAME));
        let available_cores = std::thread::available_parallelism()
            .map(|cores| cores.get().min(4))
            .unwrap_or(1);
        let default_threads = i32::try_from(available_cores).unwrap_or(1);
        Ok(LocalModelConfig {
            model_path,
            threads: parsed_variable(
                read,
                "BATON_LOCAL_THREADS",
                "a whole number of threads from 1 to 64",
                default_threads,
                |threads| (1..=64).contains(threads),
            )?,
            context_tokens: parsed_variable(
                read,
                "BATON_LOCAL_CONTEXT_TOKENS",
                "a whole number of tokens from 512 to 8192 (the model's training window)",
                4096,
                |tokens| (512..=8192).contains(tokens),
            )?,
            max_answer_tokens: parsed_variable(
                read,
                "BATON_LOCAL_MAX_TOKENS",
                "a whole number of tokens from 16 to 4096",
                768,
                |tokens| (16..=4096).contains(tokens),
            )?,
            temperature: parsed_variable(
                read,
                "BATON_LOCAL_TEMPERATURE",
                "a number from 0 to 2",
                0.2,
                |temperature| (0.0..=2.0).contains(temperature),
            )?,
            seed: parsed_variable(read, "BATON_LOCAL_SEED", "a whole number", 42, |_| true)?,
            max_tool_rounds: parsed_variable(
                read,
                "BATON_LOCAL_TOOL_ROUNDS",
                "a whole number of tool calls from 0 to 16",
                1,
                |rounds| *rounds <= 16,
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn reader(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect();
        move |name: &str| map.get(name).cloned()
    }

    #[test]
    fn the_default_path_is_the_fetch_scripts_file_under_the_cache() {
        let config = LocalModelConfig::from_variables(&reader(&[("HOME", "/home/dev")]))
            .map_err(|error| error.to_string());
        assert_eq!(
            config.map(|config| config.model_path),
            Ok(PathBuf::from(
                "/home/dev/.cache/baton/models/SmolLM2-135M-Instruct.Q4_1.gguf"
            ))
        );
        let config = LocalModelConfig::from_variables(&reader(&[
            ("HOME", "/home/dev"),
            ("BATON_MODEL_DIR", "/models"),
        ]))
        .map_err(|error| error.to_string());
        assert_eq!(
            config.map(|config| config.model_path),
            Ok(PathBuf::from("/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
        );
    }

    #[test]
    fn a_malformed_variable_is_named_with_what_was_expected() {
        let error = LocalModelConfig::from_variables(&reader(&[("BATON_LOCAL_THREADS", "0")]))
            .err()
            .map(|error| error.to_string())
            .unwrap_or_default();
        assert!(error.contains("BATON_LOCAL_THREADS=\"0\""), "{error}");
        assert!(error.contains("from 1 to 64"), "{error}");
        let error =
            LocalModelConfig::from_variables(&reader(&[("BATON_LOCAL_TEMPERATURE", "hot")]))
                .err()
                .map(|error| error.to_string())
                .unwrap_or_default();
        assert!(error.contains("BATON_LOCAL_TEMPERATURE"), "{error}");
    }
}
