//! Judge panels published to a stand-in consensus node (the crate's
//! `stand_in`, a test double of the service's gRPC API, served by tonic on
//! a local port): a panel run on the step engine gets a topic, every
//! message of its transcript on it as a `jurybox.message`, and each
//! message's transaction id in the committed transcript, the hash chain
//! intact. A busy node is waited out; a wrong key is refused and nothing is
//! committed; a long message goes in chunks. The judges' model is a test
//! double answering by judge.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use baton_core::basics::ids::RunKey;
use baton_core::contracts::panels::TranscriptPublication;
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunStatus, TokenUsage};
use baton_hcs::HcsTranscripts;
use baton_hcs::messages::AccountId;
use baton_hcs::operator::{account_from_text, public_key_of};
use baton_hcs::settings::HcsSettings;
use baton_hcs::stand_in::StandInNode;
use baton_judge::request::PanelRequest;
use baton_judge::transcript::{
    ConversationMessage, EvaluationTranscript, MessagePhase, MessageRole,
};
use baton_runtime::error::{LlmError, PublishError};
use baton_runtime::memory::{InMemoryRunStore, InMemoryStepQueue, LocalSecrets};
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta, RunLog, TranscriptPublisher};
use baton_runtime::workers::LocalRunner;
use baton_test_support::TestServices;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

/// A throwaway Ed25519 seed for the test operator (never a real account's).
const OPERATOR_KEY: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
const OTHER_KEY: &str = "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb";
const OPERATOR: &str = "0.0.1002";

/// Test double for the judges' model endpoint: judges score 8, 8.5 and 8.2.
#[derive(Default)]
struct JudgeModel {
    calls: AtomicUsize,
}

#[async_trait]
impl LlmProvider for JudgeModel {
    fn model_name(&self) -> String {
        "judge".into()
    }
    async fn complete(
        &self,
        request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        let score = [8.0, 8.5, 8.2][call % 3];
        let _ = request;
        Ok(ModelAnswer {
            content: json!({"score": score, "feedback": format!("sound, {score}"),
                            "strengths": ["clear"], "improvements": []})
            .to_string(),
            usage: TokenUsage::default(),
            model: "judge".into(),
        })
    }
}

fn node_account() -> AccountId {
    account_from_text("0.0.3", "node").unwrap()
}

async fn stand_in() -> StandInNode {
    StandInNode::start(
        node_account(),
        account_from_text(OPERATOR, "operator").unwrap(),
        public_key_of(OPERATOR_KEY, "key").unwrap(),
    )
    .await
    .unwrap()
}

/// The publisher as a deployment configures it: variables, the key by
/// reference in the local secret store.
fn publisher(node: &StandInNode, key: &'static str) -> HcsTranscripts {
    let url = node.url.clone();
    let read = move |name: &str| match name {
        "BATON_HCS_NODE_URL" => Some(url.clone()),
        "BATON_HCS_OPERATOR_ACCOUNT" => Some(OPERATOR.to_string()),
        "BATON_HCS_OPERATOR_KEY" => Some("hcs-operator".to_string()),
        "BATON_HCS_RECEIPT_TIMEOUT_SECONDS" => Some("5".to_string()),
        _ => None,
    };
    let settings = HcsSettings::from_variables(&read).unwrap().unwrap();
    let secrets = LocalSecrets::new(
        Arc::new(move |name: &str| (name == "BATON_SECRET_HCS_OPERATOR").then(|| key.to_string())),
        None,
    );
    HcsTranscripts::new(settings, Arc::new(secrets))
}

fn panel_body() -> Value {
    json!({
        "request": {"id": "req-hcs", "content": "A claim to judge.", "criteria": ["Accuracy"],
                    "selectedAgents": [{"id": "a"}, {"id": "b"}, {"id": "c"}]},
        "config": {"maxDiscussionRounds": 1, "roundTimeout": 30000, "consensusAlgorithm": "simple_average",
                   "enableDiscussion": true, "convergenceThreshold": 1.0, "outlierDetection": false}
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_panel_on_the_step_engine_is_published_and_keeps_each_transaction_id() {
    let node = stand_in().await;
    // The first two transactions meet a busy node: waited out.
    node.answer_busy(2);
    let store = Arc::new(InMemoryRunStore::new());
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(Arc::new(JudgeModel::default()))
        .store(store.clone())
        .queue(queue.clone())
        .transcripts(Arc::new(publisher(&node, OPERATOR_KEY)))
        .build()
        .services;
    let body = panel_body();
    let request = PanelRequest::parse(&body).unwrap();
    let entry = services.runs.panel_entry().unwrap();
    let submitted = services
        .runs
        .submit_evaluation("t", &entry, &request, &body)
        .await
        .unwrap();
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue,
    };
    let status = runner
        .run_until_settled("t", &submitted.run_id)
        .await
        .unwrap();
    assert_eq!(status, RunStatus::Completed);

    let key = RunKey::new("t", &submitted.run_id);
    let state = store.load_run(key).await.unwrap().unwrap().state;
    let (node_id, record) = state
        .nodes
        .iter()
        .find(|(_, record)| record.output.is_some())
        .unwrap();
    let verdict = record.output.clone().unwrap()[entry.verdict_facet.as_str()].clone();
    let transcript: EvaluationTranscript =
        serde_json::from_value(verdict["transcript"].clone()).unwrap();

    // One topic, named for the panel, holding every message in chain order.
    let topics = node.topics();
    assert_eq!(topics.len(), 1, "{topics:?}");
    let (topic_id, memo, published) = &topics[0];
    assert_eq!(
        memo,
        &format!("baton panel {}:{node_id}:1", submitted.run_id)
    );
    assert_eq!(&transcript.topic_id, topic_id);
    assert_eq!(verdict["topicId"], json!(topic_id));
    assert_eq!(
        transcript.explorer_url.as_deref(),
        Some("https://hashscan.io/testnet")
    );
    let messages: Vec<&ConversationMessage> = transcript
        .messages()
        .map(|(_, _, message)| message)
        .collect();
    assert_eq!(published.len(), messages.len());
    assert!(messages.len() >= 5, "opening, three scores, consensus");
    for (message, payload) in messages.iter().zip(published) {
        let payload: Value = serde_json::from_str(payload).unwrap();
        assert_eq!(payload["type"], "jurybox.message");
        assert_eq!(payload["messageId"], json!(message.id));
        assert_eq!(payload["hash"], json!(message.hash));
        assert_eq!(payload["content"], json!(message.content));
        assert_eq!(payload["phase"], json!(message.phase));
        let transaction = message.ledger_tx_id.as_deref().unwrap_or_else(|| {
            panic!("message {} has no hcsTxId", message.id);
        });
        let (payer, start) = transaction.split_once('@').unwrap();
        assert_eq!(payer, OPERATOR);
        let (seconds, nanos) = start.split_once('.').unwrap();
        assert!(seconds.parse::<u64>().unwrap() > 1_700_000_000);
        assert_eq!(nanos.len(), 9);
    }
    let distinct: std::collections::BTreeSet<_> = messages
        .iter()
        .map(|message| &message.ledger_tx_id)
        .collect();
    assert_eq!(
        distinct.len(),
        messages.len(),
        "each message its own transaction"
    );
    assert_eq!(
        transcript.verify(),
        Ok(messages.len()),
        "the receipts leave the hash chain intact"
    );

    // The progress frames: the specification's statuses, in order, the last
    // naming the ledger's topic.
    let frames = store.read_events(key, 0, 1_000).await.unwrap();
    let progress: Vec<(String, String)> = frames
        .iter()
        .filter_map(|frame| frame.payload.as_ref())
        .filter_map(|payload| {
            let status = payload.get("status")?.as_str()?.to_string();
            let topic = payload.get("topicId")?.as_str()?.to_string();
            Some((status, topic))
        })
        .collect();
    let statuses: Vec<&str> = progress.iter().map(|(status, _)| status.as_str()).collect();
    assert_eq!(statuses.first(), Some(&"initializing"), "{statuses:?}");
    assert!(statuses.contains(&"scoring"), "{statuses:?}");
    let converging = statuses
        .iter()
        .position(|status| *status == "converging")
        .unwrap();
    assert_eq!(statuses.last(), Some(&"completed"), "{statuses:?}");
    assert!(converging < statuses.len() - 1);
    assert_eq!(&progress.last().unwrap().1, topic_id);
}

fn publication(content: &str) -> TranscriptPublication {
    let mut transcript = EvaluationTranscript::new("run-1:panel:1");
    transcript.append(
        0,
        ConversationMessage {
            id: "run-1:panel:1:m0".into(),
            role: MessageRole::Agent,
            agent_id: Some("a".into()),
            model: None,
            content: content.to_string(),
            timestamp: 1_730_051_111_111,
            phase: MessagePhase::Scoring,
            round: Some(0),
            ledger_tx_id: None,
            previous_hash: String::new(),
            hash: String::new(),
        },
    );
    TranscriptPublication {
        idempotency_key: "run-1:panel:1".into(),
        node_id: "panel".into(),
        transcript,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_message_goes_in_chunks_and_comes_back_whole() {
    let node = stand_in().await;
    let long = "a judge with much to say. ".repeat(200);
    let receipt = publisher(&node, OPERATOR_KEY)
        .publish("t", "run-1", &publication(&long))
        .await
        .unwrap()
        .unwrap();
    let topics = node.topics();
    let payload: Value = serde_json::from_str(&topics[0].2[0]).unwrap();
    assert_eq!(payload["content"], json!(long));
    assert!(long.len() > 4 * 1024);
    // One transaction for the topic, one per chunk of the message.
    let chunks = payload.to_string().len().div_ceil(1024) as u64;
    assert_eq!(node.transactions_taken(), 1 + chunks);
    assert_eq!(receipt.message_transactions.len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_transaction_signed_with_another_key_is_refused_and_not_retried() {
    let node = stand_in().await;
    let outcome = publisher(&node, OTHER_KEY)
        .publish("t", "run-1", &publication("short"))
        .await;
    match outcome {
        Err(error @ PublishError::Refused(_)) => {
            assert!(!error.is_retryable());
            assert!(error.to_string().contains("status 7"), "{error}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(node.transactions_taken(), 0);
    assert!(node.topics().is_empty());
}

#[test]
fn settings_name_what_is_wrong() {
    let read_with = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| value.to_string())
        }
    };
    assert_eq!(
        HcsSettings::from_variables(&read_with(&[])),
        Ok(None),
        "off unless configured"
    );
    let missing = HcsSettings::from_variables(&read_with(&[(
        "BATON_HCS_NODE_URL",
        "http://127.0.0.1:50211",
    )]))
    .unwrap_err();
    assert_eq!(missing.setting, "BATON_HCS_OPERATOR_ACCOUNT");
    let key_given = HcsSettings::from_variables(&read_with(&[
        ("BATON_HCS_NODE_URL", "http://127.0.0.1:50211"),
        ("BATON_HCS_OPERATOR_ACCOUNT", "0.0.1002"),
        ("BATON_HCS_OPERATOR_KEY", OPERATOR_KEY),
    ]))
    .unwrap_err();
    assert_eq!(key_given.setting, "BATON_HCS_OPERATOR_KEY");
    assert!(key_given.reason.contains("reference"), "{key_given}");
    let bad_account = HcsSettings::from_variables(&read_with(&[
        ("BATON_HCS_NODE_URL", "http://127.0.0.1:50211"),
        ("BATON_HCS_OPERATOR_ACCOUNT", "alice"),
    ]))
    .unwrap_err();
    assert!(
        bad_account.reason.contains("shard.realm.number"),
        "{bad_account}"
    );
}
