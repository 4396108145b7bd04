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
//! - The same store implements `ScheduleBook` (schedules by tenant, and the
//!   due marks `baton serve` ticks through; see `dynamodb::schedule_items`).
//! - Feature `scheduler`: `scheduler::EventBridgeScheduleTriggers` fires
//!   schedules from EventBridge Scheduler into the ingest queue.
//! - Feature `bedrock`: `bedrock::BedrockProvider` implements `LlmProvider`
//!   on Amazon Bedrock's `ConverseStream`.
//! - Feature `secrets`: `secrets::AwsSecrets` implements `SecretStore` on
//!   SSM Parameter Store and Secrets Manager (credentials by reference).
//!
//! Key schema (`pk`, `sk`, both strings; on-demand capacity; TTL on `expiresAt`), every shape
//! built by one function of `dynamodb/keys.rs` and nowhere else:
//!
//! | item | pk | sk | attributes |
//! | --- | --- | --- | --- |
//! | run | `T#{tenant}#R#{run}` | `RUN` | `state` (JSON, deflated, binary; see [`dynamodb::state_codec`]), `version`, `status`, `correlationId` |
//! | event sequence | `T#{tenant}#R#{run}` | `SEQ` | `nextSeq` (the last sequence number used), `correlationId`, `idempotencyKey` (the run's, for retention) |
//! | event | `T#{tenant}#R#{run}` | `EV#{seq:020}` | `frame` (JSON) |
//! | lease | `T#{tenant}#R#{run}` | `LEASE#{node}#{attempt:06}` | `claimant`, `leaseExpiresAt`, `expiresAt` (its own TTL: an hour past the lease) |
//! | outbox | `T#{tenant}#R#{run}` | `OUT#{messageId}` | `message` (JSON), `sent` (re-sent at least once), `resends`, `gsi1pk`/`gsi1sk` (the sweeper's view) until consumed; deleted by the commit of the step that handles it |
//! | run entry | `T#{tenant}#R#{run}` | `ENTRY#{key}` | `body` (the entry as JSON, deflated, binary): a conversation turn or a judge's call (`baton_core::records::entries`), put by the commit that carries it |
//! | listing | `T#{tenant}#RUNS` and `T#{tenant}#RUNS#{status}` | `{createdAt ms:013}.{runId}` | `listing` (JSON): the runs list, and the list of one status (moved by the commit that changes the status) |
//! | live-run counter | `T#{tenant}#COUNTERS` | `LIVE_RUNS` | `liveRuns`: runs at work, moved by `ADD` in the commits that start and stop work |
//! | idempotency | `T#{tenant}#IDEM#{key}` | `IDEM` | `runId` |
//! | stream lease | `T#{tenant}#STREAMS` | `{runId}#{streamId}` | `leaseUntil` (ms): an open event stream |
//! | stream counters | `T#{tenant}#STREAMS` | `#OPEN` and `#OPEN#{runId}` | `open`: the tenant's and the run's leases, moved with them in one transaction, each increment conditional on its cap (so the caps hold exactly across every Lambda instance) |
//! | retention mark | `RETAIN#{shard}` | `T#{tenant}#R#{run}` | `tenantId`, `retainUntil`: put by the commit that ends (or takes up again) a run, for the sweeper's pass (`dynamodb::retention_stamps`) |
//! | schedule | `T#{tenant}#SCHEDULES` | `{scheduleId}` | `schedule` (JSON), `revision` (changes are conditional on it), `createdAt` |
//! | schedule counter | `T#{tenant}#SCHEDULES` | `#COUNT` | `count`: the tenant's schedules, moved by the create (conditional on the limit) and the delete |
//! | evaluation | `T#{tenant}#EVALS` | `REC#{id}`, `REQ#{id}`, `RES#{id}`, `TR#{id}#{example}` | `body` (deflated): a served evaluation's record, request, results lines, judge panel outputs (feature `evaluations`, `baton serve` only) |
//! | evaluation tenants | `EVALS#TENANTS` | `{tenant}` | a tenant that has evaluations (`baton serve` resumes them at start) |
//! | schedule due mark | `SCHEDULES#DUE` | `{tenant}#{scheduleId}` | `dueAt` (ms): the next fire of an active schedule `baton serve` keeps, written with the schedule |
//! | capability registration | `T#{tenant}#CAPS` | `CAP#{capabilityId}` | `registration` (JSON), `registeredAt`, `lastSeenAt` |
//! | chat exchange | `T#{tenant}#THREAD#{thread}` | `X#{runId}` | `exchange` (JSON), `atMillis`, `expiresAt` |
//! | thread lane | `T#{tenant}#THREAD#{thread}` | `LANE` | `lane` (JSON), `version`, `expiresAt` |
//! | thread summary | `T#{tenant}#THREAD#{thread}` | `SUMMARY` | `threadId`, first and last message and time, `gsi1pk`/`gsi1sk`, `expiresAt` |
//!
//! Index `gsi1` is sparse and overloaded: outbox entries not consumed carry
//! `gsi1pk` = `OUTBOX#PENDING#{shard}`, `gsi1sk` = `{quietSinceMillis:020}#{messageId}` (written,
//! then moved on by each re-send: the sweeper reads those quiet for two leases); a run item waiting for a person carries `gsi1pk` =
//! `T#{tenant}#AWAITING_HUMAN`, `gsi1sk` = `{createdAt}#{runId}` (the tenant's task list); a
//! thread summary carries `gsi1pk` = `T#{tenant}#THREADS`, `gsi1sk` =
//! `{lastAtMillis:013}.{threadId}` (the tenant's threads list).
//!
//! Every key a request names starts with the tenant, so one tenant can never address another's
//! items (the retention marks and the sparse index's outbox shards are the sweeper's alone, the
//! schedules' due marks the schedule keeper's).
//!
//! Retention: every item of an ended run carries `expiresAt` (Unix seconds, the table's TTL):
//! the commit that ends it stamps what it writes and marks the run, the sweeper's pass stamps
//! the rest. Items of a run that works or waits carry none (a parked run never expires); thread
//! items expire the deployment's retention after they are written.
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
#[cfg(feature = "scheduler")]
pub mod scheduler;
mod sdk_errors;
#[cfg(feature = "secrets")]
pub mod secrets;
pub mod sqs;

#[cfg(feature = "testing")]
pub use connection::from_clients;
pub use connection::{AwsConnection, EMULATOR_REGION};
pub use dynamodb::DynamoRunStore;
#[cfg(feature = "scheduler")]
pub use scheduler::{EventBridgeScheduleTriggers, SchedulerTarget};
#[cfg(feature = "secrets")]
pub use secrets::AwsSecrets;
pub use sqs::SqsStepQueue;
