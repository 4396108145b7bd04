//! The orchestrator's counters, read off the frames every commit writes:
//! planner requests, rejections, generated and updated plans, plans an
//! agent drafted for review and their reviews (by verdict), policy
//! triggers (by action), approval and question requests (by kind) and their
//! resolutions (by decision), validation retries, runs ended (by status),
//! runs moved to a status (`run_status`, by status: `awaiting_hitl`,
//! `completed`, …),
//! ended runs' model tokens (by operation: planning, execution, review,
//! judge, summary), and a histogram of node durations by capability.
//!
//! [`ObservedRunStore`] wraps any `RunStore` and observes what it commits
//! (nothing is counted for a write that failed), so no service or engine
//! code counts anything; it also logs each durable lifecycle event as one
//! structured line (`lifecycle_log`) and, when a commit ends a run, hands
//! its root span to the trace exporter (`run_traces`). Two outputs: [`RunCounters::prometheus_text`] (the
//! `/metrics` endpoint of `baton serve`: the `metrics` crate's counters and
//! histogram, rendered by `metrics-exporter-prometheus`) and, per commit, CloudWatch
//! Embedded Metric Format lines ([`emf_lines`]) that a Lambda function
//! prints to stdout, where CloudWatch turns them into metrics. Every
//! counter the specification names has its name too (`metric_names`).

use crate::ports::NodeLeases;
use crate::ports::OutboxStore;
use crate::ports::RunLog;
use crate::ports::RunQueries;
use crate::ports::RunStore;
use std::sync::Arc;

use async_trait::async_trait;
use baton_core::basics::ids::RunKey;
use baton_core::basics::instant::Instant;
use baton_core::state::run::{RunState, StepMessage};
use baton_core::wire::event::{EventDraft, EventFrame, EventType};
use baton_core::wire::frame_payload::FramePayload;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusRecorder};
use serde_json::{Value, json};

use crate::error::StoreError;
use crate::observe::lifecycle_log::{lines_of, log_lines};
use crate::observe::metric_names;
use crate::observe::run_traces::{EndedRun, RunSpanExporter};
use crate::ports::{
    ClaimOutcome, CreateOutcome, NodeClaim, OutboxQuiet, QuietOutboxEntry, StepCommit, StoredRun,
};

/// The namespace of the EMF metrics.
pub const EMF_NAMESPACE: &str = "Baton";

/// Upper bounds (ms) of the node-duration histogram's buckets.
pub const DURATION_BUCKETS_MS: [u64; 10] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000,
];

/// A counter's label: its name and value.
pub type Label = (&'static str, String);

/// One thing a commit showed.
#[derive(Debug, Clone, PartialEq)]
pub enum Observation {
    /// A counter goes up by one: its name and label (`name`, `value`).
    Count {
        name: &'static str,
        label: Option<Label>,
    },
    /// A node took `millis` (from its start to its completion or failure).
    NodeDuration { capability: String, millis: u64 },
    /// A run ended having used `tokens` model tokens for `operation`
    /// (`planning`, `execution`, `review`, `judge`, `summary`).
    ModelTokens {
        operation: &'static str,
        tokens: u64,
    },
}

/// What `events` (committed for a run whose state is `state`, when the
/// commit carries it) count.
pub fn observations(state: Option<&RunState>, events: &[EventDraft]) -> Vec<Observation> {
    let count = |name, label: Option<Label>| Observation::Count { name, label };
    let text = |payload: &Option<FramePayload>, pointer: &str| {
        payload
            .as_ref()
            .and_then(|payload| payload.pointer(pointer))
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_string()
    };
    let mut seen = Vec::new();
    for event in events {
        match event.event_type {
            EventType::PlanRequested => seen.push(count("planner_requests", None)),
            EventType::PlanRejected => seen.push(count("planner_rejections", None)),
            EventType::PlanGenerated => seen.push(count("plans_generated", None)),
            EventType::PlanUpdated => seen.push(count("plans_updated", None)),
            EventType::PlanReadyForReview => seen.push(count("plans_ready_for_review", None)),
            EventType::PlanReview => seen.push(count(
                "plan_reviews",
                Some(("verdict", text(&event.payload, "/verdict"))),
            )),
            EventType::PolicyTriggered => seen.push(count(
                "policy_triggers",
                Some(("action", text(&event.payload, "/actionDetails/type"))),
            )),
            EventType::HitlRequest => seen.push(count(
                "hitl_requests",
                Some(("kind", text(&event.payload, "/kind"))),
            )),
            EventType::HitlResolved => seen.push(count(
                "hitl_resolved",
                Some(("decision", text(&event.payload, "/decision"))),
            )),
            EventType::ValidationError => {
                let node_output = text(&event.payload, "/scope") == "node_output";
                // A node's invalid answer is retried unless the same commit
                // fails the node.
                let node_failed = events.iter().any(|other| {
                    other.event_type == EventType::NodeError && other.node_id == event.node_id
                });
                if node_output && !node_failed {
                    seen.push(count("validation_retries", None));
                }
            }
            EventType::Complete => {
                seen.push(count("runs_ended", Some(("status", "completed".into()))));
                seen.extend(tokens_by_operation(state));
            }
            EventType::Error => {
                seen.push(count(
                    "runs_ended",
                    Some(("status", text(&event.payload, "/status"))),
                ));
                seen.extend(tokens_by_operation(state));
            }
            EventType::Metrics => {
                let (Some(node_id), Some(millis)) = (
                    event.node_id.as_deref(),
                    event
                        .payload
                        .as_ref()
                        .and_then(|payload| payload.get("durationMs"))
                        .and_then(Value::as_u64),
                ) else {
                    continue;
                };
                let capability = state
                    .and_then(|state| state.plan.as_ref())
                    .and_then(|plan| plan.node(node_id))
                    .map_or_else(|| "unknown".to_string(), |node| node.capability_id.clone());
                seen.push(Observation::NodeDuration { capability, millis });
            }
            _ => {}
        }
    }
    seen
}

/// An ended run's tokens by operation, counted once, when it ends.
fn tokens_by_operation(state: Option<&RunState>) -> Vec<Observation> {
    state
        .map(|state| {
            state
                .usage_by_operation
                .iter()
                .map(|(operation, spend)| Observation::ModelTokens {
                    operation: operation.as_str(),
                    tokens: spend.usage.total(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The counter of ended runs' model tokens, by operation.
const MODEL_TOKENS_METRIC: &str = "baton_model_tokens_total";

/// The name of the node-duration histogram.
const NODE_DURATION_METRIC: &str = "baton_node_duration_ms";

/// The process's counters since it started: a `metrics` recorder of its
/// own (not the process-global one, so two orchestrators in one process,
/// as in tests, count apart), rendered by `metrics-exporter-prometheus`.
pub struct RunCounters {
    recorder: PrometheusRecorder,
    /// When set, the only capability ids a label may carry: any other (a
    /// tenant's registration) is counted as `registered`, so the
    /// exposition never names one tenant's capabilities to another reader.
    named_capabilities: Option<std::collections::BTreeSet<String>>,
}

/// The label of a capability the counters do not name.
pub const UNNAMED_CAPABILITY_LABEL: &str = "registered";

impl Default for RunCounters {
    fn default() -> Self {
        let bounds: Vec<f64> = DURATION_BUCKETS_MS
            .iter()
            .map(|bound| *bound as f64)
            .collect();
        // The bounds are constant and not empty, which is all the builder checks.
        let flex_duration = metric_names::prometheus_name(metric_names::FLEX_NODE_DURATION, false);
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(NODE_DURATION_METRIC.into()), &bounds)
            .and_then(|builder| {
                builder.set_buckets_for_metric(Matcher::Full(flex_duration), &bounds)
            })
            .unwrap_or_else(|_| PrometheusBuilder::new());
        RunCounters {
            recorder: builder.build_recorder(),
            named_capabilities: None,
        }
    }
}

impl RunCounters {
    /// Counters whose labels name only `capabilities` (the registry
    /// files'); every other capability is `registered`.
    pub fn naming_only(capabilities: impl IntoIterator<Item = String>) -> Self {
        RunCounters {
            named_capabilities: Some(capabilities.into_iter().collect()),
            ..RunCounters::default()
        }
    }

    fn capability_label(&self, capability: &str) -> String {
        match &self.named_capabilities {
            Some(named) if !named.contains(capability) => UNNAMED_CAPABILITY_LABEL.to_string(),
            _ => capability.to_string(),
        }
    }

    pub fn record(&self, observations: &[Observation]) {
        metrics::with_local_recorder(&self.recorder, || {
            for observation in observations {
                match observation {
                    Observation::Count { name, label } => {
                        let alias = metric_names::flex_alias(name)
                            .map(|alias| metric_names::prometheus_name(alias, true));
                        for metric in std::iter::once(format!("baton_{name}_total")).chain(alias) {
                            match label {
                                Some((key, value)) => {
                                    metrics::counter!(metric, *key => value.clone()).increment(1)
                                }
                                None => metrics::counter!(metric).increment(1),
                            }
                        }
                    }
                    Observation::NodeDuration { capability, millis } => {
                        let label = self.capability_label(capability);
                        metrics::histogram!(NODE_DURATION_METRIC, "capability" => label.clone())
                            .record(*millis as f64);
                        metrics::histogram!(
                            metric_names::prometheus_name(metric_names::FLEX_NODE_DURATION, false),
                            "capabilityId" => label
                        )
                        .record(*millis as f64);
                    }
                    Observation::ModelTokens { operation, tokens } => {
                        metrics::counter!(MODEL_TOKENS_METRIC, "operation" => *operation)
                            .increment(*tokens);
                    }
                }
            }
        });
    }

    /// The counters in the Prometheus text exposition format.
    pub fn prometheus_text(&self) -> String {
        self.recorder.handle().render()
    }
}

fn camel(name: &str) -> String {
    name.split('_')
        .map(|word| {
            let mut chars = word.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// One CloudWatch EMF line per observation (`Baton` namespace; counters as
/// `Count`, durations as `Milliseconds` with the capability as dimension).
pub fn emf_lines(observations: &[Observation], now: Instant) -> Vec<String> {
    observations
        .iter()
        .map(|observation| {
            let alias = match observation {
                Observation::Count { name, .. } => metric_names::flex_alias(name),
                Observation::NodeDuration { .. } => Some(metric_names::FLEX_NODE_DURATION),
                Observation::ModelTokens { .. } => None,
            };
            let (metric, unit, value, dimension) = match observation {
                Observation::Count { name, label } => (
                    camel(name),
                    "Count",
                    json!(1),
                    label
                        .as_ref()
                        .map(|(key, value)| (key.to_string(), value.clone())),
                ),
                Observation::NodeDuration { capability, millis } => (
                    "NodeDuration".to_string(),
                    "Milliseconds",
                    json!(millis),
                    Some(("capability".to_string(), capability.clone())),
                ),
                Observation::ModelTokens { operation, tokens } => (
                    "ModelTokens".to_string(),
                    "Count",
                    json!(tokens),
                    Some(("operation".to_string(), operation.to_string())),
                ),
            };
            let dimensions: Vec<Vec<String>> = match &dimension {
                Some((key, _)) => vec![vec![key.clone()]],
                None => vec![vec![]],
            };
            let mut line = json!({
                "_aws": {
                    "Timestamp": now.unix_millis(),
                    "CloudWatchMetrics": [{
                        "Namespace": EMF_NAMESPACE,
                        "Dimensions": dimensions,
                        "Metrics": std::iter::once(metric.as_str())
                            .chain(alias)
                            .map(|name| json!({"Name": name, "Unit": unit}))
                            .collect::<Vec<_>>()
                    }]
                },
            });
            if let Some(alias) = alias {
                line[alias] = value.clone();
            }
            line[metric.as_str()] = value;
            if let Some((key, value)) = dimension {
                line[key.as_str()] = json!(value);
            }
            line.to_string()
        })
        .collect()
}

/// Where a commit's observations go besides the counters (a function
/// prints EMF lines).
pub type ObservationSink = Arc<dyn Fn(&[Observation]) + Send + Sync>;

/// A `RunStore` that counts what it commits.
pub struct ObservedRunStore {
    inner: Arc<dyn RunStore>,
    counters: Arc<RunCounters>,
    sink: Option<ObservationSink>,
    run_spans: Option<Arc<dyn RunSpanExporter>>,
}

impl ObservedRunStore {
    pub fn new(inner: Arc<dyn RunStore>, counters: Arc<RunCounters>) -> Self {
        ObservedRunStore {
            inner,
            counters,
            sink: None,
            run_spans: None,
        }
    }

    /// Also hands every commit's observations to `sink`.
    pub fn with_sink(mut self, sink: ObservationSink) -> Self {
        self.sink = Some(sink);
        self
    }

    /// Also hands each run's root span to `exporter` when a commit ends
    /// the run (`run_traces`).
    pub fn with_run_spans(mut self, exporter: Arc<dyn RunSpanExporter>) -> Self {
        self.run_spans = Some(exporter);
        self
    }

    /// Counts what a write that succeeded showed (read off its frames
    /// before the write took them, so none is copied).
    fn record(&self, seen: &[Observation]) {
        if seen.is_empty() {
            return;
        }
        self.counters.record(seen);
        if let Some(sink) = &self.sink {
            sink(seen);
        }
    }
}

#[async_trait]
impl RunLog for ObservedRunStore {
    async fn create_run_within(
        &self,
        state: &RunState,
        events: Vec<EventDraft>,
        outbox: Vec<StepMessage>,
        idempotency_key: Option<&str>,
        live_run_limit: Option<u64>,
    ) -> Result<CreateOutcome, StoreError> {
        let observed = observations(Some(state), &events);
        let lifecycle = lines_of(&state.tenant_id, &state.run_id, Some(state), &events);
        let outcome = self
            .inner
            .create_run_within(state, events, outbox, idempotency_key, live_run_limit)
            .await?;
        if outcome == CreateOutcome::Created {
            self.record(&observed);
            log_lines(lifecycle);
        }
        Ok(outcome)
    }

    async fn load_run(&self, key: RunKey<'_>) -> Result<Option<StoredRun>, StoreError> {
        self.inner.load_run(key).await
    }

    async fn commit_step(&self, key: RunKey<'_>, commit: StepCommit) -> Result<u64, StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        let mut observed = observations(Some(&commit.state), &commit.events);
        let status = commit.state.status();
        if status != commit.previous_status {
            observed.push(Observation::Count {
                name: "run_status",
                label: Some(("status", status.as_str().to_string())),
            });
        }
        let lifecycle = lines_of(tenant_id, run_id, Some(&commit.state), &commit.events);
        let ended = self
            .run_spans
            .as_ref()
            .and_then(|_| EndedRun::of_commit(&commit.state, &commit.events));
        let version = self.inner.commit_step(key, commit).await?;
        self.record(&observed);
        log_lines(lifecycle);
        if let (Some(spans), Some(ended)) = (&self.run_spans, ended) {
            spans.run_ended(&ended);
        }
        Ok(version)
    }

    async fn read_entries(
        &self,
        key: RunKey<'_>,
        prefix: &str,
    ) -> Result<Vec<baton_core::records::entries::RunEntry>, StoreError> {
        self.inner.read_entries(key, prefix).await
    }

    async fn append_events(
        &self,
        key: RunKey<'_>,
        events: Vec<EventDraft>,
    ) -> Result<u64, StoreError> {
        // Deltas count nothing (`observations` skips them).
        let observed = observations(None, &events);
        let sequence = self.inner.append_events(key, events).await?;
        self.record(&observed);
        Ok(sequence)
    }

    async fn read_events(
        &self,
        key: RunKey<'_>,
        after_sequence: u64,
        limit: usize,
    ) -> Result<Vec<EventFrame>, StoreError> {
        self.inner.read_events(key, after_sequence, limit).await
    }

    async fn last_sequence(&self, key: RunKey<'_>) -> Result<Option<u64>, StoreError> {
        self.inner.last_sequence(key).await
    }
}

#[async_trait]
impl NodeLeases for ObservedRunStore {
    async fn claim_node(
        &self,
        key: RunKey<'_>,
        claim: NodeClaim<'_>,
        events: Vec<EventDraft>,
    ) -> Result<ClaimOutcome, StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        let observed = observations(None, &events);
        let lifecycle = lines_of(tenant_id, run_id, None, &events);
        let outcome = self.inner.claim_node(key, claim, events).await?;
        if outcome == ClaimOutcome::Claimed {
            self.record(&observed);
            log_lines(lifecycle);
        }
        Ok(outcome)
    }

    async fn renew_claim(&self, key: RunKey<'_>, claim: NodeClaim<'_>) -> Result<bool, StoreError> {
        self.inner.renew_claim(key, claim).await
    }

    async fn run_holds_live_lease(
        &self,
        key: RunKey<'_>,
        now: Instant,
    ) -> Result<bool, StoreError> {
        self.inner.run_holds_live_lease(key, now).await
    }

    async fn release_claim(
        &self,
        key: RunKey<'_>,
        node_id: &str,
        attempt: u32,
        claimant: &str,
    ) -> Result<(), StoreError> {
        self.inner
            .release_claim(key, node_id, attempt, claimant)
            .await
    }
}

#[async_trait]
impl OutboxStore for ObservedRunStore {
    async fn pending_outbox(&self, key: RunKey<'_>) -> Result<Vec<StepMessage>, StoreError> {
        self.inner.pending_outbox(key).await
    }

    async fn mark_outbox_quiet(
        &self,
        key: RunKey<'_>,
        message_ids: &[String],
        quiet: OutboxQuiet,
    ) -> Result<(), StoreError> {
        self.inner.mark_outbox_quiet(key, message_ids, quiet).await
    }

    async fn quiet_outbox(
        &self,
        quiet_before: Instant,
        limit: usize,
    ) -> Result<Vec<QuietOutboxEntry>, StoreError> {
        self.inner.quiet_outbox(quiet_before, limit).await
    }
}

#[async_trait]
impl RunQueries for ObservedRunStore {
    async fn live_runs(&self, tenant_id: &str) -> Result<u64, StoreError> {
        self.inner.live_runs(tenant_id).await
    }

    async fn list_runs(
        &self,
        tenant_id: &str,
        query: &baton_core::state::listing::RunListQuery,
    ) -> Result<baton_core::state::listing::RunListPage, StoreError> {
        self.inner.list_runs(tenant_id, query).await
    }

    async fn runs_awaiting_human(&self, tenant_id: &str) -> Result<Vec<RunState>, StoreError> {
        self.inner.runs_awaiting_human(tenant_id).await
    }

    async fn pending_tasks(
        &self,
        tenant_id: &str,
        capability_id: Option<&str>,
    ) -> Result<Vec<baton_core::state::tasks::HumanTask>, StoreError> {
        self.inner.pending_tasks(tenant_id, capability_id).await
    }

    async fn pending_requests(
        &self,
        tenant_id: &str,
    ) -> Result<Vec<baton_core::state::tasks::PendingRequest>, StoreError> {
        self.inner.pending_requests(tenant_id).await
    }
}
