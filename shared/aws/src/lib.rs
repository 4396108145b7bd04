//! `baton-aws`: the cloud adapters of Baton's ports.
//!
//! - [`dynamodb::DynamoRunStore`] implements `RunStore` on one DynamoDB table
//!   (single-table design, key schema below).
//! - The same store implements `CapabilityDirectory` (registrations agents
//!   post, per tenant; see [`dynamodb::capability_directory`]) and `ThreadStore`
//!   (chat threads, one item per exchange; see `threads`).
//! - [`sqs::SqsStepQueue`] implements `StepQueue` on a standard SQS queue
//!   (its dead-letter queue is configured on the queue, see `infra/`).
//! - Feature `event-bus`: `events::EventBridgeBus` announces runs on an
//!   EventBridge bus.
//! - Feature `bedrock`: `bedrock::BedrockProvider` implements `LlmProvider`
//!   on Amazon Bedrock's `ConverseStream`.
//!
//! Key schema (`pk`, `sk`, both strings; on-demand capacity; TTL on `expiresAt`):
//!
//! | item | pk | sk | attributes |
//! | --- | --- | --- | --- |
//! | run | `T#{tenant}#R#{run}` | `RUN` | `state` (JSON, deflated, binary; see [`dynamodb::state_codec`]), `version`, `status`, `correlationId` |
//! | event sequence | `T#{tenant}#R#{run}` | `SEQ` | `nextSeq` (the last sequence number used), `correlationId` |
//! | event | `T#{tenant}#R#{run}` | `EV#{seq:020}` | `frame` (JSON), `expiresAt` |
//! | lease | `T#{tenant}#R#{run}` | `LEASE#{node}#{attempt:06}` | `claimant`, `leaseExpiresAt`, `expiresAt` |
//! | outbox | `T#{tenant}#R#{run}` | `OUT#{messageId}` | `message` (JSON), `sent` (re-sent once), `expiresAt`, until re-sent `gsi1pk`/`gsi1sk`; deleted by the claim or commit of the step that handles it |
//! | run entry | `T#{tenant}#R#{run}` | `ENTRY#{key}` | `body` (the entry as JSON, deflated, binary), `expiresAt`: a conversation turn or a judge's call (`baton_core::entries`), put by the commit that carries it |
//! | idempotency | `T#{tenant}#IDEM#{key}` | `IDEM` | `runId` |
//! | capability registration | `T#{tenant}#CAPS` | `CAP#{capabilityId}` | `registration` (JSON), `registeredAt`, `lastSeenAt` |
//! | chat exchange | `T#{tenant}#THREAD#{thread}` | `X#{runId}` | `exchange` (JSON), `atMillis`, `expiresAt` |
//! | thread lane | `T#{tenant}#THREAD#{thread}` | `LANE` | `lane` (JSON), `version`, `expiresAt` |
//! | thread summary | `T#{tenant}#THREAD#{thread}` | `SUMMARY` | `threadId`, first and last message and time, `gsi1pk`/`gsi1sk`, `expiresAt` |
//!
//! Index `gsi1` is sparse and overloaded: outbox entries neither consumed nor re-sent carry
//! `gsi1pk` = `OUTBOX#PENDING#{shard}`, `gsi1sk` = `{writtenMillis:020}#{messageId}` (the
//! sweeper reads exactly those); a run item waiting for a person carries `gsi1pk` =
//! `T#{tenant}#AWAITING_HUMAN`, `gsi1sk` = `{createdAt}#{runId}` (the tenant's task list); a
//! thread summary carries `gsi1pk` = `T#{tenant}#THREADS`, `gsi1sk` =
//! `{lastAtMillis:013}.{threadId}` (the tenant's threads list).
//!
//! Every key starts with the tenant, so one tenant can never address another's items.
//!
//! Every adapter is made from an [`AwsConnection`] (the environment's, or an
//! emulator's); SDK clients are built inside this crate.
//!
//! Invariants: a commit is one `TransactWriteItems` conditional on the run's
//! `version` and `nextSeq`, so events get contiguous sequence numbers and a
//! losing writer appends nothing; only a commit writes the run item (an
//! append bumps the small sequence item); the `nextSeq` a load saw is remembered and
//! used as the condition of the next write (a hint: a stale one costs one
//! projected re-read, never a wrong sequence); SDK types never leave this crate.

#[cfg(feature = "bedrock")]
pub mod bedrock;
mod connection;
pub mod dynamodb;
#[cfg(feature = "event-bus")]
pub mod events;
pub mod sqs;

#[cfg(feature = "testing")]
pub use connection::from_clients;
pub use connection::{AwsConnection, EMULATOR_REGION};
pub use dynamodb::DynamoRunStore;
pub use sqs::SqsStepQueue;
