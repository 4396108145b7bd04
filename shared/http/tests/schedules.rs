//! Schedules over the HTTP API on a real socket, fired by `baton serve`'s
//! keeper (`workers::keep_schedules_until` at its shipped tick) under a
//! clock the test moves forward a minute at a time, and by the ingest
//! queue's use case (a fire EventBridge Scheduler delivered, delivered
//! again). The engine is real on the in-memory adapters; no worker runs,
//! so the runs a fire starts stay queued where the test reads them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::time::Duration;

use baton_http::auth::token_digest_hex;
use baton_http::{ApiState, HttpSettings, TokenAuthenticator, router};
use baton_runtime::clock::OffsetClock;
use baton_runtime::services::{OrchestratorSettings, Services};
use baton_test_support::TestServices;
use serde_json::{Value, json};

const ACME_TOKEN: &str = "acme-token";
const GLOBEX_TOKEN: &str = "globex-token";

struct ScheduleApi {
    base: String,
    client: reqwest::Client,
    services: Services,
    clock: Arc<OffsetClock>,
    _server: tokio::task::JoinHandle<()>,
}

async fn start(settings: OrchestratorSettings) -> ScheduleApi {
    let clock = Arc::new(OffsetClock::new());
    // The model is never called: no worker performs the runs' steps.
    let model = scripted_llm::ScriptedLlmServer::start().await.unwrap();
    let provider = baton_llm::OpenAiCompatibleProvider::new(
        baton_llm::OpenAiCompatibleConfig::new(model.base_url(), "scripted", None),
    )
    .unwrap();
    let built = TestServices::with_model(Arc::new(provider))
        .clock(clock.clone())
        .settings(settings)
        .worker_id("schedules-test")
        .build();
    let tokens = format!(
        "acme:{},globex:{}",
        token_digest_hex(ACME_TOKEN),
        token_digest_hex(GLOBEX_TOKEN)
    );
    let state = ApiState {
        runs: built.services.runs.clone(),
        capabilities: built.services.capabilities.clone(),
        people: built.services.people.clone(),
        authenticator: Arc::new(TokenAuthenticator::from_configuration(&tokens).unwrap()),
        settings: HttpSettings::default(),
        streams: built.services.streams.clone(),
        schedules: built.services.schedules.clone(),
        audit: built.services.audit.clone(),
        request_keys: built.services.request_keys.clone(),
        memory: built.services.memory.clone(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/api/v1/flex", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        axum::serve(listener, router(state)).await.unwrap();
    });
    ScheduleApi {
        base,
        client: reqwest::Client::new(),
        services: built.services,
        clock,
        _server: server,
    }
}

impl ScheduleApi {
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// The tenant's runs, oldest first, with the idempotency key and
    /// objective each was submitted with.
    async fn runs_of(&self, tenant: &str) -> Vec<(String, Option<String>, String)> {
        let page = self
            .services
            .runs
            .list(
                tenant,
                &baton_core::state::listing::RunListQuery {
                    limit: 100,
                    ..baton_core::state::listing::RunListQuery::default()
                },
            )
            .await
            .unwrap();
        let mut runs = Vec::new();
        for listed in page.runs.iter().rev() {
            let stored = self
                .services
                .runs
                .load(tenant, &listed.run_id)
                .await
                .unwrap()
                .unwrap();
            runs.push((
                listed.run_id.clone(),
                stored.state.envelope.idempotency_key.clone(),
                stored.state.envelope.objective.clone(),
            ));
        }
        runs
    }
}

fn scheduled_envelope() -> Value {
    json!({
        "objective": "Summarise yesterday's orders",
        "inputs": {"window": "1d"},
        "outputContract": {"schema": {"type": "object", "required": ["summary"], "properties": {"summary": {"type": "string"}}}}
    })
}

/// Waits (real time) until `condition` holds of the tenant's run count.
async fn wait_for_runs(api: &ScheduleApi, tenant: &str, count: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if api.runs_of(tenant).await.len() >= count {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {count} runs after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_schedule_fires_twice_under_a_fast_clock_and_a_redelivered_fire_makes_no_third_run() {
    let api = start(OrchestratorSettings::default()).await;
    let (status, schedule) = api
        .send(
            reqwest::Method::POST,
            "/schedules",
            ACME_TOKEN,
            Some(json!({
                "expression": "rate(1 minute)",
                "timezone": "Europe/Paris",
                "envelope": scheduled_envelope(),
                "missedFires": "skip",
                "description": "orders digest"
            })),
        )
        .await;
    assert_eq!(status, 201, "{schedule}");
    let schedule_id = schedule["scheduleId"].as_str().unwrap().to_string();
    assert_eq!(schedule["state"], "active");
    assert_eq!(schedule["trigger"], "store");
    let first_fire = baton_core::basics::instant::Instant::parse_rfc3339(
        schedule["nextFireAt"].as_str().unwrap(),
    )
    .unwrap();

    // `serve`'s keeper, at the tick serve ships.
    let schedules = api.services.schedules.clone();
    let keeper = tokio::spawn(async move {
        baton_runtime::workers::keep_schedules_until(
            &schedules,
            baton_runtime::workers::SCHEDULE_TICK,
            std::future::pending(),
        )
        .await;
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        api.runs_of("acme").await.is_empty(),
        "nothing fires before its time"
    );

    // Two minutes pass, one at a time.
    api.clock.advance(Duration::from_secs(61));
    wait_for_runs(&api, "acme", 1).await;
    api.clock.advance(Duration::from_secs(60));
    wait_for_runs(&api, "acme", 2).await;
    // A third tick within the same minute starts nothing.
    tokio::time::sleep(baton_runtime::workers::SCHEDULE_TICK + Duration::from_secs(1)).await;
    let runs = api.runs_of("acme").await;
    assert_eq!(runs.len(), 2, "{runs:?}");
    let keys: Vec<String> = runs
        .iter()
        .map(|(_, key, _)| key.clone().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            format!("schedule:{schedule_id}:{}", first_fire.rfc3339()),
            format!(
                "schedule:{schedule_id}:{}",
                first_fire.plus(Duration::from_secs(60)).rfc3339()
            ),
        ],
        "each fire's run carries the schedule and its fire time as its key"
    );
    assert!(
        runs.iter()
            .all(|(_, _, objective)| objective == "Summarise yesterday's orders"),
        "every run has the schedule's envelope: {runs:?}"
    );

    // The first fire delivered again (EventBridge Scheduler through the
    // ingest queue delivers at least once): no third run.
    let redelivered = json!({
        "tenantId": "acme",
        "scheduleFire": {"scheduleId": schedule_id, "fireTime": first_fire.rfc3339()}
    })
    .to_string();
    let failed = baton_runtime::workers::process_ingest_batch(
        &api.services.runs,
        &api.services.schedules,
        vec![
            ("redelivery-1".into(), redelivered.clone()),
            ("redelivery-2".into(), redelivered),
        ],
    )
    .await;
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(
        api.runs_of("acme").await.len(),
        2,
        "a redelivered fire makes no third run"
    );

    let (status, kept) = api
        .send(
            reqwest::Method::GET,
            &format!("/schedules/{schedule_id}"),
            ACME_TOKEN,
            None,
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(kept["fires"], 2);
    assert_eq!(kept["lastRunId"], json!(runs[1].0));
    // Another tenant neither sees nor touches it.
    let (status, refused) = api
        .send(
            reqwest::Method::GET,
            &format!("/schedules/{schedule_id}"),
            GLOBEX_TOKEN,
            None,
        )
        .await;
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (404, Some("schedule_not_found"))
    );
    let (status, listed) = api
        .send(reqwest::Method::GET, "/schedules", GLOBEX_TOKEN, None)
        .await;
    assert_eq!(
        (status, listed["schedules"].as_array().map(Vec::len)),
        (200, Some(0))
    );

    // Paused, it does not fire; resumed, it fires a minute after the resume.
    let (status, paused) = api
        .send(
            reqwest::Method::POST,
            &format!("/schedules/{schedule_id}/pause"),
            ACME_TOKEN,
            None,
        )
        .await;
    assert_eq!((status, paused["state"].as_str()), (200, Some("paused")));
    api.clock.advance(Duration::from_secs(180));
    tokio::time::sleep(baton_runtime::workers::SCHEDULE_TICK + Duration::from_secs(1)).await;
    assert_eq!(
        api.runs_of("acme").await.len(),
        2,
        "a paused schedule does not fire"
    );
    let (status, resumed) = api
        .send(
            reqwest::Method::POST,
            &format!("/schedules/{schedule_id}/resume"),
            ACME_TOKEN,
            None,
        )
        .await;
    assert_eq!((status, resumed["state"].as_str()), (200, Some("active")));
    let at = |field: &str| {
        baton_core::basics::instant::Instant::parse_rfc3339(resumed[field].as_str().unwrap())
            .unwrap()
    };
    assert_eq!(
        at("nextFireAt"),
        at("anchorAt").plus(Duration::from_secs(60)),
        "a resumed rate counts from the resume: {resumed}"
    );
    api.clock.advance(Duration::from_secs(61));
    wait_for_runs(&api, "acme", 3).await;

    let (status, _) = api
        .send(
            reqwest::Method::DELETE,
            &format!("/schedules/{schedule_id}"),
            ACME_TOKEN,
            None,
        )
        .await;
    assert_eq!(status, 204);
    api.clock.advance(Duration::from_secs(120));
    tokio::time::sleep(baton_runtime::workers::SCHEDULE_TICK + Duration::from_secs(1)).await;
    assert_eq!(
        api.runs_of("acme").await.len(),
        3,
        "a deleted schedule does not fire"
    );
    keeper.abort();
}

#[tokio::test]
async fn a_wrong_schedule_is_refused_naming_its_json_path() {
    let api = start(OrchestratorSettings {
        max_schedules_per_tenant: 1,
        ..OrchestratorSettings::default()
    })
    .await;
    let with = |field: &str, value: Value| {
        let mut body = json!({"expression": "rate(5 minutes)", "envelope": scheduled_envelope()});
        body[field] = value;
        body
    };
    let mut without_objective = scheduled_envelope();
    without_objective
        .as_object_mut()
        .unwrap()
        .remove("objective");
    let mut keyed = scheduled_envelope();
    keyed["idempotencyKey"] = json!("mine");
    for (body, status, code, path) in [
        (
            with("expression", json!("every morning")),
            422,
            "invalid_schedule",
            "$.expression",
        ),
        (
            with("expression", json!("cron(0 8 * * *)")),
            422,
            "invalid_schedule",
            "$.expression",
        ),
        (
            with("timezone", json!("Mars/Olympus")),
            422,
            "invalid_schedule",
            "$.timezone",
        ),
        (
            with("missedFires", json!("twice")),
            422,
            "invalid_schedule",
            "$.missedFires",
        ),
        (
            with("envelope", without_objective),
            422,
            "invalid_schedule",
            "$.envelope.objective",
        ),
        (
            with("envelope", keyed),
            422,
            "invalid_schedule",
            "$.envelope.idempotencyKey",
        ),
        (
            json!({"envelope": scheduled_envelope()}),
            422,
            "invalid_schedule",
            "$.expression",
        ),
        (
            with("color", json!("blue")),
            422,
            "invalid_schedule",
            "$.color",
        ),
        (json!([1, 2]), 422, "invalid_schedule", "$"),
    ] {
        let (got, error) = api
            .send(
                reqwest::Method::POST,
                "/schedules",
                ACME_TOKEN,
                Some(body.clone()),
            )
            .await;
        assert_eq!(got, status, "{body}: {error}");
        assert_eq!(error["error"]["code"], code, "{body}: {error}");
        assert_eq!(error["error"]["details"]["path"], path, "{body}: {error}");
    }
    let response = api
        .client
        .post(format!("{}/schedules", api.base))
        .bearer_auth(ACME_TOKEN)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let response = api
        .client
        .post(format!("{}/schedules", api.base))
        .json(&with("expression", json!("rate(1 hour)")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 401, "no token, no schedule");
    assert!(
        api.services
            .schedules
            .list("acme")
            .await
            .unwrap()
            .is_empty(),
        "nothing refused was kept"
    );

    // The tenant's limit (here 1): a second is a 409, another tenant's is kept.
    let (status, _) = api
        .send(
            reqwest::Method::POST,
            "/schedules",
            ACME_TOKEN,
            Some(with("expression", json!("cron(0 8 ? * MON-FRI *)"))),
        )
        .await;
    assert_eq!(status, 201);
    let (status, refused) = api
        .send(
            reqwest::Method::POST,
            "/schedules",
            ACME_TOKEN,
            Some(with("expression", json!("rate(1 day)"))),
        )
        .await;
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (409, Some("schedule_limit")),
        "{refused}"
    );
    assert_eq!(refused["error"]["details"]["limit"], 1);
    let (status, _) = api
        .send(
            reqwest::Method::POST,
            "/schedules",
            GLOBEX_TOKEN,
            Some(with("expression", json!("rate(1 day)"))),
        )
        .await;
    assert_eq!(status, 201);
    let (status, missing) = api
        .send(
            reqwest::Method::POST,
            "/schedules/sch_none/pause",
            ACME_TOKEN,
            None,
        )
        .await;
    assert_eq!(
        (status, missing["error"]["code"].as_str()),
        (404, Some("schedule_not_found"))
    );
}
