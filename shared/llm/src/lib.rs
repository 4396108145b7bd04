//! `baton-llm`: model providers for Baton's `LlmProvider` port.
//!
//! It owns two HTTP clients over reqwest: OpenAI-compatible chat
//! completions (`openai_compatible`: streaming, `response_format: {type:
//! "json_schema"}`) and Anthropic's Messages API (`anthropic`: SSE events,
//! structured output as a forced answer tool). Both share one retry loop
//! (`retries`: exponential backoff and jitter on 429/5xx/529 that honours
//! `Retry-After`, a broken stream retried with a restart told to readers).
//! Amazon Bedrock's provider lives in `baton-aws` (SDK types stay there).
//! `embeddings`: text embeddings from the same OpenAI-compatible endpoint
//! (the `TextEmbedder` port), for the registry search by meaning.
//!
//! Invariants: configuration problems surface when the provider is built
//! (start-up), never at the first call; the API key never reaches a log.

pub mod anthropic;
pub mod config;
pub mod embeddings;
pub mod openai_compatible;
pub mod retries;

pub use config::OpenAiCompatibleConfig;
pub use openai_compatible::OpenAiCompatibleProvider;
