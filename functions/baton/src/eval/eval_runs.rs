//! Where `baton eval --api URL` runs an example: against a deployed API
//! (`POST /api/v1/flex/runs`, then its snapshot polled until the run
//! settles; cancelled, `POST …/cancel`, when it has not settled within its
//! example's limit). The embedded default is the runtime's
//! `EmbeddedExampleRuns`.
//! Either way the example ends as a `FinishedRun` or a failed check naming
//! the step that failed.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use baton_evaluation::results::Tokens;
use baton_runtime::ports::evaluation_ports::{ExampleRuns, FinishedRun, NotFinished};
use serde_json::Value;

/// How often a run not yet settled is looked at again.
const POLL_EVERY: Duration = Duration::from_millis(200);

/// Examples run on a deployed API.
pub struct ApiExampleRuns {
    pub client: reqwest::Client,
    /// The API's base URL, without the trailing slash.
    pub base: String,
    pub token: Option<String>,
}

#[async_trait]
impl ExampleRuns for ApiExampleRuns {
    fn api(&self) -> Option<String> {
        Some(self.base.clone())
    }

    async fn run(&self, envelope: &Value, limit: Duration) -> Result<FinishedRun, NotFinished> {
        run_remote(
            &self.client,
            &self.base,
            self.token.as_deref(),
            envelope,
            limit,
        )
        .await
    }
}

fn not_finished(run_id: Option<String>, check: &str, detail: impl Into<String>) -> NotFinished {
    NotFinished::new(run_id, check, detail)
}

fn authorized(request: reqwest::RequestBuilder, token: Option<&str>) -> reqwest::RequestBuilder {
    match token {
        Some(token) => request.bearer_auth(token),
        None => request,
    }
}

/// The statuses a run stops at on its own (`RunStatus::is_settled`).
fn settled(status: &str) -> bool {
    baton_core::state::run::RunStatus::parse(status).is_some_and(|status| status.is_settled())
}

async fn run_remote(
    client: &reqwest::Client,
    base: &str,
    token: Option<&str>,
    envelope: &Value,
    limit: Duration,
) -> Result<FinishedRun, NotFinished> {
    let started = Instant::now();
    let answer = authorized(client.post(format!("{base}/api/v1/flex/runs")), token)
        .json(envelope)
        .send()
        .await
        .map_err(|error| not_finished(None, "submitted", format!("{base}: {error}")))?;
    let status = answer.status();
    let body: Value = answer.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        return Err(not_finished(
            None,
            "submitted",
            format!("HTTP {status}: {body}"),
        ));
    }
    let Some(run_id) = body["runId"].as_str().map(str::to_string) else {
        return Err(not_finished(
            None,
            "submitted",
            format!("no runId in {body}"),
        ));
    };
    let url = format!("{base}/api/v1/flex/runs/{run_id}");
    loop {
        let snapshot: Value = match authorized(client.get(&url), token).send().await {
            Ok(answer) if answer.status().is_success() => {
                answer.json().await.unwrap_or(Value::Null)
            }
            Ok(answer) => {
                return Err(not_finished(
                    Some(run_id),
                    "loaded",
                    format!("GET {url}: HTTP {}", answer.status()),
                ));
            }
            Err(error) => {
                return Err(not_finished(
                    Some(run_id),
                    "loaded",
                    format!("GET {url}: {error}"),
                ));
            }
        };
        let status = snapshot["run"]["status"].as_str().unwrap_or_default();
        if settled(status) {
            let usage = &snapshot["run"]["usage"];
            return Ok(FinishedRun {
                status: status.to_string(),
                output: snapshot["output"].clone(),
                cost_usd: usage["costUsd"].as_f64(),
                tokens: Tokens {
                    prompt: usage["promptTokens"].as_u64().unwrap_or(0),
                    completion: usage["completionTokens"].as_u64().unwrap_or(0),
                },
                duration_ms: started.elapsed().as_millis() as u64,
                model_by_node: snapshot["nodes"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter_map(|(node, entry)| {
                        Some((node.clone(), entry["model"].as_str()?.to_string()))
                    })
                    .collect(),
                run_id,
            });
        }
        if started.elapsed() > limit {
            // Cancelled, not left spending the tenant's budget.
            let cancel_url = format!("{url}/cancel");
            let cancelled = match authorized(client.post(&cancel_url), token).send().await {
                Ok(answer) if answer.status().is_success() => "; it was cancelled".to_string(),
                Ok(answer) => format!("; POST {cancel_url}: HTTP {}", answer.status()),
                Err(error) => format!("; POST {cancel_url}: {error}"),
            };
            return Err(not_finished(
                Some(run_id),
                "settled",
                format!(
                    "the run had not settled after {} s{cancelled}",
                    limit.as_secs()
                ),
            ));
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}
