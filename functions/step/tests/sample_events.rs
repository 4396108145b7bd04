//! `events/lambda/step-sqs-event.json` is an SQS event whose body is a step
//! message that matches `events/schemas/step-message.schema.json`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::Path;

use aws_lambda_events::event::sqs::SqsEvent;
use baton_core::basics::schema::{collect_violations, compile_schema};
use baton_core::state::run::StepMessage;

#[test]
fn the_sample_sqs_event_carries_a_valid_step_message() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let event: SqsEvent = serde_json::from_str(
        &std::fs::read_to_string(root.join("events/lambda/step-sqs-event.json")).unwrap(),
    )
    .unwrap();
    let schema = serde_json::from_str(
        &std::fs::read_to_string(root.join("events/schemas/step-message.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = compile_schema(&schema, "step-message.schema.json").unwrap();
    assert_eq!(event.records.len(), 1);
    let body = event.records[0].body.as_deref().unwrap();
    let json: serde_json::Value = serde_json::from_str(body).unwrap();
    assert!(collect_violations(&validator, &json).is_empty());
    let message: StepMessage = serde_json::from_value(json).unwrap();
    assert_eq!(message.message_id, "run_example:plan");
}
