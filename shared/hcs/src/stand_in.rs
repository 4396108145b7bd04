//! A stand-in consensus node: a test double of the service's gRPC API
//! (`createTopic`, `submitMessage`, `getTransactionReceipts`), served by
//! tonic on a local port. It checks what a node checks before it takes a
//! transaction (the body decodes, the node account is its own, the payer is
//! a known operator whose Ed25519 signature verifies, the id is new),
//! reaches "consensus" at once, keeps every topic's messages (chunks
//! reassembled) and answers receipts. Not a network: one node, no fees.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use aws_lc_rs::signature::{ED25519, UnparsedPublicKey};
use prost::Message;
use tonic::codegen::{BoxFuture, Service, http};

use crate::messages::{
    AccountId, Query, Response, ResponseHeader, SignedTransaction, TopicId, Transaction,
    TransactionBody, TransactionData, TransactionGetReceiptResponse, TransactionId,
    TransactionReceipt, TransactionResponse, codes, paths,
};

/// One topic as the stand-in keeps it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StandInTopic {
    pub memo: String,
    /// Whole messages, in the order they reached consensus.
    pub messages: Vec<Vec<u8>>,
    /// Chunks of messages still incomplete, by their first transaction.
    chunks: HashMap<TransactionId, BTreeMap<i32, Vec<u8>>>,
}

/// The stand-in's state.
#[derive(Debug, Default)]
pub struct StandInLedger {
    node_account: AccountId,
    operators: HashMap<AccountId, Vec<u8>>,
    next_topic: i64,
    topics: BTreeMap<i64, StandInTopic>,
    receipts: HashMap<TransactionId, TransactionReceipt>,
    /// Transactions answered `BUSY` before one is taken (fault injection).
    busy_answers_left: u32,
    /// Every transaction taken, in order (`createTopic`/`submitMessage`).
    pub transactions_taken: u64,
}

fn refused(code: i32) -> TransactionResponse {
    TransactionResponse {
        node_transaction_precheck_code: code,
        cost: 0,
    }
}

impl StandInLedger {
    fn signature_holds(&self, signed: &SignedTransaction, payer: &AccountId) -> bool {
        let Some(public_key) = self.operators.get(payer) else {
            return false;
        };
        signed
            .sig_map
            .iter()
            .flat_map(|map| map.sig_pair.iter())
            .filter(|pair| public_key.starts_with(&pair.pub_key_prefix))
            .any(|pair| {
                UnparsedPublicKey::new(&ED25519, public_key)
                    .verify(&signed.body_bytes, &pair.ed25519)
                    .is_ok()
            })
    }

    /// A node's precheck, then consensus at once.
    fn take(&mut self, transaction: Transaction) -> TransactionResponse {
        let Ok(signed) = SignedTransaction::decode(transaction.signed_transaction_bytes.as_slice())
        else {
            return refused(1);
        };
        let Ok(body) = TransactionBody::decode(signed.body_bytes.as_slice()) else {
            return refused(1);
        };
        if body.node_account_id != Some(self.node_account) {
            return refused(codes::INVALID_NODE_ACCOUNT);
        }
        let Some(id) = body.transaction_id else {
            return refused(1);
        };
        let Some(payer) = id.account_id else {
            return refused(1);
        };
        if !self.operators.contains_key(&payer) {
            // PAYER_ACCOUNT_NOT_FOUND
            return refused(2);
        }
        if !self.signature_holds(&signed, &payer) {
            return refused(codes::INVALID_SIGNATURE);
        }
        if self.receipts.contains_key(&id) {
            return refused(codes::DUPLICATE_TRANSACTION);
        }
        if self.busy_answers_left > 0 {
            self.busy_answers_left -= 1;
            return refused(codes::BUSY);
        }
        let receipt = match body.data {
            Some(TransactionData::ConsensusCreateTopic(create)) => {
                self.next_topic += 1;
                self.topics.insert(
                    self.next_topic,
                    StandInTopic {
                        memo: create.memo,
                        ..StandInTopic::default()
                    },
                );
                TransactionReceipt {
                    status: codes::SUCCESS,
                    topic_id: Some(TopicId {
                        shard_num: 0,
                        realm_num: 0,
                        topic_num: self.next_topic,
                    }),
                    ..TransactionReceipt::default()
                }
            }
            Some(TransactionData::ConsensusSubmitMessage(submit)) => {
                let topic = submit.topic_id.map(|topic| topic.topic_num);
                match topic.and_then(|number| self.topics.get_mut(&number)) {
                    None => TransactionReceipt {
                        status: codes::INVALID_TOPIC_ID,
                        ..TransactionReceipt::default()
                    },
                    Some(topic) => {
                        match submit.chunk_info {
                            None => topic.messages.push(submit.message),
                            Some(info) => {
                                let first = info.initial_transaction_id.unwrap_or(id);
                                let parts = topic.chunks.entry(first).or_default();
                                parts.insert(info.number, submit.message);
                                if parts.len() as i32 == info.total {
                                    let whole = parts.values().flatten().copied().collect();
                                    topic.chunks.remove(&first);
                                    topic.messages.push(whole);
                                }
                            }
                        }
                        TransactionReceipt {
                            status: codes::SUCCESS,
                            topic_sequence_number: topic.messages.len() as u64,
                            ..TransactionReceipt::default()
                        }
                    }
                }
            }
            None => return refused(1),
        };
        self.receipts.insert(id, receipt);
        self.transactions_taken += 1;
        refused(codes::OK)
    }

    fn receipt(&self, query: Query) -> Response {
        let id = query
            .transaction_get_receipt
            .and_then(|receipt_query| receipt_query.transaction_id);
        let receipt = id.and_then(|id| self.receipts.get(&id).cloned());
        let precheck = if receipt.is_some() {
            codes::OK
        } else {
            codes::RECEIPT_NOT_FOUND
        };
        Response {
            transaction_get_receipt: Some(TransactionGetReceiptResponse {
                header: Some(ResponseHeader {
                    node_transaction_precheck_code: precheck,
                    ..ResponseHeader::default()
                }),
                receipt,
            }),
        }
    }
}

type SharedLedger = Arc<Mutex<StandInLedger>>;

fn lock(ledger: &SharedLedger) -> std::sync::MutexGuard<'_, StandInLedger> {
    ledger
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One unary method over the ledger.
struct Method<Request, Answer> {
    ledger: SharedLedger,
    handle: fn(&mut StandInLedger, Request) -> Answer,
}

impl<Request, Answer> tonic::server::UnaryService<Request> for Method<Request, Answer>
where
    Request: Send + 'static,
    Answer: Send + 'static,
{
    type Response = Answer;
    type Future = BoxFuture<tonic::Response<Answer>, tonic::Status>;

    fn call(&mut self, request: tonic::Request<Request>) -> Self::Future {
        let answer = (self.handle)(&mut lock(&self.ledger), request.into_inner());
        Box::pin(async move { Ok(tonic::Response::new(answer)) })
    }
}

async fn serve_unary<Request, Answer, Body>(
    ledger: SharedLedger,
    handle: fn(&mut StandInLedger, Request) -> Answer,
    request: http::Request<Body>,
) -> http::Response<tonic::body::Body>
where
    Request: Message + Default + Send + 'static,
    Answer: Message + Send + 'static,
    Body: tonic::codegen::Body + Send + 'static,
    Body::Error: Into<tonic::codegen::StdError> + Send + 'static,
{
    let codec = tonic_prost::ProstCodec::<Answer, Request>::default();
    tonic::server::Grpc::new(codec)
        .unary(Method { ledger, handle }, request)
        .await
}

fn dispatch<Body>(
    ledger: &SharedLedger,
    request: http::Request<Body>,
) -> BoxFuture<http::Response<tonic::body::Body>, Infallible>
where
    Body: tonic::codegen::Body + Send + 'static,
    Body::Error: Into<tonic::codegen::StdError> + Send + 'static,
{
    let ledger = ledger.clone();
    match request.uri().path() {
        paths::CREATE_TOPIC | paths::SUBMIT_MESSAGE => {
            Box::pin(async move { Ok(serve_unary(ledger, StandInLedger::take, request).await) })
        }
        paths::GET_TRANSACTION_RECEIPTS => Box::pin(async move {
            Ok(serve_unary(ledger, |ledger, query| ledger.receipt(query), request).await)
        }),
        _ => Box::pin(async move { Ok(tonic::Status::unimplemented("").into_http()) }),
    }
}

macro_rules! named_service {
    ($name:ident, $grpc_name:literal) => {
        #[derive(Clone)]
        struct $name(SharedLedger);

        impl tonic::server::NamedService for $name {
            const NAME: &'static str = $grpc_name;
        }

        impl<Body> Service<http::Request<Body>> for $name
        where
            Body: tonic::codegen::Body + Send + 'static,
            Body::Error: Into<tonic::codegen::StdError> + Send + 'static,
        {
            type Response = http::Response<tonic::body::Body>;
            type Error = Infallible;
            type Future = BoxFuture<Self::Response, Self::Error>;

            fn poll_ready(&mut self, _context: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
                Poll::Ready(Ok(()))
            }

            fn call(&mut self, request: http::Request<Body>) -> Self::Future {
                dispatch(&self.0, request)
            }
        }
    };
}

named_service!(ConsensusService, "proto.ConsensusService");
named_service!(CryptoService, "proto.CryptoService");

/// A running stand-in node; stops when dropped.
pub struct StandInNode {
    /// `http://127.0.0.1:{port}`.
    pub url: String,
    ledger: SharedLedger,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl StandInNode {
    /// Serves a node whose account is `node_account` on a free local port,
    /// taking transactions paid by `operator` (signed by its key).
    pub async fn start(
        node_account: AccountId,
        operator: AccountId,
        operator_public_key: Vec<u8>,
    ) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let ledger = Arc::new(Mutex::new(StandInLedger {
            node_account,
            operators: HashMap::from([(operator, operator_public_key)]),
            next_topic: 1000,
            ..StandInLedger::default()
        }));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tonic::transport::Server::builder()
            .add_service(ConsensusService(ledger.clone()))
            .add_service(CryptoService(ledger.clone()))
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::TcpListenerStream::new(listener),
                async {
                    let _ = stopped.await;
                },
            );
        tokio::spawn(async move {
            if let Err(error) = server.await {
                tracing::warn!(%error, "the stand-in consensus node stopped");
            }
        });
        Ok(StandInNode {
            url,
            ledger,
            _stop: stop,
        })
    }

    /// Every topic: its id (`0.0.N`), memo and whole messages as text.
    pub fn topics(&self) -> Vec<(String, String, Vec<String>)> {
        lock(&self.ledger)
            .topics
            .iter()
            .map(|(number, topic)| {
                (
                    format!("0.0.{number}"),
                    topic.memo.clone(),
                    topic
                        .messages
                        .iter()
                        .map(|message| String::from_utf8_lossy(message).into_owned())
                        .collect(),
                )
            })
            .collect()
    }

    /// Answers the next `count` transactions `BUSY`.
    pub fn answer_busy(&self, count: u32) {
        lock(&self.ledger).busy_answers_left = count;
    }

    pub fn transactions_taken(&self) -> u64 {
        lock(&self.ledger).transactions_taken
    }
}
