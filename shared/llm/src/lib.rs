//! `baton-llm`: model providers for Baton's `LlmProvider` port.
//!
//! It owns the OpenAI-compatible chat-completions client over reqwest:
//! streaming (`delta`s forwarded as they arrive), `response_format:
//! {type: "json_schema"}`, token usage, timeouts, and retries with
//! exponential backoff and jitter on 429/5xx that honour `Retry-After`.
//!
//! Invariants: configuration problems surface when the provider is built
//! (start-up), never at the first call; the API key never reaches a log.

pub mod anthropic;
pub mod config;
pub mod openai_compatible;
mod retries;

pub use config::OpenAiCompatibleConfig;
pub use openai_compatible::OpenAiCompatibleProvider;
