//! Per-tenant settings (`registry/tenants.json`): what a deployment sets
//! for one tenant beyond the process's defaults. Today: how long the
//! tenant's ended runs are kept (`retentionDays`, over
//! `BATON_RETENTION_DAYS`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The file: settings by tenant id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TenantSettings {
    /// Settings by tenant id.
    #[serde(default)]
    pub tenants: BTreeMap<String, TenantOverrides>,
}

/// One tenant's own settings; an absent one is the deployment's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TenantOverrides {
    /// Days an ended run of this tenant (its state, frames, entries,
    /// listings, outbox and thread items) is kept after it ends; a run
    /// that works or waits never expires. At least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub retention_days: Option<u32>,
}

impl TenantSettings {
    /// The first setting out of range: its JSON path and what is wrong.
    pub fn check(&self) -> Result<(), (String, String)> {
        for (tenant_id, overrides) in &self.tenants {
            if tenant_id.trim().is_empty() {
                return Err(("$.tenants".into(), "a tenant id is empty".into()));
            }
            if overrides.retention_days == Some(0) {
                return Err((
                    format!("$.tenants.{tenant_id}.retentionDays"),
                    "must be at least 1 (a day)".into(),
                ));
            }
        }
        Ok(())
    }

    /// Retention days by tenant, for the tenants that set them.
    pub fn retention_days_by_tenant(&self) -> BTreeMap<String, u32> {
        self.tenants
            .iter()
            .filter_map(|(tenant_id, overrides)| {
                overrides
                    .retention_days
                    .map(|days| (tenant_id.clone(), days))
            })
            .collect()
    }
}
