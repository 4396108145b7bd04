//! Bench binary: time to first token and decoding speed of the offline model.
//!
//!   cargo bench -p baton-llm-local --bench local_model
//!
//! Loads the model the environment names (`bash scripts/fetch-local-model.sh`
//! installs the default), then answers one fixed request (a copy-variant
//! shaped schema, grammar-constrained like every node) a few times per thread
//! count and prints each round and the medians. Sampling is seeded, so every
//! round decodes the same tokens and the rounds differ only in timing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench code: a failure aborts the bench

use std::sync::Arc;
use std::time::Duration;

use baton_core::state::context::ModelRequest;
use baton_llm_local::{LocalModelConfig, LocalModelProvider};
use serde_json::json;

const ROUNDS: usize = 5;

fn request() -> ModelRequest {
    ModelRequest {
        system_instruction: "You are a copywriter. Write one social media post variant for the brief. Answer with JSON only.".into(),
        user_message: json!({
            "objective": "Announce a real-time audit trail feature to compliance officers.",
            "inputs": {"audience": "compliance officers at mid-sized banks", "tone": "confident, plain"}
        })
        .to_string(),
        schema_name: "copy_variant".into(),
        output_schema: Arc::new(json!({
            "type": "object",
            "required": ["headline", "body", "callToAction"],
            "additionalProperties": false,
            "properties": {
                "headline": {"type": "string", "maxLength": 80},
                "body": {"type": "string", "maxLength": 400},
                "callToAction": {"type": "string", "maxLength": 60}
            }
        })),
        model: None,
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is accepted.
    let base = match LocalModelConfig::from_variables(&|name| std::env::var(name).ok()) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("local_model bench: {error}");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut thread_counts = vec![1, base.threads];
    thread_counts.dedup();
    println!(
        "local model: {} (max {} answer tokens, temperature {}, seed {})",
        base.model_path.display(),
        base.max_answer_tokens,
        base.temperature,
        base.seed
    );
    for threads in thread_counts {
        let config = LocalModelConfig {
            threads,
            ..base.clone()
        };
        let provider = match LocalModelProvider::load(config) {
            Ok(provider) => provider,
            Err(error) => {
                eprintln!("local_model bench: {error}");
                std::process::exit(2);
            }
        };
        let request = request();
        // Warm-up: page the weights in, build the grammar once.
        let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
        runtime
            .block_on(provider.complete_with_timings(&request, sender))
            .unwrap();
        let mut first_token_ms = Vec::new();
        let mut tokens_per_second = Vec::new();
        for round in 1..=ROUNDS {
            let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
            let (_answer, timings) = runtime
                .block_on(provider.complete_with_timings(&request, sender))
                .unwrap();
            println!(
                "threads {threads} round {round}: prompt {} tokens, answer {} tokens, time to first token {:.1} ms, decoding {:.1} tokens/s",
                timings.prompt_tokens,
                timings.answer_tokens,
                millis(timings.time_to_first_token),
                timings.decoding_tokens_per_second()
            );
            first_token_ms.push(millis(timings.time_to_first_token));
            tokens_per_second.push(timings.decoding_tokens_per_second());
        }
        println!(
            "threads {threads}: median time to first token {:.1} ms, median decoding {:.1} tokens/s over {ROUNDS} rounds",
            median(first_token_ms),
            median(tokens_per_second)
        );
    }
}
