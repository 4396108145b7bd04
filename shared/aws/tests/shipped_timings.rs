//! One set of timings: the deployment's (`infra/template.yaml`'s `Timeouts`
//! mapping), the local stack's (`infra/local.sh`, run against moto here)
//! and the code's defaults agree, so what the tests prove on the local
//! stack holds for what is deployed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use baton_core::basics::ids::RunKey;
use baton_runtime::ports::RunLog;
use std::time::Duration;

use aws_sdk_sqs::types::QueueAttributeName;
use baton_runtime::queue::disposition::MAX_RECEIVES_BEFORE_DEAD_LETTER;
use baton_runtime::services::OrchestratorSettings;
use baton_test_support::repository_path;
use moto_server::{MotoServer, shipped_step_timings, unique_name};

#[test]
fn the_code_s_defaults_are_the_template_s_timings() {
    let shipped = shipped_step_timings().unwrap();
    let node_lease = Duration::from_secs(u64::from(shipped.node_lease_seconds));
    assert_eq!(
        OrchestratorSettings::default().node_lease,
        node_lease,
        "the default node lease (BATON_NODE_LEASE_SECONDS unset) is the template's NodeLeaseSeconds"
    );
    assert_eq!(
        baton_aws::sqs::DEFAULT_RECEIVE_HOLD,
        node_lease,
        "a received message starts hidden for one node lease"
    );
    assert_eq!(
        MAX_RECEIVES_BEFORE_DEAD_LETTER, shipped.max_receive_count,
        "the worker gives a step up at the redrive policy's last receive"
    );
    assert!(
        shipped.queue_visibility_seconds >= shipped.function_seconds,
        "Lambda refuses an event source whose queue hides a message for less than the function's timeout"
    );
    assert!(
        shipped.model_request_seconds < shipped.function_seconds,
        "one model request fits in a step's invocation"
    );
    assert!(
        shipped.node_lease_seconds <= 60,
        "a dead holder's message and node come back within a minute"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_local_stack_creates_the_step_queue_as_the_template_ships_it() {
    let moto = MotoServer::start().unwrap();
    let shipped = shipped_step_timings().unwrap();
    let queue_name = unique_name("baton-local-sh");
    let output = std::process::Command::new("bash")
        .arg(repository_path("infra/local.sh"))
        .args(["up", "--endpoint", &moto.endpoint])
        .env("BATON_TABLE", unique_name("baton-local-sh"))
        .env("BATON_QUEUE_NAME", &queue_name)
        .env(
            "BATON_LOCAL_STATE_DIR",
            std::env::temp_dir().join(unique_name("baton-local-sh-state")),
        )
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "infra/local.sh up failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let exports = String::from_utf8(output.stdout).unwrap();
    let exported = |name: &str| -> String {
        exports
            .lines()
            .find_map(|line| line.strip_prefix(&format!("export {name}=")))
            .unwrap_or_else(|| panic!("infra/local.sh printed no {name}: {exports}"))
            .to_string()
    };
    assert_eq!(
        exported("BATON_NODE_LEASE_SECONDS"),
        shipped.node_lease_seconds.to_string()
    );
    let sqs = aws_sdk_sqs::Client::new(&moto.sdk_configuration().await);
    let attributes = sqs
        .get_queue_attributes()
        .queue_url(exported("BATON_QUEUE_URL"))
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .unwrap();
    let attributes = attributes.attributes().unwrap();
    assert_eq!(
        attributes[&QueueAttributeName::VisibilityTimeout],
        shipped.queue_visibility_seconds.to_string()
    );
    let redrive: serde_json::Value =
        serde_json::from_str(&attributes[&QueueAttributeName::RedrivePolicy]).unwrap();
    assert_eq!(
        redrive["maxReceiveCount"].to_string().trim_matches('"'),
        shipped.max_receive_count.to_string()
    );
    let dead_letter_url = exported("BATON_DEAD_LETTER_QUEUE_URL");
    let dead_letter_arn = moto_server::queue_arn(&moto.sdk_configuration().await, &dead_letter_url)
        .await
        .unwrap();
    assert_eq!(redrive["deadLetterTargetArn"], dead_letter_arn.as_str());
}

/// What a tenant reads of a failed AWS call (a run's `failure.message`, a
/// 502/503 body, an `error` frame) is a short cause, the service's code and
/// its message: never the SDK's report with its request id, a resource's
/// ARN or an account id. A missing table or queue is permanent.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_aws_call_reads_as_a_cause_and_a_code() {
    use baton_runtime::ports::StepQueue;
    let moto = MotoServer::start().unwrap();
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let missing_table = baton_aws::DynamoRunStore::new(&connection, unique_name("no-such-table"));
    let error = missing_table
        .load_run(RunKey::new("t", "run_1"))
        .await
        .unwrap_err();
    let text = error.to_string();
    // A missing table is a deployment to fix, not a call to retry.
    assert!(!error.is_retryable(), "{text}");
    assert!(
        text.starts_with("refused: DynamoDB ") && text.contains("(ResourceNotFoundException)"),
        "{text}"
    );
    let missing_queue = baton_aws::SqsStepQueue::new(
        &connection,
        format!(
            "{}/123456789012/{}",
            moto.endpoint,
            unique_name("no-such-queue")
        ),
    );
    let text = missing_queue
        .receive(1, Duration::ZERO)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        text.starts_with("queue refused: SQS ReceiveMessage failed ("),
        "{text}"
    );
    for leaked in ["arn:", "request id", "RequestId", "123456789012", "http"] {
        assert!(
            !text.contains(leaked) && !error.to_string().contains(leaked),
            "`{leaked}` leaked into what a tenant reads"
        );
    }
}

/// SQS takes 1 MiB per message and per batch: a step message over it is
/// refused before it is sent (not retryable: sending it again cannot help),
/// and messages that fit are sent in batches that fit.
#[tokio::test(flavor = "multi_thread")]
async fn step_messages_are_held_to_sqs_s_size_limit() {
    use baton_core::state::run::{StepCommand, StepMessage};
    use baton_runtime::ports::StepQueue;
    let moto = MotoServer::start().unwrap();
    let configuration = moto.sdk_configuration().await;
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let shipped = moto_server::create_shipped_step_queue(&configuration, "baton-sizes")
        .await
        .unwrap();
    let queue = baton_aws::SqsStepQueue::new(&connection, shipped.queue_url);
    let message = |index: usize, bytes: usize| StepMessage {
        message_id: format!("run_1:child-ended:{index}"),
        tenant_id: "t".into(),
        run_id: "run_1".into(),
        command: StepCommand::ChildRunEnded {
            node_id: "node_agent".into(),
            attempt: 1,
            turn: 1,
            call_id: format!("call_{index}"),
            summary: serde_json::json!({"note": "x".repeat(bytes)}),
        },
        not_before: None,
        traceparent: None,
    };
    let refused = queue.send(&[message(0, 1_100_000)]).await.unwrap_err();
    assert!(
        matches!(refused, baton_runtime::error::QueueError::TooLarge(_)) && !refused.is_retryable(),
        "{refused}"
    );
    assert!(refused.to_string().contains("1048576"), "{refused}");
    // Twelve of 200 KB: more than one batch's 1 MiB, all sent.
    let many: Vec<StepMessage> = (1..=12).map(|index| message(index, 200_000)).collect();
    queue.send(&many).await.unwrap();
    let mut received = std::collections::BTreeSet::new();
    for _ in 0..10 {
        for step in queue.receive(10, Duration::from_secs(1)).await.unwrap() {
            received.insert(step.message.message_id.clone());
            queue.acknowledge(&step.receipt).await.unwrap();
        }
        if received.len() == 12 {
            break;
        }
    }
    assert_eq!(received.len(), 12);
}
