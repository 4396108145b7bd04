//! Schedules that cannot starve: a fire whose run cannot be started (here,
//! its tenant is at its live-run limit) is recorded on the schedule and
//! tried again after a back-off, under the same key, out of the way of
//! other tenants' schedules; five failures in a row pause it, with the
//! cause. The store's keeper ticks (`ScheduleService::fire_due`) on a
//! clock the test moves; the engine, the store and the queue are the real
//! in-memory ones. No model is asked (no step is run).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::time::Duration;

use baton_core::records::schedules::{MAX_FAILED_FIRES, ScheduleState, fire_retry_delay};
use baton_runtime::clock::OffsetClock;
use baton_runtime::services::{OrchestratorSettings, PerTenantLimit, TenantLimits};
use baton_test_support::{SchemaShapedModel, TestServices};
use serde_json::json;

fn request() -> serde_json::Value {
    json!({
        "expression": "rate(1 minute)",
        "envelope": {"objective": "a scheduled run",
                     "outputContract": {"schema": {"type": "object"}}}
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn one_tenants_failing_schedules_back_off_pause_and_never_starve_another() {
    let clock = Arc::new(OffsetClock::new());
    let services = TestServices::with_model(Arc::new(SchemaShapedModel))
        .clock(clock.clone())
        .settings(OrchestratorSettings {
            tenant_limits: TenantLimits {
                live_runs: PerTenantLimit::parse("busy:1").unwrap(),
                ..TenantLimits::default()
            },
            ..OrchestratorSettings::default()
        })
        .build()
        .services;
    // `busy` is at its live-run limit: one run queued, never run here.
    services
        .runs
        .submit(
            "busy",
            &json!({"objective": "o", "outputContract": {"schema": {"type": "object"}}}),
        )
        .await
        .unwrap();
    let mut failing = Vec::new();
    for _ in 0..100 {
        failing.push(services.schedules.create("busy", &request()).await.unwrap());
    }
    // `calm`'s schedule is due a second after all of busy's: read by due
    // time alone, busy's hundred would fill the tick.
    clock.advance(Duration::from_secs(1));
    let calm = services.schedules.create("calm", &request()).await.unwrap();

    // The first tick shares its hundred places: calm's fires, on time, and
    // 99 of busy's fail (the last waits one tick).
    clock.advance(Duration::from_secs(60));
    let first = services.schedules.fire_due().await.unwrap();
    assert_eq!(first.runs.len(), 1, "{first:?}");
    assert_eq!(first.runs[0].tenant_id, "calm");
    assert_eq!(Some(first.runs[0].fire_at), calm.next_fire_at);
    assert_eq!(first.failed, 99, "{first:?}");
    let one = services
        .schedules
        .get("busy", &failing[0].schedule_id)
        .await
        .unwrap();
    assert_eq!(one.failed_fires, 1);
    let error = one.last_error.as_ref().unwrap();
    assert!(error.message.contains("limit"), "{error:?}");
    assert_eq!(
        one.retry_fire_at, failing[0].next_fire_at,
        "the same fire, retried"
    );
    assert_eq!(one.next_fire_at, Some(error.at.plus(fire_retry_delay(1))));

    // The next tick, a second later: busy's failed ones are backing off
    // out of the way; only the one left over is read.
    clock.advance(Duration::from_secs(1));
    let second = services.schedules.fire_due().await.unwrap();
    assert_eq!(second.failed, 1, "{second:?}");
    assert!(second.runs.is_empty(), "{second:?}");

    // Each is retried after its back-off; the fifth failure in a row
    // pauses it. Calm's schedule fires every minute meanwhile.
    let mut paused = 0;
    let mut calm_fires = first.runs.len();
    let mut ticks = 0;
    for _ in 0..200 {
        clock.advance(Duration::from_secs(60));
        ticks += 1;
        let tick = services.schedules.fire_due().await.unwrap();
        assert!(tick.runs.len() <= 1, "{tick:?}");
        calm_fires += tick.runs.len();
        paused += tick.paused;
        if paused == 100 {
            break;
        }
    }
    assert_eq!(paused, 100, "every failing schedule paused itself");
    assert_eq!(calm_fires, ticks + 1, "calm fired at every minute's tick");
    for schedule in &failing {
        let stopped = services
            .schedules
            .get("busy", &schedule.schedule_id)
            .await
            .unwrap();
        assert_eq!(stopped.state, ScheduleState::Paused);
        assert_eq!(stopped.failed_fires, MAX_FAILED_FIRES);
        assert_eq!(stopped.next_fire_at, None);
        let error = stopped.last_error.as_ref().unwrap();
        assert!(error.paused, "{error:?}");
        assert!(error.message.contains("paused itself"), "{error:?}");
        assert_eq!(
            Some(error.fire_at),
            schedule.next_fire_at,
            "the fire that kept failing"
        );
    }
    let calm_now = services
        .schedules
        .get("calm", &calm.schedule_id)
        .await
        .unwrap();
    assert_eq!(calm_now.failed_fires, 0);
    assert_eq!(calm_now.fires, calm_fires as u64);

    // Resumed, it starts afresh.
    let resumed = services
        .schedules
        .resume("busy", &failing[0].schedule_id)
        .await
        .unwrap();
    assert_eq!(resumed.state, ScheduleState::Active);
    assert_eq!(resumed.failed_fires, 0);
    assert_eq!(resumed.retry_fire_at, None);
}
