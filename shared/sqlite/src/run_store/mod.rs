//! The ports on the SQLite file: runs, events, leases, outbox, capabilities.

pub(crate) mod committed_states;
mod outbox_rows;

use async_trait::async_trait;
use baton_core::basics::ids::RunKey;
use baton_core::basics::instant::Instant;
use baton_core::contracts::capability::RegisteredCapability;
use baton_core::state::run::{RunState, StepMessage};
use baton_core::wire::event::{EventDraft, EventFrame};
use baton_runtime::error::StoreError;
use baton_runtime::ports::{
    CapabilityDirectory, ClaimOutcome, CreateOutcome, NodeClaim, NodeLeases, RunLog, RunQueries,
    StepCommit, StoredRun,
};
use rusqlite::{OptionalExtension, params};

use crate::event_log::{Appended, append, append_unless_settled};
use crate::group_commit::{Durability, Grouped};
use crate::rows::{as_i64, begin, from_json, millis, texts, to_json};
use crate::state_column::{StoredState, encode_state};
use crate::{SqliteStore, unavailable};

/// A run's state as a load found it: the copy this process kept at the
/// row's version, or the row's value to parse.
enum LoadedState {
    Kept(Box<RunState>),
    Stored(StoredState),
}

fn write_outbox(
    transaction: &rusqlite::Connection,
    outbox: &[StepMessage],
    written_at_millis: i64,
) -> Result<(), StoreError> {
    let mut insert = transaction
        .prepare_cached(
            "INSERT OR REPLACE INTO outbox (tenant_id, run_id, message_id, message, resent, written_at_millis, quiet_since_millis)
             VALUES (?1, ?2, ?3, ?4, 0, ?5, ?5)",
        )
        .map_err(unavailable)?;
    for message in outbox {
        insert
            .execute(params![
                message.tenant_id,
                message.run_id,
                message.message_id,
                to_json(message)?,
                written_at_millis
            ])
            .map_err(unavailable)?;
    }
    Ok(())
}

fn consume_outbox_entry(
    transaction: &rusqlite::Connection,
    tenant_id: &str,
    run_id: &str,
    message_id: Option<&str>,
) -> Result<(), StoreError> {
    if let Some(message_id) = message_id {
        transaction
            .prepare_cached(
                "DELETE FROM outbox WHERE tenant_id = ?1 AND run_id = ?2 AND message_id = ?3",
            )
            .map_err(unavailable)?
            .execute(params![tenant_id, run_id, message_id])
            .map_err(unavailable)?;
    }
    Ok(())
}

/// One line of `baton runs`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSummary {
    pub run_id: String,
    pub status: String,
    pub objective: String,
    pub created_at: String,
    pub updated_at: String,
    pub version: u64,
}

impl SqliteStore {
    /// The tenant's most recent runs, newest first, at most `limit`.
    pub async fn recent_runs(
        &self,
        tenant_id: &str,
        limit: usize,
    ) -> Result<Vec<RunSummary>, StoreError> {
        let tenant_id = tenant_id.to_string();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows: Vec<(StoredState, i64)> = self
            .with_reader(move |connection| {
                let mut statement = connection
                    .prepare_cached(
                        "SELECT state, version FROM runs WHERE tenant_id = ?1
                         ORDER BY created_at_millis DESC, run_id DESC LIMIT ?2",
                    )
                    .map_err(unavailable)?;
                let rows = statement
                    .query_map(params![tenant_id, limit], |row| {
                        Ok((row.get(0)?, row.get(1)?))
                    })
                    .map_err(unavailable)?;
                rows.collect::<Result<Vec<_>, _>>().map_err(unavailable)
            })
            .await?;
        rows.iter()
            .map(|(state, version)| {
                let state: RunState = state.parse()?;
                Ok(RunSummary {
                    status: state.status().as_str().to_string(),
                    objective: state.envelope.objective.clone(),
                    created_at: state.created_at.rfc3339(),
                    updated_at: state.updated_at.rfc3339(),
                    version: u64::try_from(*version).unwrap_or(0),
                    run_id: state.run_id,
                })
            })
            .collect()
    }

    /// Every outbox entry no step has consumed, re-sent or not, oldest
    /// first: what a process starting on this file puts back on its
    /// in-memory queue (the queue died with the last process; the outbox
    /// did not).
    pub async fn unconsumed_outbox(&self) -> Result<Vec<StepMessage>, StoreError> {
        let messages: Vec<String> = self
            .with_reader(|connection| {
                texts(
                    connection,
                    "SELECT message FROM outbox ORDER BY written_at_millis, message_id",
                    [],
                )
            })
            .await?;
        messages.iter().map(|message| from_json(message)).collect()
    }
}

#[async_trait]
impl RunLog for SqliteStore {
    async fn create_run_within(
        &self,
        state: &RunState,
        events: Vec<EventDraft>,
        outbox: Vec<StepMessage>,
        idempotency_key: Option<&str>,
        live_run_limit: Option<u64>,
    ) -> Result<CreateOutcome, StoreError> {
        let mut state = state.clone();
        let (state_json, _) = encode_state(&mut state, None)?;
        let key = idempotency_key.map(str::to_string);
        let now = millis(self.clock.now());
        // The run's own creation time, so the runs list's order and cursor
        // agree with its listing's ordering key.
        let created_millis = millis(state.created_at);
        self.with_connection(move |connection| {
            let transaction = begin(connection)?;
            if let Some(key) = &key {
                let existing: Option<String> = transaction
                    .prepare_cached("SELECT run_id FROM idempotency WHERE tenant_id = ?1 AND idempotency_key = ?2")
                .map_err(unavailable)?
                .query_row(params![state.tenant_id, key],
                        |row| row.get(0),
                    )
                    .optional()
                    .map_err(unavailable)?;
                if let Some(run_id) = existing {
                    return Ok(CreateOutcome::AlreadyExists { run_id });
                }
            }
            if state.status().is_at_work()
                && let Some(limit) = live_run_limit
            {
                let live_runs = crate::tenant_runs::live_runs_of(&transaction, &state.tenant_id)?;
                if live_runs >= limit {
                    return Ok(CreateOutcome::LiveRunLimitReached { live_runs });
                }
            }
            if let Some(key) = &key {
                transaction
                    .prepare_cached("INSERT INTO idempotency (tenant_id, idempotency_key, run_id) VALUES (?1, ?2, ?3)")
                .map_err(unavailable)?
                .execute(params![state.tenant_id, key, state.run_id],
                    )
                    .map_err(unavailable)?;
            }
            transaction
                .prepare_cached("INSERT INTO runs (tenant_id, run_id, state, version, status, correlation_id, last_sequence, created_at_millis, forked_from)
                     VALUES (?1, ?2, ?3, 1, ?4, ?5, 0, ?6, ?7)")
                .map_err(unavailable)?
                .execute(params![
                        state.tenant_id,
                        state.run_id,
                        state_json,
                        state.status().as_str(),
                        state.correlation_id,
                        created_millis,
                        state.forked_from.as_ref().map(|origin| origin.run_id.as_str())
                    ],
                )
                .map_err(unavailable)?;
            append(&transaction, &state.tenant_id, &state.run_id, events)?;
            write_outbox(&transaction, &outbox, now)?;
            crate::tenant_runs::count_live_run_change(
                &transaction,
                &state.tenant_id,
                None,
                state.status(),
            )?;
            transaction.commit().map_err(unavailable)?;
            Ok(CreateOutcome::Created)
        })
        .await
    }

    async fn load_run(&self, key: RunKey<'_>) -> Result<Option<StoredRun>, StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        let (tenant_id, run_id) = (tenant_id.to_string(), run_id.to_string());
        let committed = self.committed_states.clone();
        // The version first: at the version this process committed, the
        // state is the one it kept, and the row's JSON is not even read.
        let row: Option<(LoadedState, u64)> = self
            .with_reader(move |connection| {
                connection
                    .prepare_cached(
                        "SELECT state, version FROM runs WHERE tenant_id = ?1 AND run_id = ?2",
                    )
                    .map_err(unavailable)?
                    .query_row(params![tenant_id, run_id], |row| {
                        let version = u64::try_from(row.get::<_, i64>(1)?).unwrap_or(0);
                        let state = match committed.state_at(&tenant_id, &run_id, version) {
                            Some(state) => LoadedState::Kept(Box::new(state)),
                            None => LoadedState::Stored(row.get(0)?),
                        };
                        Ok((state, version))
                    })
                    .optional()
                    .map_err(unavailable)
            })
            .await?;
        row.map(|(state, version)| {
            let state = match state {
                LoadedState::Kept(state) => *state,
                LoadedState::Stored(stored) => stored.parse()?,
            };
            Ok(StoredRun { state, version })
        })
        .transpose()
    }

    async fn commit_step(&self, key: RunKey<'_>, commit: StepCommit) -> Result<u64, StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        let (tenant_id, run_id) = (tenant_id.to_string(), run_id.to_string());
        let StepCommit {
            expected_version,
            previous_status,
            retain_until,
            state,
            events,
            outbox,
            consumed_message_id,
            entries,
        } = commit;
        let mut state = state;
        let reusable = self.committed_states.compressed_plan(&run_id);
        let (state_json, compressed_plan) = encode_state(&mut state, reusable)?;
        let status = state.status();
        let now = millis(self.clock.now());
        let (kept_tenant, kept_run) = (tenant_id.clone(), run_id.clone());
        // Decided concurrently, committed together: the group commit puts
        // this commit in the next transaction (a savepoint of its own) and
        // answers once that transaction is durable.
        let committed = self
            .write_in_group(
                Durability::Fsynced,
                move |transaction: &rusqlite::Connection| {
                    let expected = as_i64(expected_version);
                    // Conditional on the status the caller read too (as on
                    // DynamoDB): the live-run counter moves by it, and a wrong
                    // one is a conflict the caller reloads after.
                    let changed = transaction
                        .prepare_cached(
                            "UPDATE runs SET state = ?3, status = ?4, version = version + 1,
                            retain_until_millis = ?6
                         WHERE tenant_id = ?1 AND run_id = ?2 AND version = ?5 AND status = ?7",
                        )
                        .map_err(unavailable)?
                        .execute(params![
                            tenant_id,
                            run_id,
                            state_json,
                            status.as_str(),
                            expected,
                            retain_until.map(millis),
                            previous_status.as_str()
                        ])
                        .map_err(unavailable)?;
                    if changed == 0 {
                        let exists: Option<i64> = transaction
                            .prepare_cached(
                                "SELECT version FROM runs WHERE tenant_id = ?1 AND run_id = ?2",
                            )
                            .map_err(unavailable)?
                            .query_row(params![tenant_id, run_id], |row| row.get(0))
                            .optional()
                            .map_err(unavailable)?;
                        return Err(match exists {
                            None => StoreError::RunNotFound,
                            Some(_) => StoreError::VersionConflict {
                                expected: expected_version,
                            },
                        });
                    }
                    append(transaction, &tenant_id, &run_id, events)?;
                    consume_outbox_entry(
                        transaction,
                        &tenant_id,
                        &run_id,
                        consumed_message_id.as_deref(),
                    )?;
                    write_outbox(transaction, &outbox, now)?;
                    crate::entries::write_entries(transaction, &tenant_id, &run_id, &entries)?;
                    crate::tenant_runs::count_live_run_change(
                        transaction,
                        &tenant_id,
                        Some(previous_status),
                        status,
                    )?;
                    Ok(Grouped::Keep(expected_version + 1))
                },
            )
            .await;
        match &committed {
            Ok(version) => self.committed_states.keep(
                &kept_tenant,
                &kept_run,
                *version,
                state,
                compressed_plan,
            ),
            // A conflict or a failure: the row is not this state.
            Err(_) => self.committed_states.forget(&kept_run),
        }
        committed
    }

    async fn read_entries(
        &self,
        key: RunKey<'_>,
        prefix: &str,
    ) -> Result<Vec<baton_core::records::entries::RunEntry>, StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        let (tenant_id, run_id, prefix) = (
            tenant_id.to_string(),
            run_id.to_string(),
            prefix.to_string(),
        );
        self.with_reader(move |connection| {
            crate::entries::read_entries(connection, &tenant_id, &run_id, &prefix)
        })
        .await
    }

    async fn append_events(
        &self,
        key: RunKey<'_>,
        events: Vec<EventDraft>,
    ) -> Result<u64, StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        let (tenant_id, run_id) = (tenant_id.to_string(), run_id.to_string());
        // What goes this way is a view the commit does not depend on
        // (streamed text, a restarted stream's warning): grouped with the
        // writes around it, and not fsynced for itself (`group_commit`).
        self.write_in_group(Durability::ProcessCrash, move |transaction| {
            match append_unless_settled(transaction, &tenant_id, &run_id, events)? {
                Appended::RunSettled(last) => Ok(Grouped::RollBack(last)),
                Appended::Written(last) => Ok(Grouped::Keep(last)),
            }
        })
        .await
    }

    async fn read_events(
        &self,
        key: RunKey<'_>,
        after_sequence: u64,
        limit: usize,
    ) -> Result<Vec<EventFrame>, StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        let (tenant_id, run_id) = (tenant_id.to_string(), run_id.to_string());
        let after = as_i64(after_sequence);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let frames: Vec<String> = self
            .with_reader(move |connection| {
                texts(connection, "SELECT frame FROM events WHERE tenant_id = ?1 AND run_id = ?2 AND sequence > ?3
                         ORDER BY sequence LIMIT ?4", params![tenant_id, run_id, after, limit])
            })
            .await?;
        frames.iter().map(|frame| from_json(frame)).collect()
    }

    async fn last_sequence(&self, key: RunKey<'_>) -> Result<Option<u64>, StoreError> {
        self.stored_last_sequence(key.tenant_id(), key.run_id())
            .await
    }
}

#[async_trait]
impl NodeLeases for SqliteStore {
    async fn claim_node(
        &self,
        key: RunKey<'_>,
        claim: NodeClaim<'_>,
        events_on_claim: Vec<EventDraft>,
    ) -> Result<ClaimOutcome, StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        self.claim_lease(tenant_id, run_id, claim, events_on_claim)
            .await
    }

    async fn renew_claim(&self, key: RunKey<'_>, claim: NodeClaim<'_>) -> Result<bool, StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        self.renew_lease(tenant_id, run_id, claim).await
    }

    async fn release_claim(
        &self,
        key: RunKey<'_>,
        node_id: &str,
        attempt: u32,
        claimant: &str,
    ) -> Result<(), StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        self.release_lease(tenant_id, run_id, node_id, attempt, claimant)
            .await
    }

    async fn run_holds_live_lease(
        &self,
        key: RunKey<'_>,
        now: Instant,
    ) -> Result<bool, StoreError> {
        self.any_live_lease(key.tenant_id(), key.run_id(), now)
            .await
    }
}

#[async_trait]
impl RunQueries for SqliteStore {
    async fn live_runs(&self, tenant_id: &str) -> Result<u64, StoreError> {
        self.read_live_runs(tenant_id).await
    }

    async fn list_runs(
        &self,
        tenant_id: &str,
        query: &baton_core::state::listing::RunListQuery,
    ) -> Result<baton_core::state::listing::RunListPage, StoreError> {
        self.query_run_page(tenant_id, query).await
    }

    async fn runs_awaiting_human(&self, tenant_id: &str) -> Result<Vec<RunState>, StoreError> {
        let tenant_id = tenant_id.to_string();
        let states: Vec<StoredState> = self
            .with_reader(move |connection| {
                let mut statement = connection
                    .prepare_cached(
                        "SELECT state FROM runs WHERE tenant_id = ?1 AND status IN ('awaiting_human', 'awaiting_hitl', 'paused')
                         ORDER BY created_at_millis, run_id",
                    )
                    .map_err(unavailable)?;
                let rows = statement
                    .query_map(params![tenant_id], |row| row.get(0))
                    .map_err(unavailable)?;
                rows.collect::<Result<Vec<_>, _>>().map_err(unavailable)
            })
            .await?;
        states.iter().map(StoredState::parse).collect()
    }
}

#[async_trait]
impl CapabilityDirectory for SqliteStore {
    async fn upsert_registration(
        &self,
        tenant_id: &str,
        mut record: RegisteredCapability,
    ) -> Result<RegisteredCapability, StoreError> {
        let tenant_id = tenant_id.to_string();
        self.with_connection(move |connection| {
            let transaction = begin(connection)?;
            let existing: Option<String> = transaction
                .prepare_cached("SELECT record FROM capabilities WHERE tenant_id = ?1 AND capability_id = ?2")
                .map_err(unavailable)?
                .query_row(params![tenant_id, record.registration.capability_id],
                    |row| row.get(0),
                )
                .optional()
                .map_err(unavailable)?;
            if let Some(existing) = existing {
                let existing: RegisteredCapability = from_json(&existing)?;
                record.registered_at_millis = existing.registered_at_millis;
            }
            transaction
                .prepare_cached("INSERT OR REPLACE INTO capabilities (tenant_id, capability_id, record) VALUES (?1, ?2, ?3)")
                .map_err(unavailable)?
                .execute(params![tenant_id, record.registration.capability_id, to_json(&record)?],
                )
                .map_err(unavailable)?;
            transaction.commit().map_err(unavailable)?;
            Ok(record)
        })
        .await
    }

    async fn list_registrations(
        &self,
        tenant_id: &str,
    ) -> Result<Vec<RegisteredCapability>, StoreError> {
        let tenant_id = tenant_id.to_string();
        let records: Vec<String> = self
            .with_reader(move |connection| {
                texts(
                    connection,
                    "SELECT record FROM capabilities WHERE tenant_id = ?1 ORDER BY capability_id",
                    params![tenant_id],
                )
            })
            .await?;
        records.iter().map(|record| from_json(record)).collect()
    }

    async fn renew_heartbeat(
        &self,
        tenant_id: &str,
        capability_id: &str,
        seen_at_millis: u64,
    ) -> Result<Option<RegisteredCapability>, StoreError> {
        let (tenant_id, capability_id) = (tenant_id.to_string(), capability_id.to_string());
        self.with_connection(move |connection| {
            let transaction = begin(connection)?;
            let existing: Option<String> = transaction
                .prepare_cached("SELECT record FROM capabilities WHERE tenant_id = ?1 AND capability_id = ?2")
                .map_err(unavailable)?
                .query_row(params![tenant_id, capability_id], |row| row.get(0))
                .optional()
                .map_err(unavailable)?;
            let Some(existing) = existing else {
                return Ok(None);
            };
            let mut record: RegisteredCapability = from_json(&existing)?;
            record.last_seen_at_millis = seen_at_millis;
            transaction
                .prepare_cached("UPDATE capabilities SET record = ?3 WHERE tenant_id = ?1 AND capability_id = ?2")
                .map_err(unavailable)?
                .execute(params![tenant_id, capability_id, to_json(&record)?])
                .map_err(unavailable)?;
            transaction.commit().map_err(unavailable)?;
            Ok(Some(record))
        })
        .await
    }

    async fn deregister(&self, tenant_id: &str, capability_id: &str) -> Result<bool, StoreError> {
        let (tenant_id, capability_id) = (tenant_id.to_string(), capability_id.to_string());
        self.with_connection(move |connection| {
            let removed = connection
                .prepare_cached(
                    "DELETE FROM capabilities WHERE tenant_id = ?1 AND capability_id = ?2",
                )
                .map_err(unavailable)?
                .execute(params![tenant_id, capability_id])
                .map_err(unavailable)?;
            Ok(removed > 0)
        })
        .await
    }
}
