//! Content rules the registry declares (`registry/rules/*.json`), enforced
//! on node answers: with the shipped registry, an envelope whose
//! `constraints.platform` names a channel gets its copy checked against
//! that channel's rule set; a copy that breaks it is a `validation_error`
//! naming the text's JSON pointer and the rule, and the node is asked
//! again with it. Another channel's rules leave the same copy alone.
//!
//! The model is a test double: schema-shaped answers, except the copy
//! writer's, which is a long variant with three hashtags first and a short
//! one after. Everything else is the real engine on the in-memory store.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunStatus, TokenUsage};
use baton_core::wire::event::EventFrame;
use baton_runtime::error::LlmError;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use baton_test_support::TestServices;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

/// Test double for the model endpoint (see the file's header); records the
/// user message of every copy request.
#[derive(Default)]
struct CopyModel {
    copy_requests: Mutex<Vec<String>>,
}

fn variant(body: &str) -> Value {
    json!({"headline": "Compliance, handled", "body": body, "callToAction": "Book a demo"})
}

#[async_trait]
impl LlmProvider for CopyModel {
    fn model_name(&self) -> String {
        "copy-double".into()
    }
    async fn complete(
        &self,
        request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        let properties = &request.output_schema["properties"];
        let writes_copy =
            properties.get("copyVariants").is_some() && properties.get("qaFindings").is_none();
        let content = if writes_copy {
            let mut asked = self.copy_requests.lock().unwrap();
            asked.push(request.user_message.clone());
            let body = if asked.len() == 1 {
                format!(
                    "{} #ai #compliance #launch",
                    "Regulated teams ship faster. ".repeat(10)
                )
            } else {
                "Regulated teams ship faster with AI copilots. #compliance".to_string()
            };
            json!({"copyVariants": [variant(&body), variant("Less risk, fewer late nights.")]})
        } else {
            scripted_llm::generate_instance(&request.output_schema, "answer")
        };
        Ok(ModelAnswer {
            content: content.to_string(),
            usage: TokenUsage::default(),
            model: "copy-double".into(),
        })
    }
}

async fn run_for(platform: &str) -> (RunStatus, Vec<EventFrame>, Vec<String>, Value) {
    let model = Arc::new(CopyModel::default());
    let (services, runner) = TestServices::with_model(model.clone()).build_with_local_runner();
    let mut envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    envelope["constraints"] = json!({"platform": platform});
    let run = services.runs.submit("t", &envelope).await.unwrap();
    let status = runner.run_until_settled("t", &run.run_id).await.unwrap();
    let frames = services
        .runs
        .read_all_events_after("t", &run.run_id, 0)
        .await
        .unwrap();
    baton_test_support::assert_frames_match_schemas(&frames);
    let stored = services.runs.load("t", &run.run_id).await.unwrap().unwrap();
    let output = stored.state.output.unwrap_or_default();
    let asked = model.copy_requests.lock().unwrap().clone();
    (status, frames, asked, output)
}

fn rule_violations(frames: &[EventFrame]) -> Vec<Value> {
    frames
        .iter()
        .filter(|frame| frame.event_type.as_str() == "validation_error")
        .flat_map(|frame| {
            frame.payload.as_ref().unwrap()["errors"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|error| {
            error["schemaPointer"]
                .as_str()
                .is_some_and(|pointer| pointer.starts_with("rules/"))
        })
        .collect()
}

#[tokio::test]
async fn a_copy_over_the_channel_s_rules_is_asked_again_naming_each_rule() {
    let (status, frames, asked, output) = run_for("x").await;
    assert_eq!(status, RunStatus::Completed);
    let broken = rule_violations(&frames);
    let said: Vec<(&str, &str)> = broken
        .iter()
        .map(|error| {
            (
                error["instancePointer"].as_str().unwrap(),
                error["schemaPointer"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        said,
        vec![
            ("/copyVariants/0", "rules/x#/maxLength"),
            ("/copyVariants/0", "rules/x#/hashtags"),
        ],
        "{broken:?}"
    );
    assert_eq!(broken[0]["facet"], "copyVariants");
    assert!(
        broken[1]["message"]
            .as_str()
            .unwrap()
            .contains("3 hashtags, over the 2 allowed"),
        "{broken:?}"
    );
    assert_eq!(asked.len(), 2, "the copy is asked for once more");
    assert!(
        asked[1].contains("rule set `x`"),
        "the second request carries the broken rules: {}",
        asked[1]
    );
    let delivered = output["copyVariants"][0]["body"].as_str().unwrap();
    assert!(delivered.chars().count() <= 280, "{delivered}");
}

#[tokio::test]
async fn another_channel_s_rules_leave_the_same_copy_alone() {
    let (status, frames, asked, output) = run_for("linkedin").await;
    assert_eq!(status, RunStatus::Completed);
    assert!(rule_violations(&frames).is_empty());
    assert_eq!(asked.len(), 1);
    assert!(
        output["copyVariants"][0]["body"]
            .as_str()
            .unwrap()
            .contains("#launch")
    );
}
