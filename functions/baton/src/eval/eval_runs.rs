//! Where `baton eval` runs an example: on the embedded default (the
//! process's own services and step worker) or against a deployed API
//! (`--api URL`: `POST /api/v1/flex/runs`, then its snapshot polled until
//! the run settles). Either way the example ends as a [`FinishedRun`] or a
//! failed check naming the step that failed.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use baton_evaluation::results::{Check, Tokens};
use baton_runtime::services::Services;
use serde_json::Value;

/// How often a run not yet settled is looked at again.
const POLL_EVERY: Duration = Duration::from_millis(50);

/// A settled run, as the checks need it.
pub struct FinishedRun {
    pub run_id: String,
    pub status: String,
    pub output: Value,
    pub cost_usd: Option<f64>,
    pub tokens: Tokens,
    pub duration_ms: u64,
    pub model_by_node: BTreeMap<String, String>,
}

/// An example that never settled: its run id when it had one, and why.
pub struct NotFinished {
    pub run_id: Option<String>,
    pub failed: Check,
}

/// Where examples run.
pub enum ExampleRunner {
    /// This process's services, the runs submitted as `tenant`'s.
    Embedded { services: Services, tenant: String },
    Api {
        client: reqwest::Client,
        /// The API's base URL, without the trailing slash.
        base: String,
        token: Option<String>,
    },
}

impl ExampleRunner {
    /// The API's base URL when the runs are remote (results lines name it).
    pub fn api(&self) -> Option<String> {
        match self {
            Self::Embedded { .. } => None,
            Self::Api { base, .. } => Some(base.clone()),
        }
    }

    /// Runs one envelope to where it settles, waiting at most `limit`.
    pub async fn run(&self, envelope: &Value, limit: Duration) -> Result<FinishedRun, NotFinished> {
        match self {
            Self::Embedded { services, tenant } => {
                run_embedded(services, tenant, envelope, limit).await
            }
            Self::Api {
                client,
                base,
                token,
            } => run_remote(client, base, token.as_deref(), envelope, limit).await,
        }
    }
}

fn not_finished(run_id: Option<String>, check: &str, detail: impl Into<String>) -> NotFinished {
    NotFinished {
        run_id,
        failed: Check::new(check, false, detail),
    }
}

async fn run_embedded(
    services: &Services,
    tenant: &str,
    envelope: &Value,
    limit: Duration,
) -> Result<FinishedRun, NotFinished> {
    let started = Instant::now();
    let submitted = services
        .runs
        .submit(tenant, envelope)
        .await
        .map_err(|error| not_finished(None, "submitted", error.to_string()))?;
    let run_id = submitted.run_id;
    loop {
        let stored = services
            .runs
            .load(tenant, &run_id)
            .await
            .map_err(|error| not_finished(Some(run_id.clone()), "loaded", error.to_string()))?;
        match stored {
            Some(stored) if stored.state.status.is_settled() => {
                let state = stored.state;
                let usage = state.total_usage();
                return Ok(FinishedRun {
                    status: state.status.as_str().to_string(),
                    output: state.output.clone().unwrap_or(Value::Null),
                    cost_usd: state.total_cost_usd(),
                    tokens: Tokens {
                        prompt: usage.prompt_tokens,
                        completion: usage.completion_tokens,
                    },
                    duration_ms: started.elapsed().as_millis() as u64,
                    model_by_node: state
                        .nodes
                        .iter()
                        .filter_map(|(node, record)| {
                            record
                                .model
                                .as_ref()
                                .map(|model| (node.clone(), model.to_string()))
                        })
                        .collect(),
                    run_id,
                });
            }
            _ if started.elapsed() > limit => {
                return Err(not_finished(
                    Some(run_id),
                    "settled",
                    format!("the run had not settled after {} s", limit.as_secs()),
                ));
            }
            _ => tokio::time::sleep(POLL_EVERY).await,
        }
    }
}

fn authorized(request: reqwest::RequestBuilder, token: Option<&str>) -> reqwest::RequestBuilder {
    match token {
        Some(token) => request.bearer_auth(token),
        None => request,
    }
}

/// The statuses a run stops at on its own (`RunStatus::is_settled`).
fn settled(status: &str) -> bool {
    baton_core::run::RunStatus::parse(status).is_some_and(|status| status.is_settled())
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
            return Err(not_finished(
                Some(run_id),
                "settled",
                format!("the run had not settled after {} s", limit.as_secs()),
            ));
        }
        tokio::time::sleep(POLL_EVERY * 4).await;
    }
}
