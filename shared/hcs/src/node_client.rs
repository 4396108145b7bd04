//! One consensus node over gRPC: transactions built, signed and sent
//! (`createTopic`, `submitMessage`), their precheck read, their receipts
//! awaited (`getTransactionReceipts`).

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prost::Message;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;

use crate::messages::{
    AccountId, ConsensusCreateTopicTransactionBody, ConsensusMessageChunkInfo,
    ConsensusSubmitMessageTransactionBody, Query, QueryHeader, Response, SignedTransaction,
    Timestamp, TopicId, Transaction, TransactionBody, TransactionData, TransactionGetReceiptQuery,
    TransactionId, TransactionReceipt, TransactionResponse, codes, paths,
};
use crate::operator::{Operator, transaction_text};

/// The most one message chunk carries (the service's limit per message).
pub const CHUNK_BYTES: usize = 1024;
/// The most chunks one message may have (the service's limit).
pub const MAX_CHUNKS: usize = 20;
/// How long a transaction is valid after its start.
const VALID_FOR_SECONDS: i64 = 120;
/// Transactions start a little in the past, so a node whose clock is
/// behind this one's does not refuse them as not yet valid.
const START_BACKDATE_SECONDS: i64 = 5;

/// Why a call to the node did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeError {
    /// The node could not be reached, was busy, or no receipt came in time:
    /// the same call may succeed later.
    #[error("the consensus node is unavailable: {0}")]
    Unavailable(String),
    /// The node refused the transaction (its status named): sending it
    /// again changes nothing until the configuration does.
    #[error("the consensus node refused {what}: status {status}")]
    Refused { what: String, status: i32 },
    /// The message does not fit in the chunks the service allows.
    #[error("the consensus service takes no {0}")]
    TooLarge(String),
}

/// A node and the operator paying for what is sent to it.
pub struct ConsensusNode {
    channel: Channel,
    node_account: AccountId,
    operator: Operator,
    /// The longest wait for one receipt.
    receipt_timeout: Duration,
    /// The last transaction start used, so two never share an id.
    last_start: Mutex<(i64, i32)>,
}

fn unix_now() -> (i64, i32) {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (since.as_secs() as i64, since.subsec_nanos() as i32)
}

impl ConsensusNode {
    /// A node at `endpoint` (`http://host:port`; connected on first use)
    /// whose account is `node_account`.
    pub fn new(
        endpoint: &str,
        node_account: AccountId,
        operator: Operator,
        receipt_timeout: Duration,
    ) -> Result<Self, crate::operator::SettingRefused> {
        let channel = Channel::from_shared(endpoint.to_string())
            .map_err(|error| {
                crate::operator::SettingRefused::new(
                    crate::settings::NODE_URL,
                    format!("`{endpoint}` is not a URL: {error}"),
                )
            })?
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(10))
            .connect_lazy();
        Ok(ConsensusNode {
            channel,
            node_account,
            operator,
            receipt_timeout,
            last_start: Mutex::new((0, 0)),
        })
    }

    /// A start a few seconds back, later than every start used before.
    fn next_start(&self) -> Timestamp {
        let (mut seconds, mut nanos) = unix_now();
        seconds -= START_BACKDATE_SECONDS;
        let mut last = self
            .last_start
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if (seconds, nanos) <= *last {
            (seconds, nanos) = if last.1 >= 999_999_999 {
                (last.0 + 1, 0)
            } else {
                (last.0, last.1 + 1)
            };
        }
        *last = (seconds, nanos);
        Timestamp { seconds, nanos }
    }

    fn body(&self, id: TransactionId, fee: u64, data: TransactionData) -> TransactionBody {
        TransactionBody {
            transaction_id: Some(id),
            node_account_id: Some(self.node_account),
            transaction_fee: fee,
            transaction_valid_duration: Some(crate::messages::Duration {
                seconds: VALID_FOR_SECONDS,
            }),
            memo: String::new(),
            data: Some(data),
        }
    }

    async fn unary<Request, Answer>(
        &self,
        path: &'static str,
        request: Request,
    ) -> Result<Answer, NodeError>
    where
        Request: Message + Send + Sync + 'static,
        Answer: Message + Default + Send + Sync + 'static,
    {
        let mut grpc = tonic::client::Grpc::new(self.channel.clone());
        grpc.ready()
            .await
            .map_err(|error| NodeError::Unavailable(format!("cannot connect: {error}")))?;
        let codec = tonic_prost::ProstCodec::<Request, Answer>::default();
        grpc.unary(
            tonic::Request::new(request),
            PathAndQuery::from_static(path),
            codec,
        )
        .await
        .map(tonic::Response::into_inner)
        .map_err(|status| NodeError::Unavailable(format!("{path}: {status}")))
    }

    /// Signs and sends `body`; retries a busy node a few times.
    async fn send(
        &self,
        path: &'static str,
        what: &str,
        body: &TransactionBody,
    ) -> Result<(), NodeError> {
        let body_bytes = body.encode_to_vec();
        let signed = SignedTransaction {
            sig_map: Some(self.operator.sign(&body_bytes)),
            body_bytes,
        };
        let transaction = Transaction {
            signed_transaction_bytes: signed.encode_to_vec(),
        };
        let mut pause = Duration::from_millis(250);
        for _ in 0..4 {
            let answer: TransactionResponse = self.unary(path, transaction.clone()).await?;
            match answer.node_transaction_precheck_code {
                codes::OK => return Ok(()),
                codes::BUSY => {
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                }
                status => {
                    return Err(NodeError::Refused {
                        what: what.to_string(),
                        status,
                    });
                }
            }
        }
        Err(NodeError::Unavailable(format!(
            "the node stayed busy for {what}"
        )))
    }

    /// Waits for `id`'s receipt; a receipt whose status is not `SUCCESS`
    /// is a refusal.
    pub async fn receipt(
        &self,
        id: TransactionId,
        what: &str,
    ) -> Result<TransactionReceipt, NodeError> {
        let query = Query {
            transaction_get_receipt: Some(TransactionGetReceiptQuery {
                header: Some(QueryHeader { response_type: 0 }),
                transaction_id: Some(id),
            }),
        };
        let deadline = tokio::time::Instant::now() + self.receipt_timeout;
        let mut pause = Duration::from_millis(100);
        loop {
            let answer: Response = self.unary(paths::GET_TRANSACTION_RECEIPTS, query).await?;
            let answer = answer.transaction_get_receipt.unwrap_or_default();
            let precheck = answer
                .header
                .map(|header| header.node_transaction_precheck_code)
                .unwrap_or(codes::OK);
            let status = answer.receipt.as_ref().map(|receipt| receipt.status);
            match (precheck, status) {
                (codes::OK, Some(codes::SUCCESS)) => {
                    return Ok(answer.receipt.unwrap_or_default());
                }
                (codes::OK, Some(codes::UNKNOWN) | None)
                | (codes::BUSY | codes::RECEIPT_NOT_FOUND, _) => {}
                (codes::OK, Some(status)) | (status, _) => {
                    return Err(NodeError::Refused {
                        what: what.to_string(),
                        status,
                    });
                }
            }
            if tokio::time::Instant::now() + pause > deadline {
                return Err(NodeError::Unavailable(format!(
                    "no receipt for {what} ({}) within {} ms",
                    transaction_text(&id),
                    self.receipt_timeout.as_millis()
                )));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(1));
        }
    }

    /// Creates a topic whose memo is `memo`; its id once the network
    /// agreed.
    pub async fn create_topic(&self, memo: &str, fee: u64) -> Result<TopicId, NodeError> {
        let id = self.operator.transaction_id(self.next_start());
        let body = self.body(
            id,
            fee,
            TransactionData::ConsensusCreateTopic(ConsensusCreateTopicTransactionBody {
                memo: memo.to_string(),
                auto_renew_period: Some(crate::messages::Duration {
                    // The service's default: 90 days.
                    seconds: 7_776_000,
                }),
                auto_renew_account: Some(self.operator.account),
                ..Default::default()
            }),
        );
        self.send(paths::CREATE_TOPIC, "the topic's creation", &body)
            .await?;
        let receipt = self.receipt(id, "the topic's creation").await?;
        receipt
            .topic_id
            .ok_or_else(|| NodeError::Unavailable("the topic's receipt names no topic".to_string()))
    }

    /// Submits `message` to `topic`, in chunks when it is longer than
    /// one; the id of its (first) transaction, once the node took every
    /// chunk. Its receipt is awaited separately ([`Self::receipt`]).
    pub async fn submit_message(
        &self,
        topic: TopicId,
        message: &[u8],
        fee: u64,
    ) -> Result<Vec<TransactionId>, NodeError> {
        let chunks: Vec<&[u8]> = message.chunks(CHUNK_BYTES).collect();
        if chunks.len() > MAX_CHUNKS {
            return Err(NodeError::TooLarge(format!(
                "a message of {} bytes (the most is {MAX_CHUNKS} chunks of {CHUNK_BYTES})",
                message.len()
            )));
        }
        let total = chunks.len() as i32;
        let mut sent = Vec::with_capacity(chunks.len());
        let mut first: Option<TransactionId> = None;
        for (index, chunk) in chunks.into_iter().enumerate() {
            let id = self.operator.transaction_id(self.next_start());
            let initial = *first.get_or_insert(id);
            let chunk_info = (total > 1).then_some(ConsensusMessageChunkInfo {
                initial_transaction_id: Some(initial),
                total,
                number: index as i32 + 1,
            });
            let body = self.body(
                id,
                fee,
                TransactionData::ConsensusSubmitMessage(ConsensusSubmitMessageTransactionBody {
                    topic_id: Some(topic),
                    message: chunk.to_vec(),
                    chunk_info,
                }),
            );
            self.send(paths::SUBMIT_MESSAGE, "a message", &body).await?;
            sent.push(id);
        }
        Ok(sent)
    }
}
