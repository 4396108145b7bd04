//! Node leases on the SQLite file: claim (taking over an expired lease or
//! one whose process is gone), renew (the heartbeat), release.

use baton_core::basics::instant::Instant;
use baton_core::wire::event::EventDraft;
use baton_runtime::error::StoreError;
use baton_runtime::ports::{ClaimOutcome, NodeClaim};
use rusqlite::{OptionalExtension, params};

use crate::event_log::{Appended, append_unless_settled};
use crate::group_commit::{Durability, Grouped};
use crate::rows::{millis, without_fsync};
use crate::{SqliteStore, unavailable};

impl SqliteStore {
    /// Whether any lease of the run stands at `now`: unexpired, its
    /// process alive.
    pub(crate) async fn any_live_lease(
        &self,
        tenant_id: &str,
        run_id: &str,
        now: Instant,
    ) -> Result<bool, StoreError> {
        let (tenant_id, run_id) = (tenant_id.to_string(), run_id.to_string());
        let now = millis(now);
        let owners: Vec<String> = self
            .with_reader(move |connection| {
                let mut statement = connection
                    .prepare_cached(
                        "SELECT owner FROM leases
                         WHERE tenant_id = ?1 AND run_id = ?2 AND expires_at_millis > ?3",
                    )
                    .map_err(unavailable)?;
                let rows = statement
                    .query_map(params![tenant_id, run_id, now], |row| row.get(0))
                    .map_err(unavailable)?;
                rows.collect::<Result<Vec<_>, _>>().map_err(unavailable)
            })
            .await?;
        Ok(owners
            .iter()
            .any(|owner| self.claimant_process.is_alive(owner)))
    }

    pub(crate) async fn claim_lease(
        &self,
        tenant_id: &str,
        run_id: &str,
        claim: NodeClaim<'_>,
        events_on_claim: Vec<EventDraft>,
    ) -> Result<ClaimOutcome, StoreError> {
        let (tenant_id, run_id) = (tenant_id.to_string(), run_id.to_string());
        let node_id = claim.claim_key.to_string();
        let attempt = i64::from(claim.attempt);
        let claimant = claim.worker_id.to_string();
        let now = millis(claim.now);
        let claim_now = claim.now;
        let expires = millis(claim.lease_expires_at);
        let process = self.claimant_process.clone();
        // Grouped with the claims and commits around it (one transaction);
        // a group of claims alone is not fsynced (`group_commit`).
        self.write_in_group(Durability::ProcessCrash, move |transaction| {
            let held: Option<(String, i64, String)> = transaction
                .prepare_cached("SELECT claimant, expires_at_millis, owner FROM leases
                     WHERE tenant_id = ?1 AND run_id = ?2 AND node_id = ?3 AND attempt = ?4")
                .map_err(unavailable)?
                .query_row(params![tenant_id, run_id, node_id, attempt],
                    |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
                )
                .optional()
                .map_err(unavailable)?;
            // A lease stands while unexpired and its process is alive: a
            // process that died (however it died) holds nothing.
            if let Some((holder, held_until, owner)) = held
                && holder != claimant
                && held_until > now
                && process.is_alive(&owner)
            {
                return Ok(Grouped::Keep(ClaimOutcome::HeldByOther {
                    lease_expires_at: Instant::from_unix_millis(u64::try_from(held_until).unwrap_or(0)),
                }));
            }
            transaction
                .prepare_cached("INSERT OR REPLACE INTO leases (tenant_id, run_id, node_id, attempt, claimant, expires_at_millis, owner)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")
                .map_err(unavailable)?
                .execute(params![tenant_id, run_id, node_id, attempt, claimant, expires, process.token()],
                )
                .map_err(unavailable)?;
            if let Appended::RunSettled(_) =
                append_unless_settled(transaction, &tenant_id, &run_id, events_on_claim)?
            {
                // No node_start after the terminal frame: the savepoint is
                // rolled back (the lease with it) and the step finds the
                // run settled when it looks again.
                return Ok(Grouped::RollBack(ClaimOutcome::HeldByOther { lease_expires_at: claim_now }));
            }
            Ok(Grouped::Keep(ClaimOutcome::Claimed))
        })
        .await
    }

    pub(crate) async fn renew_lease(
        &self,
        tenant_id: &str,
        run_id: &str,
        claim: NodeClaim<'_>,
    ) -> Result<bool, StoreError> {
        let values = (
            tenant_id.to_string(),
            run_id.to_string(),
            claim.claim_key.to_string(),
            i64::from(claim.attempt),
            claim.worker_id.to_string(),
            millis(claim.lease_expires_at),
        );
        self.with_connection(move |connection| {
            without_fsync(connection, |connection| {
                let renewed = connection
                .prepare_cached("UPDATE leases SET expires_at_millis = ?6 WHERE tenant_id = ?1 AND run_id = ?2
                     AND node_id = ?3 AND attempt = ?4 AND claimant = ?5")
                .map_err(unavailable)?
                .execute(params![values.0, values.1, values.2, values.3, values.4, values.5],
                )
                .map_err(unavailable)?;
                Ok(renewed == 1)
            })
        })
        .await
    }

    pub(crate) async fn release_lease(
        &self,
        tenant_id: &str,
        run_id: &str,
        node_id: &str,
        attempt: u32,
        claimant: &str,
    ) -> Result<(), StoreError> {
        let values = (
            tenant_id.to_string(),
            run_id.to_string(),
            node_id.to_string(),
            i64::from(attempt),
            claimant.to_string(),
        );
        self.with_connection(move |connection| {
            without_fsync(connection, |connection| {
                connection
                    .prepare_cached(
                        "DELETE FROM leases WHERE tenant_id = ?1 AND run_id = ?2 AND node_id = ?3
                     AND attempt = ?4 AND claimant = ?5",
                    )
                    .map_err(unavailable)?
                    .execute(params![values.0, values.1, values.2, values.3, values.4])
                    .map_err(unavailable)?;
                Ok(())
            })
        })
        .await
    }
}
