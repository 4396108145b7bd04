//! Conformance of capability directories: upsert and list, re-registration
//! keeps the first registration time and replaces the rest, id order,
//! tenant isolation, heartbeats and deregistration.

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
    heartbeats_and_deregistration(directory.as_ref(), &tenant, &other_tenant, stored).await
}

/// A heartbeat moves `lastSeenAt` only, and creates nothing; deregistering
/// removes one registration of one tenant, once.
async fn heartbeats_and_deregistration(
    directory: &dyn CapabilityDirectory,
    tenant: &str,
    other_tenant: &str,
    stored: RegisteredCapability,
) -> Result<(), String> {
    let failed = |error: StoreError| error.to_string();
    let renewed = directory
        .renew_heartbeat(tenant, "writer.fr", 90_000)
        .await
        .map_err(failed)?;
    let mut expected = stored;
    expected.last_seen_at_millis = 90_000;
    check(
        renewed.as_ref() == Some(&expected),
        "a heartbeat moves lastSeenAt and keeps the rest",
    )?;
    let listed = directory.list_registrations(tenant).await.map_err(failed)?;
    check(listed.contains(&expected), "the heartbeat is stored")?;
    check(
        directory
            .renew_heartbeat(tenant, "writer.de", 90_000)
            .await
            .map_err(failed)?
            .is_none()
            && directory
                .renew_heartbeat(other_tenant, "writer.fr", 90_000)
                .await
                .map_err(failed)?
                .is_none(),
        "a heartbeat for an unknown registration (or another tenant's) is none",
    )?;
    check(
        directory
            .list_registrations(other_tenant)
            .await
            .map_err(failed)?
            .is_empty(),
        "a heartbeat creates nothing",
    )?;
    check(
        !directory
            .deregister(other_tenant, "writer.fr")
            .await
            .map_err(failed)?,
        "another tenant cannot deregister it",
    )?;
    check(
        directory
            .deregister(tenant, "writer.fr")
            .await
            .map_err(failed)?,
        "deregistering a registration says it was there",
    )?;
    let ids: Vec<String> = directory
        .list_registrations(tenant)
        .await
        .map_err(failed)?
        .into_iter()
        .map(|record| record.registration.capability_id)
        .collect();
    check(
        ids == ["writer.en"],
        "a deregistered capability is listed no more",
    )?;
    check(
        !directory
            .deregister(tenant, "writer.fr")
            .await
            .map_err(failed)?,
        "deregistering it again finds nothing",
    )?;
    Ok(())
}
