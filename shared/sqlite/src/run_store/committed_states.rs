//! The states this process last committed, by run and version: a load
//! whose row is still at that version is answered with a copy of the state
//! instead of decompressing and parsing the row's JSON (in a node step on
//! SQLite that parse was about a third of the instructions). The version
//! makes it safe beside other processes on the file: every commit moves a
//! run's version by one, conditionally, so a row at the version this
//! process committed holds the state it committed. A state enters only
//! after its transaction is durable; the map holds at most
//! [`MOST_KEPT_STATES`] runs and starts over when full.

use std::collections::HashMap;
use std::sync::Mutex;

use baton_core::state::run::RunState;

use crate::state_column::CompressedPlan;

/// Runs whose last committed state is kept (a few KB each; the plan is
/// shared with the state the engine holds).
pub(crate) const MOST_KEPT_STATES: usize = 4_096;

/// A run's last committed state: its tenant, version and state, and its
/// plan as that commit wrote it.
struct Kept {
    tenant_id: String,
    version: u64,
    state: RunState,
    plan: Option<CompressedPlan>,
}

#[derive(Default)]
pub(crate) struct CommittedStates {
    /// By run id (a run id names one run; its tenant is checked too).
    by_run: Mutex<HashMap<String, Kept>>,
}

impl CommittedStates {
    /// A copy of the state `tenant_id`/`run_id` was committed with at
    /// `version`, if this process committed it and it is still kept.
    pub(crate) fn state_at(&self, tenant_id: &str, run_id: &str, version: u64) -> Option<RunState> {
        let kept = self
            .by_run
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        kept.get(run_id)
            .filter(|kept| kept.tenant_id == tenant_id && kept.version == version)
            .map(|kept| kept.state.clone())
    }

    /// The run's plan as its last commit from this process wrote it (the
    /// next commit reuses it if its plan is the same one).
    pub(crate) fn compressed_plan(&self, run_id: &str) -> Option<CompressedPlan> {
        self.by_run
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(run_id)
            .and_then(|kept| kept.plan.clone())
    }

    /// Keeps `state` as the run's at `version` (its transaction durable),
    /// with its plan as written.
    pub(crate) fn keep(
        &self,
        tenant_id: &str,
        run_id: &str,
        version: u64,
        state: RunState,
        plan: Option<CompressedPlan>,
    ) {
        let mut kept = self
            .by_run
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if kept.len() >= MOST_KEPT_STATES && !kept.contains_key(run_id) {
            kept.clear();
        }
        kept.insert(
            run_id.to_string(),
            Kept {
                tenant_id: tenant_id.to_string(),
                version,
                state,
                plan,
            },
        );
    }

    /// Forgets the run (deleted, or its commit's outcome unknown). Only a
    /// copy is lost: the next load parses the row.
    pub(crate) fn forget(&self, run_id: &str) {
        self.by_run
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(run_id);
    }
}
