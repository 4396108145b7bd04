//! `events/lambda/sweeper-scheduled-event.json` is the EventBridge scheduled
//! event the sweeper receives (it reads nothing from it but its arrival).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::Path;

#[test]
fn the_sample_scheduled_event_is_a_scheduled_event() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let event: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("events/lambda/sweeper-scheduled-event.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(event["detail-type"], "Scheduled Event");
    assert_eq!(event["source"], "aws.events");
}
