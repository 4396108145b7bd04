//! The local provider: one GGUF model loaded at start-up, one answer at a
//! time, decoding constrained by a grammar derived from the node's schema.

use std::io::Read;
use std::num::NonZeroU32;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use baton_core::state::context::ModelRequest;
use baton_core::state::run::TokenUsage;
use baton_runtime::error::LlmError;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;
use tokio::sync::Semaphore;
use tokio::sync::mpsc::UnboundedSender;

use crate::config::{FETCH_MODEL_COMMAND, LocalModelConfig};
use crate::decoding_schema::with_decoding_budgets;
use crate::utf8_pieces::Utf8PieceJoiner;

/// Why the local model cannot start; every message says how to repair it.
#[derive(Debug, thiserror::Error)]
pub enum LocalModelError {
    #[error(
        "the local model file {path} does not exist; fetch it with `{FETCH_MODEL_COMMAND}` (or set BATON_LOCAL_MODEL_PATH, or BATON_LLM_BASE_URL for a remote model)"
    )]
    ModelFileMissing { path: String },
    #[error(
        "the local model file {path} is not a usable GGUF model ({reason}); fetch it again with `{FETCH_MODEL_COMMAND}`"
    )]
    ModelFileCorrupt { path: String, reason: String },
    #[error("local model configuration: {0}")]
    Configuration(#[from] crate::config::LocalModelConfigError),
    #[error("the llama.cpp backend did not start: {0}")]
    Backend(String),
}

impl From<LocalModelError> for LlmError {
    fn from(error: LocalModelError) -> Self {
        LlmError::Configuration(error.to_string())
    }
}

/// llama.cpp's backend is process-wide and may be initialised once.
fn backend() -> Result<&'static LlamaBackend, LocalModelError> {
    static BACKEND: OnceLock<Result<LlamaBackend, llama_cpp_2::LlamaCppError>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            // llama.cpp's own logging goes through `tracing` (quiet unless BATON_LOG asks).
            llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
            LlamaBackend::init()
        })
        .as_ref()
        .map_err(|error| LocalModelError::Backend(error.to_string()))
}

/// The first four bytes of every GGUF file.
const GGUF_MAGIC: &[u8; 4] = b"GGUF";

fn check_model_file(path: &Path) -> Result<(), LocalModelError> {
    let display = path.display().to_string();
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(LocalModelError::ModelFileMissing { path: display });
        }
        Err(error) => {
            return Err(LocalModelError::ModelFileCorrupt {
                path: display,
                reason: format!("cannot be read: {error}"),
            });
        }
    };
    let mut magic = [0u8; 4];
    if let Err(error) = file.read_exact(&mut magic) {
        return Err(LocalModelError::ModelFileCorrupt {
            path: display,
            reason: format!("too short to be a model: {error}"),
        });
    }
    if &magic != GGUF_MAGIC {
        return Err(LocalModelError::ModelFileCorrupt {
            path: display,
            reason: "it does not start with the GGUF signature".into(),
        });
    }
    Ok(())
}

struct LoadedModel {
    model: LlamaModel,
    chat_template: LlamaChatTemplate,
    config: LocalModelConfig,
    name: String,
}

/// How long one answer took, for the bench and for telemetry.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerationTimings {
    pub prompt_tokens: u64,
    pub answer_tokens: u64,
    /// From the call to the first answer token (prompt processing included).
    pub time_to_first_token: Duration,
    /// From the first answer token to the last.
    pub decoding_time: Duration,
    /// Whether the answer stopped at the token limit instead of ending itself.
    pub hit_token_limit: bool,
}

impl GenerationTimings {
    /// Answer tokens per second after the first one.
    pub fn decoding_tokens_per_second(&self) -> f64 {
        let seconds = self.decoding_time.as_secs_f64();
        if self.answer_tokens < 2 || seconds <= 0.0 {
            return 0.0;
        }
        (self.answer_tokens - 1) as f64 / seconds
    }
}

/// SmolLM2 (or any chat GGUF) in-process, behind Baton's `LlmProvider` port.
#[derive(Clone)]
pub struct LocalModelProvider {
    loaded: Arc<LoadedModel>,
    /// One answer at a time: two would only share the same cores.
    generation_gate: Arc<Semaphore>,
}

impl std::fmt::Debug for LocalModelProvider {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("LocalModelProvider")
            .field("model", &self.loaded.name)
            .field("config", &self.loaded.config)
            .finish()
    }
}

impl LocalModelProvider {
    /// Loads the model named by `config`; a missing or corrupt file is an
    /// error naming the command that fetches it.
    pub fn load(config: LocalModelConfig) -> Result<Self, LocalModelError> {
        check_model_file(&config.model_path)?;
        let backend = backend()?;
        let display = config.model_path.display().to_string();
        let model =
            LlamaModel::load_from_file(backend, &config.model_path, &LlamaModelParams::default())
                .map_err(|error| LocalModelError::ModelFileCorrupt {
                path: display.clone(),
                reason: format!("llama.cpp could not load it: {error}"),
            })?;
        let chat_template =
            model
                .chat_template(None)
                .map_err(|error| LocalModelError::ModelFileCorrupt {
                    path: display.clone(),
                    reason: format!("it carries no chat template: {error}"),
                })?;
        let name = model
            .meta_val_str("general.name")
            .ok()
            .filter(|name| !name.trim().is_empty())
            .unwrap_or_else(|| {
                config
                    .model_path
                    .file_stem()
                    .map(|stem| stem.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "local-model".into())
            });
        Ok(LocalModelProvider {
            loaded: Arc::new(LoadedModel {
                model,
                chat_template,
                config,
                name: format!("local:{name}"),
            }),
            generation_gate: Arc::new(Semaphore::new(1)),
        })
    }

    /// Reads [`LocalModelConfig::from_variables`] and loads the model.
    pub fn from_variables(read: &dyn Fn(&str) -> Option<String>) -> Result<Self, LocalModelError> {
        Self::load(LocalModelConfig::from_variables(read)?)
    }

    /// Answers `request` like [`LlmProvider::complete`], with the timings.
    pub async fn complete_with_timings(
        &self,
        request: &ModelRequest,
        deltas: UnboundedSender<ModelDelta>,
    ) -> Result<(ModelAnswer, GenerationTimings), LlmError> {
        let messages = vec![
            ("system".to_string(), request.system_instruction.clone()),
            ("user".to_string(), request.user_message.clone()),
        ];
        let schema = request.output_schema.as_ref().clone();
        self.generate_on_thread(messages, schema, deltas).await
    }

    /// Decodes one answer to `messages` under `schema` on a blocking thread,
    /// one answer at a time.
    async fn generate_on_thread(
        &self,
        messages: Vec<(String, String)>,
        schema: serde_json::Value,
        deltas: UnboundedSender<ModelDelta>,
    ) -> Result<(ModelAnswer, GenerationTimings), LlmError> {
        let _permit = self
            .generation_gate
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| LlmError::Configuration("the local model was shut down".into()))?;
        let loaded = self.loaded.clone();
        tokio::task::spawn_blocking(move || generate(&loaded, &messages, &schema, &deltas))
            .await
            .map_err(|error| {
                LlmError::UnexpectedResponse(format!("the local model's thread failed: {error}"))
            })?
    }
}

#[async_trait]
impl LlmProvider for LocalModelProvider {
    fn model_name(&self) -> String {
        self.loaded.name.clone()
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        let (answer, timings) = self.complete_with_timings(request, deltas).await?;
        tracing::debug!(
            model = %answer.model,
            prompt_tokens = timings.prompt_tokens,
            answer_tokens = timings.answer_tokens,
            time_to_first_token_ms = timings.time_to_first_token.as_millis() as u64,
            tokens_per_second = timings.decoding_tokens_per_second(),
            "local model answered"
        );
        if timings.hit_token_limit {
            tracing::warn!(
                limit = self.loaded.config.max_answer_tokens,
                "the local model's answer reached BATON_LOCAL_MAX_TOKENS before it ended"
            );
        }
        Ok(answer)
    }

    /// A turn with tools: the answer is decoded under a grammar allowing a
    /// call of one offered tool (arguments under its schema) or the final
    /// answer (`crate::conversation`). The envelope is not streamed.
    async fn converse(
        &self,
        request: &ModelRequest,
        session: &baton_core::records::conversation::ToolSession,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<baton_core::records::conversation::SessionAnswer, LlmError> {
        let messages = crate::conversation::turn_messages(request, session);
        let tools_allowed =
            crate::conversation::tool_rounds(session) < self.loaded.config.max_tool_rounds;
        let schema = crate::conversation::turn_schema(request, session, tools_allowed);
        let (silent, _ignored) = tokio::sync::mpsc::unbounded_channel();
        let (answer, _timings) = self.generate_on_thread(messages, schema, silent).await?;
        crate::conversation::read_turn(&answer.content, session, answer.usage, answer.model)
            .map_err(|reason| {
                LlmError::UnexpectedResponse(format!(
                    "the local model's turn is unreadable: {reason}"
                ))
            })
    }
}

fn rejected(message: String) -> LlmError {
    LlmError::RequestRejected {
        status: 400,
        body: message,
    }
}

fn internal(what: &str, error: impl std::fmt::Display) -> LlmError {
    LlmError::UnexpectedResponse(format!("local model: {what}: {error}"))
}

/// Sampling held to a grammar, the way llama.cpp's own common sampler does
/// it: sample from the model's candidates as configured, then ask the
/// grammar about that one token; only when it refuses is the grammar applied
/// to the whole vocabulary (≈49k tokens) and the token sampled again. Most
/// tokens of a schema-shaped answer are allowed as first sampled, so the
/// full-vocabulary grammar pass is the exception, not the rule.
struct ConstrainedSampler {
    grammar: LlamaSampler,
    sampling: LlamaSampler,
}

impl ConstrainedSampler {
    fn for_schema(loaded: &LoadedModel, schema: &serde_json::Value) -> Result<Self, LlmError> {
        let budgeted = with_decoding_budgets(schema);
        let grammar =
            llama_cpp_2::json_schema_to_grammar(&budgeted.to_string()).map_err(|error| {
                rejected(format!(
                    "the output schema cannot be turned into a decoding grammar: {error}"
                ))
            })?;
        let grammar = LlamaSampler::grammar(&loaded.model, &grammar, "root")
            .map_err(|error| rejected(format!("the decoding grammar does not load: {error}")))?;
        let config = &loaded.config;
        let mut chain = vec![LlamaSampler::penalties(
            loaded.model.n_vocab(),
            64,
            1.1,
            0.0,
            0.0,
        )];
        if config.temperature <= 0.0 {
            chain.push(LlamaSampler::greedy());
        } else {
            chain.extend([
                LlamaSampler::top_k(40),
                LlamaSampler::top_p(0.9, 1),
                LlamaSampler::temp(config.temperature),
                LlamaSampler::dist(config.seed),
            ]);
        }
        Ok(ConstrainedSampler {
            grammar,
            sampling: LlamaSampler::chain_simple(chain),
        })
    }

    fn grammar_allows(&mut self, token: LlamaToken) -> bool {
        let mut single =
            LlamaTokenDataArray::new(vec![LlamaTokenData::new(token, 0.0, 0.0)], false);
        self.grammar.apply(&mut single);
        single
            .data
            .first()
            .is_some_and(|candidate| candidate.logit().is_finite())
    }

    /// Samples the next token from the logits at `index` and records it.
    fn sample(&mut self, context: &LlamaContext<'_>, index: i32) -> Option<LlamaToken> {
        let mut candidates = context.token_data_array_ith(index);
        self.sampling.apply(&mut candidates);
        let first_choice = candidates.selected_token();
        let token = match first_choice {
            Some(token) if self.grammar_allows(token) => token,
            _ => {
                let mut candidates = context.token_data_array_ith(index);
                self.grammar.apply(&mut candidates);
                self.sampling.apply(&mut candidates);
                candidates.selected_token()?
            }
        };
        self.grammar.accept(token);
        self.sampling.accept(token);
        Some(token)
    }
}

/// Prompt processing, then token-by-token decoding under the grammar.
fn generate(
    loaded: &LoadedModel,
    messages: &[(String, String)],
    schema: &serde_json::Value,
    deltas: &UnboundedSender<ModelDelta>,
) -> Result<(ModelAnswer, GenerationTimings), LlmError> {
    let started = Instant::now();
    let config = &loaded.config;
    let messages = messages
        .iter()
        .map(|(role, content)| LlamaChatMessage::new(role.clone(), content.clone()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| rejected(format!("the prompt cannot be passed to the model: {error}")))?;
    let prompt = loaded
        .model
        .apply_chat_template(&loaded.chat_template, &messages, true)
        .map_err(|error| internal("applying the chat template", error))?;
    let vocab = loaded.model.vocab();
    let prompt_tokens = vocab.tokenize(prompt.as_bytes(), vocab.should_add_bos(), true);
    let context_tokens = config.context_tokens as usize;
    if prompt_tokens.len() + config.max_answer_tokens as usize > context_tokens {
        return Err(rejected(format!(
            "the prompt is {} tokens; with BATON_LOCAL_MAX_TOKENS={} it does not fit BATON_LOCAL_CONTEXT_TOKENS={}",
            prompt_tokens.len(),
            config.max_answer_tokens,
            config.context_tokens
        )));
    }
    let mut sampler = ConstrainedSampler::for_schema(loaded, schema)?;

    let batch_tokens: u32 = 512;
    // The KV cache is sized to this answer's need (prompt + token limit,
    // rounded up), not the whole window: allocating it is part of the time
    // to first token.
    let needed_tokens = prompt_tokens.len() + config.max_answer_tokens as usize;
    let context_tokens_for_answer = u32::try_from(needed_tokens.div_ceil(256) * 256)
        .unwrap_or(config.context_tokens)
        .min(config.context_tokens);
    let context_parameters = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(context_tokens_for_answer))
        .with_n_batch(batch_tokens)
        .with_n_threads(config.threads)
        .with_n_threads_batch(config.threads);
    let backend = backend().map_err(|error| internal("backend", error))?;
    let mut context = loaded
        .model
        .new_context(backend, context_parameters)
        .map_err(|error| internal("creating a context", error))?;

    let mut batch = LlamaBatch::new(batch_tokens as usize, 1);
    let mut position: i32 = 0;
    let chunks: Vec<_> = prompt_tokens.chunks(batch_tokens as usize).collect();
    for (chunk_index, chunk) in chunks.iter().enumerate() {
        batch.clear();
        let last_chunk = chunk_index + 1 == chunks.len();
        for (offset, token) in chunk.iter().enumerate() {
            let wants_logits = last_chunk && offset + 1 == chunk.len();
            batch
                .add(*token, position, &[0], wants_logits)
                .map_err(|error| internal("filling the prompt batch", error))?;
            position += 1;
        }
        context
            .decode(&mut batch)
            .map_err(|error| internal("processing the prompt", error))?;
    }

    let mut joiner = Utf8PieceJoiner::default();
    let mut content = String::new();
    let mut answer_tokens: u64 = 0;
    let mut first_token_at: Option<Instant> = None;
    let mut hit_token_limit = true;
    let mut logits_index = batch.n_tokens() - 1;
    for _ in 0..config.max_answer_tokens {
        let Some(token) = sampler.sample(&context, logits_index) else {
            return Err(internal(
                "sampling",
                "no token satisfies the decoding grammar here",
            ));
        };
        if vocab.is_eog(token) {
            hit_token_limit = false;
            break;
        }
        first_token_at.get_or_insert_with(Instant::now);
        answer_tokens += 1;
        let text = joiner.push(&vocab.token_to_piece(token, false, None));
        if !text.is_empty() {
            content.push_str(&text);
            // A closed receiver only means nobody streams this answer.
            let _ = deltas.send(ModelDelta::Text(text));
        }
        batch.clear();
        batch
            .add(token, position, &[0], true)
            .map_err(|error| internal("filling the decoding batch", error))?;
        position += 1;
        logits_index = 0;
        context
            .decode(&mut batch)
            .map_err(|error| internal("decoding", error))?;
    }
    let rest = joiner.finish();
    if !rest.is_empty() {
        content.push_str(&rest);
        let _ = deltas.send(ModelDelta::Text(rest));
    }
    let finished = Instant::now();
    let first_token_at = first_token_at.unwrap_or(finished);
    let timings = GenerationTimings {
        prompt_tokens: prompt_tokens.len() as u64,
        answer_tokens,
        time_to_first_token: first_token_at.duration_since(started),
        decoding_time: finished.duration_since(first_token_at),
        hit_token_limit,
    };
    let answer = ModelAnswer {
        content,
        usage: TokenUsage {
            prompt_tokens: timings.prompt_tokens,
            completion_tokens: timings.answer_tokens,
            cached_prompt_tokens: 0,
            cache_write_prompt_tokens: 0,
        },
        model: loaded.name.clone(),
    };
    Ok((answer, timings))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_for(path: &Path) -> LocalModelConfig {
        LocalModelConfig {
            model_path: path.to_path_buf(),
            threads: 1,
            context_tokens: 1024,
            max_answer_tokens: 64,
            temperature: 0.0,
            seed: 1,
            max_tool_rounds: 1,
        }
    }

    /// The start-up error for a model file with `contents` (absent when `None`).
    fn load_error_for(name: &str, contents: Option<&[u8]>) -> String {
        let path = std::env::temp_dir().join(format!("baton-{name}-{}.gguf", std::process::id()));
        if let Some(contents) = contents {
            assert!(std::fs::write(&path, contents).is_ok());
        }
        let error = LocalModelProvider::load(config_for(&path))
            .err()
            .map(|error| error.to_string())
            .unwrap_or_default();
        let _ = std::fs::remove_file(&path);
        error
    }

    #[test]
    fn a_missing_or_corrupt_model_file_is_an_error_naming_the_fetch_command() {
        let table: [(&str, Option<&[u8]>, &str); 3] = [
            ("absent", None, "does not exist"),
            // Not GGUF at all: refused before llama.cpp sees it.
            (
                "not-a-model",
                Some(b"<html>not a model</html>"),
                "GGUF signature",
            ),
            // GGUF signature but truncated: llama.cpp refuses it.
            (
                "truncated",
                Some(b"GGUF\x03\x00\x00\x00\x01"),
                "llama.cpp could not load it",
            ),
        ];
        for (name, contents, reason) in table {
            let error = load_error_for(name, contents);
            assert!(error.contains(reason), "{name}: {error}");
            assert!(
                error.contains("bash scripts/fetch-local-model.sh"),
                "{name}: {error}"
            );
        }
    }
}
