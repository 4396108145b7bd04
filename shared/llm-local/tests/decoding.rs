//! The local provider against the real model file: answers parse and fit the
//! schema they were constrained by, and the streamed deltas add up to the
//! answer. Slow (CPU decoding) and needs `bash scripts/fetch-local-model.sh`,
//! so `#[ignore]`d in the fast suite; `scripts/test.sh` runs it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

use std::sync::Arc;

use baton_core::basics::schema::{collect_violations, compile_schema};
use baton_core::state::context::ModelRequest;
use baton_llm_local::{LocalModelConfig, LocalModelProvider};
use baton_runtime::ports::{LlmProvider, ModelDelta};
use serde_json::{Value, json};

fn provider() -> LocalModelProvider {
    let config = LocalModelConfig::from_variables(&|name| std::env::var(name).ok()).unwrap();
    LocalModelProvider::load(config).unwrap_or_else(|error| panic!("{error}"))
}

fn request(schema: Value) -> ModelRequest {
    ModelRequest {
        system_instruction: "You are a marketing strategist. Answer with JSON only.".into(),
        user_message: json!({
            "objective": "Name two reasons plant managers choose an industrial analytics vendor.",
            "inputs": {"sector": "Industrial IoT", "audience": "plant managers"}
        })
        .to_string(),
        schema_name: "reasons".into(),
        output_schema: Arc::new(schema),
        model: None,
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "slow: decodes with the offline model on the CPU; scripts/test.sh runs it"]
async fn answers_fit_the_schema_they_were_constrained_by_and_stream_as_deltas() {
    let provider = provider();
    let schema = json!({
        "type": "object",
        "required": ["reasons", "confidence", "tone"],
        "additionalProperties": false,
        "properties": {
            "reasons": {
                "type": "array", "minItems": 2, "maxItems": 2,
                "items": {
                    "type": "object",
                    "required": ["title", "detail"],
                    "additionalProperties": false,
                    "properties": {"title": {"type": "string", "minLength": 3}, "detail": {"type": "string"}}
                }
            },
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "tone": {"type": "string", "enum": ["practical", "visionary"]}
        }
    });
    let (deltas_sender, mut deltas) = tokio::sync::mpsc::unbounded_channel();
    let answer = provider
        .complete(&request(schema.clone()), deltas_sender)
        .await
        .unwrap();
    let mut streamed = String::new();
    while let Ok(delta) = deltas.try_recv() {
        let ModelDelta::Text(delta) = delta else {
            unreachable!("the local model never restarts an answer")
        };
        streamed.push_str(&delta);
    }
    assert_eq!(streamed, answer.content);
    let value: Value = serde_json::from_str(&answer.content)
        .unwrap_or_else(|error| panic!("not JSON ({error}): {}", answer.content));
    let validator = compile_schema(&schema, "test").unwrap();
    let violations = collect_violations(&validator, &value);
    assert!(
        violations.is_empty(),
        "{violations:?} in {:?}",
        answer.content
    );
    assert!(answer.usage.prompt_tokens > 0 && answer.usage.completion_tokens > 0);
    assert!(answer.model.starts_with("local:"), "{}", answer.model);
}
