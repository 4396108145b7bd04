//! Conformance of the stream leases: the per-run and per-tenant caps, a
//! lease given back, a lease that ran out (its process died) no longer
//! counted, tenants apart, and a crowd opening at once held to the cap.

use std::time::Duration;

use baton_core::basics::ids::RunKey;
use baton_runtime::ports::{StreamCaps, StreamLeases, StreamOpening};

use super::{NOW, check};

/// Runs the case on `leases`.
pub async fn stream_lease_conformance(
    leases: &dyn StreamLeases,
    unique: &str,
) -> Result<(), String> {
    let failed = |error: baton_runtime::error::StoreError| format!("store error: {error}");
    let tenant = format!("tenant-{unique}-streams");
    let caps = StreamCaps {
        per_run: 2,
        per_tenant: 3,
    };
    let minute = NOW.plus(Duration::from_secs(60));
    let open = |run: &'static str, stream: &'static str, now, until| {
        let tenant = tenant.clone();
        async move {
            leases
                .open_stream(RunKey::new(&tenant, run), stream, caps, now, until)
                .await
        }
    };
    check(
        open("run-a", "a1", NOW, minute).await.map_err(failed)? == StreamOpening::Opened
            && open("run-a", "a2", NOW, minute).await.map_err(failed)? == StreamOpening::Opened,
        "two streams of a run open",
    )?;
    check(
        open("run-a", "a3", NOW, minute).await.map_err(failed)?
            == StreamOpening::RunAtCap { open: 2 },
        "a third stream of the run is refused at the run's cap",
    )?;
    check(
        open("run-b", "b1", NOW, minute).await.map_err(failed)? == StreamOpening::Opened,
        "another run's stream opens",
    )?;
    check(
        open("run-b", "b2", NOW, minute).await.map_err(failed)?
            == StreamOpening::TenantAtCap { open: 3 },
        "a fourth stream of the tenant is refused at the tenant's cap",
    )?;
    check(
        leases
            .open_stream(
                RunKey::new(&format!("{tenant}-other"), "run-a"),
                "x1",
                caps,
                NOW,
                minute,
            )
            .await
            .map_err(failed)?
            == StreamOpening::Opened,
        "another tenant's streams are counted apart",
    )?;
    leases
        .close_stream(RunKey::new(&tenant, "run-a"), "a1")
        .await
        .map_err(failed)?;
    check(
        open("run-b", "b2", NOW, minute).await.map_err(failed)? == StreamOpening::Opened,
        "a lease given back makes room",
    )?;
    // Two minutes on, no lease was renewed but b2's: a2 and b1 ran out.
    let later = NOW.plus(Duration::from_secs(120));
    leases
        .renew_stream(
            RunKey::new(&tenant, "run-b"),
            "b2",
            later.plus(Duration::from_secs(60)),
        )
        .await
        .map_err(failed)?;
    let until = later.plus(Duration::from_secs(60));
    check(
        open("run-a", "a4", later, until).await.map_err(failed)? == StreamOpening::Opened
            && open("run-a", "a5", later, until).await.map_err(failed)? == StreamOpening::Opened,
        "leases that ran out are not counted",
    )?;
    check(
        open("run-c", "c1", later, until).await.map_err(failed)?
            == StreamOpening::TenantAtCap { open: 3 },
        "the renewed lease still counts",
    )?;
    // Many streams of one tenant opening at the same moment: exactly the
    // cap opens (on every store: the count and the lease are one write).
    let crowd = format!("{tenant}-crowd");
    let crowd_caps = StreamCaps {
        per_run: 64,
        per_tenant: 4,
    };
    let openings = (0..12).map(|index| {
        let crowd = crowd.clone();
        async move {
            leases
                .open_stream(
                    RunKey::new(&crowd, &format!("run-{}", index % 3)),
                    &format!("crowd-{index}"),
                    crowd_caps,
                    NOW,
                    minute,
                )
                .await
        }
    });
    let opened = futures_util::future::join_all(openings)
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(failed)?
        .into_iter()
        .filter(|opening| *opening == StreamOpening::Opened)
        .count();
    check(
        opened == 4,
        &format!("twelve streams opening at once: exactly the cap of 4 open ({opened} did)"),
    )?;
    Ok(())
}
