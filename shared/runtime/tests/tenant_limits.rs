//! Per-tenant limits. `BATON_TENANT_MAX_LIVE_RUNS`: a tenant with its
//! limit of runs at work is refused another (`RuntimeError::TenantLimit`,
//! nothing created) while another tenant submits freely; once its runs end
//! it submits again. Parked and ended runs do not count.
//! `BATON_TENANT_MAX_SUBMISSIONS_PER_MINUTE`: a tenant that submitted its
//! limit in the last 60 s is refused (`RuntimeError::TenantRateLimit`, with
//! when to retry) until the oldest leaves the window, ended runs included.
//! The model is a test double answering by the requested schema.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;

use baton_core::state::run::RunStatus;
use baton_runtime::RuntimeError;
use baton_runtime::clock::OffsetClock;
use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::services::{OrchestratorSettings, PerTenantLimit, TenantLimits};
use baton_runtime::workers::LocalRunner;
use baton_test_support::{SchemaShapedModel, TestServices};

#[test]
fn limits_read_a_default_and_overrides_and_name_what_is_wrong() {
    let limits = PerTenantLimit::parse("2, vip:5").unwrap();
    assert_eq!(limits.of("anyone"), Some(2));
    assert_eq!(limits.of("vip"), Some(5));
    assert_eq!(PerTenantLimit::parse("vip:5").unwrap().of("anyone"), None);
    for bad in ["0", "vip:0", ":3", "two", "vip:-1"] {
        let problem = PerTenantLimit::parse(bad).unwrap_err().to_string();
        assert!(problem.contains(bad.trim()), "{bad}: {problem}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_at_its_limit_is_refused_another_run_and_others_are_not() {
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(Arc::new(SchemaShapedModel))
        .queue(queue.clone())
        .settings(OrchestratorSettings {
            tenant_limits: TenantLimits {
                live_runs: PerTenantLimit::parse("2,vip:3").unwrap(),
                ..TenantLimits::default()
            },
            ..OrchestratorSettings::default()
        })
        .build()
        .services;
    let envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    // No worker runs yet: submitted runs stay queued, at work.
    for _ in 0..2 {
        services.runs.submit("flooder", &envelope).await.unwrap();
    }
    let refused = services
        .runs
        .submit("flooder", &envelope)
        .await
        .unwrap_err();
    let RuntimeError::TenantLimit { live, limit, .. } = refused else {
        panic!("a tenant limit, not {refused}")
    };
    assert_eq!((live, limit), (2, 2));
    let listed = |tenant: &'static str| {
        let runs = services.runs.clone();
        async move {
            runs.list(
                tenant,
                &baton_core::state::listing::RunListQuery {
                    status: None,
                    limit: 100,
                    cursor: None,
                    forked_from: None,
                },
            )
            .await
            .unwrap()
            .runs
            .len()
        }
    };
    assert_eq!(
        listed("flooder").await,
        2,
        "the refused run was not created"
    );
    // Another tenant is not held back, nor one with a higher limit.
    services.runs.submit("quiet", &envelope).await.unwrap();
    for _ in 0..3 {
        services.runs.submit("vip", &envelope).await.unwrap();
    }
    assert!(matches!(
        services.runs.submit("vip", &envelope).await,
        Err(RuntimeError::TenantLimit { limit: 3, .. })
    ));
    // Once the flooder's runs end, it submits again.
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue,
    };
    runner.drain().await.unwrap();
    let again = services.runs.submit("flooder", &envelope).await.unwrap();
    assert_eq!(
        runner
            .run_until_settled("flooder", &again.run_id)
            .await
            .unwrap(),
        RunStatus::Completed
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_over_its_submissions_per_minute_waits_for_the_oldest_to_leave_the_window() {
    let queue = Arc::new(InMemoryStepQueue::new());
    let clock = Arc::new(OffsetClock::new());
    let services = TestServices::with_model(Arc::new(SchemaShapedModel))
        .queue(queue.clone())
        .clock(clock.clone())
        .settings(OrchestratorSettings {
            tenant_limits: TenantLimits {
                submissions_per_minute: PerTenantLimit::parse("3").unwrap(),
                ..TenantLimits::default()
            },
            ..OrchestratorSettings::default()
        })
        .build()
        .services;
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue,
    };
    let envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    let first = services.runs.submit("burst", &envelope).await.unwrap();
    // Ended runs still count: the limit is on submissions, not on work.
    assert_eq!(
        runner
            .run_until_settled("burst", &first.run_id)
            .await
            .unwrap(),
        RunStatus::Completed
    );
    clock.advance(std::time::Duration::from_secs(20));
    for _ in 0..2 {
        services.runs.submit("burst", &envelope).await.unwrap();
    }
    let refused = services.runs.submit("burst", &envelope).await.unwrap_err();
    let RuntimeError::TenantRateLimit {
        submitted,
        limit,
        retry_after_seconds,
        ..
    } = refused
    else {
        panic!("a submission rate limit, not {refused}")
    };
    assert_eq!((submitted, limit), (3, 3));
    // The first submission leaves the window 40 s from now (±1 s of the
    // listing's whole-second creation times).
    assert!(
        (39..=41).contains(&retry_after_seconds),
        "retry after {retry_after_seconds} s"
    );
    // Another tenant is not held back.
    services.runs.submit("steady", &envelope).await.unwrap();
    // Once the first submission is older than 60 s, one more is accepted,
    // and only one.
    clock.advance(std::time::Duration::from_secs(42));
    services.runs.submit("burst", &envelope).await.unwrap();
    assert!(matches!(
        services.runs.submit("burst", &envelope).await,
        Err(RuntimeError::TenantRateLimit { .. })
    ));
}

/// A tenant's retention in `registry/tenants.json` is laid over the
/// deployment's; the commit that ends a run stamps it, a run that waits
/// gets none.
#[test]
fn a_tenants_own_retention_wins_and_only_an_ended_run_expires() {
    use baton_core::state::run::RunStatus;
    let settings: baton_core::catalog::tenant_settings::TenantSettings =
        serde_json::from_value(serde_json::json!({"tenants": {"team-a": {"retentionDays": 365}}}))
            .unwrap();
    let retention = baton_runtime::services::RunRetention {
        every_tenant_days: 7,
        ..Default::default()
    }
    .with_tenant_settings(&settings);
    let now = baton_core::basics::instant::Instant::from_unix_millis(1_767_225_600_000);
    let day = std::time::Duration::from_secs(24 * 3600);
    assert_eq!(
        retention.retain_until("team-a", RunStatus::Completed, now),
        Some(now.plus(day * 365))
    );
    assert_eq!(
        retention.retain_until("team-b", RunStatus::Failed, now),
        Some(now.plus(day * 7))
    );
    for waiting in [
        RunStatus::Queued,
        RunStatus::Running,
        RunStatus::AwaitingHuman,
        RunStatus::AwaitingHitl,
        RunStatus::Paused,
    ] {
        assert_eq!(retention.retain_until("team-a", waiting, now), None);
    }
}
