//! `events/lambda/ingest-sqs-event.json` is an SQS event whose body is an
//! ingest submission (`{tenantId, envelope}`) with a valid envelope.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::Path;

use aws_lambda_events::event::sqs::SqsEvent;
use baton_core::contracts::envelope::TaskEnvelope;
use baton_runtime::workers::IngestMessage;

#[test]
fn the_sample_sqs_event_carries_a_valid_submission() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let event: SqsEvent = serde_json::from_str(
        &std::fs::read_to_string(root.join("events/lambda/ingest-sqs-event.json")).unwrap(),
    )
    .unwrap();
    let records = baton_lambda_glue::sqs_records(event);
    assert_eq!(records.len(), 1);
    let submission: IngestMessage = serde_json::from_str(&records[0].body).unwrap();
    assert_eq!(submission.tenant_id, "local");
    let envelope = TaskEnvelope::parse_value(&submission.envelope).unwrap();
    assert_eq!(envelope.idempotency_key.as_deref(), Some("crm-event-42"));
}
