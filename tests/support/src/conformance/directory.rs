//! Conformance of capability directories: upsert and list, re-registration
//! keeps the first registration time and replaces the rest, id order,
//! tenant isolation.

use std::sync::Arc;

use baton_core::contracts::capability::RegisteredCapability;
use serde_json::json;

use super::check;
use baton_runtime::error::StoreError;
use baton_runtime::ports::CapabilityDirectory;

fn registration(capability_id: &str, version: &str) -> RegisteredCapability {
    let registration = serde_json::from_value(json!({
        "capabilityId": capability_id,
        "agentType": "ai",
        "version": version,
        "displayName": format!("{capability_id} display"),
        "summary": "conformance capability",
        "inputTraits": {"languages": ["en"]},
        "inputContract": ["facet_in"],
        "outputContract": ["facet_out"],
        "heartbeat": {"intervalSeconds": 60}
    }));
    let Ok(registration) = registration else {
        unreachable!("the conformance registration is valid")
    };
    RegisteredCapability {
        registration,
        registered_at_millis: 1_000,
        last_seen_at_millis: 1_000,
    }
}

/// The capability directory checks every `CapabilityDirectory` adapter must
/// pass: upsert and list, re-registration keeps the first registration time
/// and replaces the rest, id order, tenant isolation. `unique` keeps tenants
/// apart when several suites share one table.
pub async fn capability_directory_conformance(
    directory: Arc<dyn CapabilityDirectory>,
    unique: &str,
) -> Result<(), String> {
    let tenant = format!("tenant-a-{unique}");
    let other_tenant = format!("tenant-b-{unique}");
    let failed = |error: StoreError| error.to_string();
    check(
        directory
            .list_registrations(&tenant)
            .await
            .map_err(failed)?
            .is_empty(),
        "a tenant without registrations lists none",
    )?;
    let stored = directory
        .upsert_registration(&tenant, registration("writer.fr", "1"))
        .await
        .map_err(failed)?;
    check(
        stored == registration("writer.fr", "1"),
        "the first upsert stores the record as given",
    )?;
    directory
        .upsert_registration(&tenant, registration("writer.en", "1"))
        .await
        .map_err(failed)?;
    let mut heartbeat = registration("writer.fr", "2");
    heartbeat.registered_at_millis = 50_000;
    heartbeat.last_seen_at_millis = 50_000;
    let stored = directory
        .upsert_registration(&tenant, heartbeat)
        .await
        .map_err(failed)?;
    check(
        stored.registered_at_millis == 1_000 && stored.last_seen_at_millis == 50_000,
        "a re-registration keeps registeredAt and moves lastSeenAt",
    )?;
    check(
        stored.registration.version == "2",
        "a re-registration replaces the payload",
    )?;
    let listed = directory
        .list_registrations(&tenant)
        .await
        .map_err(failed)?;
    let ids: Vec<&str> = listed
        .iter()
        .map(|record| record.registration.capability_id.as_str())
        .collect();
    check(
        ids == ["writer.en", "writer.fr"],
        "registrations list in capability id order",
    )?;
    check(listed[1] == stored, "the listed record is the stored one")?;
    check(
        directory
            .list_registrations(&other_tenant)
            .await
            .map_err(failed)?
            .is_empty(),
        "another tenant sees none of them",
    )?;
    Ok(())
}
