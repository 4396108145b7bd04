//! The messages of the consensus service's protobuf API this crate sends
//! and reads, written by hand with `prost` derives: field numbers and types
//! are the service's (package `proto`), fields this crate never sets are
//! left out (protobuf readers skip what they do not know, so a node's
//! fuller answers still decode).

/// `proto.Timestamp`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, prost::Message)]
pub struct Timestamp {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

/// `proto.Duration`.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Duration {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
}

/// `proto.AccountID` (the numbered form; aliases are not used here).
#[derive(Clone, Copy, PartialEq, Eq, Hash, prost::Message)]
pub struct AccountId {
    #[prost(int64, tag = "1")]
    pub shard_num: i64,
    #[prost(int64, tag = "2")]
    pub realm_num: i64,
    #[prost(int64, tag = "3")]
    pub account_num: i64,
}

/// `proto.TopicID`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, prost::Message)]
pub struct TopicId {
    #[prost(int64, tag = "1")]
    pub shard_num: i64,
    #[prost(int64, tag = "2")]
    pub realm_num: i64,
    #[prost(int64, tag = "3")]
    pub topic_num: i64,
}

/// `proto.TransactionID`: the payer and the moment its validity starts.
#[derive(Clone, Copy, PartialEq, Eq, Hash, prost::Message)]
pub struct TransactionId {
    #[prost(message, optional, tag = "1")]
    pub transaction_valid_start: Option<Timestamp>,
    #[prost(message, optional, tag = "2")]
    pub account_id: Option<AccountId>,
}

/// `proto.Key`, the Ed25519 form only.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Key {
    #[prost(bytes = "vec", tag = "2")]
    pub ed25519: Vec<u8>,
}

/// `proto.SignaturePair`: the signer's whole public key as the prefix, and
/// its Ed25519 signature of the body's bytes.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct SignaturePair {
    #[prost(bytes = "vec", tag = "1")]
    pub pub_key_prefix: Vec<u8>,
    #[prost(bytes = "vec", tag = "3")]
    pub ed25519: Vec<u8>,
}

/// `proto.SignatureMap`.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct SignatureMap {
    #[prost(message, repeated, tag = "1")]
    pub sig_pair: Vec<SignaturePair>,
}

/// `proto.SignedTransaction`: the body's bytes, exactly as signed.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct SignedTransaction {
    #[prost(bytes = "vec", tag = "1")]
    pub body_bytes: Vec<u8>,
    #[prost(message, optional, tag = "2")]
    pub sig_map: Option<SignatureMap>,
}

/// `proto.Transaction` in its current form: only the signed bytes.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Transaction {
    #[prost(bytes = "vec", tag = "5")]
    pub signed_transaction_bytes: Vec<u8>,
}

/// `proto.ConsensusCreateTopicTransactionBody`.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct ConsensusCreateTopicTransactionBody {
    #[prost(string, tag = "1")]
    pub memo: String,
    #[prost(message, optional, tag = "2")]
    pub admin_key: Option<Key>,
    #[prost(message, optional, tag = "3")]
    pub submit_key: Option<Key>,
    #[prost(message, optional, tag = "6")]
    pub auto_renew_period: Option<Duration>,
    #[prost(message, optional, tag = "7")]
    pub auto_renew_account: Option<AccountId>,
}

/// `proto.ConsensusMessageChunkInfo`: which part of a longer message a
/// transaction carries.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct ConsensusMessageChunkInfo {
    #[prost(message, optional, tag = "1")]
    pub initial_transaction_id: Option<TransactionId>,
    #[prost(int32, tag = "2")]
    pub total: i32,
    #[prost(int32, tag = "3")]
    pub number: i32,
}

/// `proto.ConsensusSubmitMessageTransactionBody`.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct ConsensusSubmitMessageTransactionBody {
    #[prost(message, optional, tag = "1")]
    pub topic_id: Option<TopicId>,
    #[prost(bytes = "vec", tag = "2")]
    pub message: Vec<u8>,
    #[prost(message, optional, tag = "3")]
    pub chunk_info: Option<ConsensusMessageChunkInfo>,
}

/// `proto.TransactionBody`, with the two kinds of transaction sent here.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TransactionBody {
    #[prost(message, optional, tag = "1")]
    pub transaction_id: Option<TransactionId>,
    #[prost(message, optional, tag = "2")]
    pub node_account_id: Option<AccountId>,
    /// The most the payer pays, in tinybars.
    #[prost(uint64, tag = "3")]
    pub transaction_fee: u64,
    #[prost(message, optional, tag = "4")]
    pub transaction_valid_duration: Option<Duration>,
    #[prost(string, tag = "6")]
    pub memo: String,
    #[prost(oneof = "TransactionData", tags = "24, 27")]
    pub data: Option<TransactionData>,
}

/// `TransactionBody.data`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum TransactionData {
    #[prost(message, tag = "24")]
    ConsensusCreateTopic(ConsensusCreateTopicTransactionBody),
    #[prost(message, tag = "27")]
    ConsensusSubmitMessage(ConsensusSubmitMessageTransactionBody),
}

/// `proto.TransactionResponse`: the node's precheck of a transaction.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct TransactionResponse {
    #[prost(int32, tag = "1")]
    pub node_transaction_precheck_code: i32,
    #[prost(uint64, tag = "2")]
    pub cost: u64,
}

/// `proto.QueryHeader` (a receipt query is free: no payment).
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct QueryHeader {
    /// `ResponseType`: 0 answers the query.
    #[prost(int32, tag = "2")]
    pub response_type: i32,
}

/// `proto.TransactionGetReceiptQuery`.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct TransactionGetReceiptQuery {
    #[prost(message, optional, tag = "1")]
    pub header: Option<QueryHeader>,
    #[prost(message, optional, tag = "2")]
    pub transaction_id: Option<TransactionId>,
}

/// `proto.Query`, the receipt query only.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Query {
    #[prost(message, optional, tag = "14")]
    pub transaction_get_receipt: Option<TransactionGetReceiptQuery>,
}

/// `proto.ResponseHeader`.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct ResponseHeader {
    #[prost(int32, tag = "1")]
    pub node_transaction_precheck_code: i32,
    #[prost(int32, tag = "2")]
    pub response_type: i32,
    #[prost(uint64, tag = "3")]
    pub cost: u64,
}

/// `proto.TransactionReceipt`: its status, and for a topic's transactions
/// the topic created or the message's sequence number.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct TransactionReceipt {
    #[prost(int32, tag = "1")]
    pub status: i32,
    #[prost(message, optional, tag = "6")]
    pub topic_id: Option<TopicId>,
    #[prost(uint64, tag = "7")]
    pub topic_sequence_number: u64,
    #[prost(bytes = "vec", tag = "8")]
    pub topic_running_hash: Vec<u8>,
}

/// `proto.TransactionGetReceiptResponse`.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct TransactionGetReceiptResponse {
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    #[prost(message, optional, tag = "2")]
    pub receipt: Option<TransactionReceipt>,
}

/// `proto.Response`, the receipt answer only.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Response {
    #[prost(message, optional, tag = "14")]
    pub transaction_get_receipt: Option<TransactionGetReceiptResponse>,
}

/// The `ResponseCodeEnum` values this crate reads.
pub mod codes {
    pub const OK: i32 = 0;
    pub const INVALID_NODE_ACCOUNT: i32 = 3;
    pub const INVALID_SIGNATURE: i32 = 7;
    pub const DUPLICATE_TRANSACTION: i32 = 11;
    pub const BUSY: i32 = 12;
    pub const RECEIPT_NOT_FOUND: i32 = 18;
    pub const UNKNOWN: i32 = 21;
    pub const SUCCESS: i32 = 22;
    pub const INVALID_TOPIC_ID: i32 = 150;
}

/// The gRPC paths of the three calls.
pub mod paths {
    pub const CREATE_TOPIC: &str = "/proto.ConsensusService/createTopic";
    pub const SUBMIT_MESSAGE: &str = "/proto.ConsensusService/submitMessage";
    pub const GET_TRANSACTION_RECEIPTS: &str = "/proto.CryptoService/getTransactionReceipts";
}
