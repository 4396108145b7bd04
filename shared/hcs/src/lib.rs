//! Judge-panel transcripts on the Hedera Consensus Service (HCS): the
//! ledger the judges' specification names, plugged in as a
//! `TranscriptPublisher`. Off unless `BATON_HCS_NODE_URL` is set; the run's
//! hash-chained event log stays the default and is always written.
//!
//! When a panel concludes, before the step commits: a topic is created
//! for it (memo `baton panel {runId}:{nodeId}:{attempt}`), every message of
//! the transcript is submitted in chain order as a `jurybox.message` JSON
//! payload (longer ones in chunks of 1,024 bytes), every receipt is
//! awaited, and the topic and each message's transaction id (`hcsTxId`,
//! `0.0.payer@seconds.nanos`) go back to be written into the transcript
//! the step commits, with the explorer's URL for the viewer's links.
//!
//! Built on the service's protobuf API with tonic, its few messages
//! written by hand (`messages`): the service's Rust SDK (`hedera` on
//! crates.io) links OpenSSL, runs `protoc` at build time and brings a
//! second prost and tonic, which the Lambda functions' size budget and
//! cross-compilation cannot take.
//!
//! Invariants:
//! - A transcript is published whole or the step does not commit: any
//!   failure is a `PublishError` (unavailable: the step is retried;
//!   refused: a setting is wrong), never a receipt with holes.
//! - The operator's key is read by reference from the secret store, on
//!   first use; it is never logged (`Operator`'s `Debug` hides it).
//! - Two transactions sent by one process never share an id.
//! - At least once: a retried step creates a new topic; the one a failed
//!   attempt left behind keeps what it got.
//!
//! `stand_in` (feature `stand-in`) is a test double of a consensus node.

pub mod messages;
pub mod node_client;
pub mod operator;
pub mod publisher;
pub mod settings;
#[cfg(feature = "stand-in")]
pub mod stand_in;

pub use publisher::HcsTranscripts;
pub use settings::HcsSettings;
