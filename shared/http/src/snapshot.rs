//! The wire types of `GET /runs/{id}`: a redacted debug snapshot of a run,
//! its own shape (not the stored structs), so storage can change without
//! changing the API.

use std::collections::BTreeMap;

use baton_core::basics::redaction::redact;
use baton_core::contracts::diagnostics::DiagnosticsBundle;
use baton_core::planning::plan::PlanGraph;
use baton_core::state::delivered_quality::QualityReport;
use baton_core::state::run::{NodeStatus, RunState, TokenUsage};
use serde::Serialize;
use serde_json::Value;

#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunSnapshotResponse {
    pub ok: bool,
    pub run: RunSummary,
    pub output: Option<Value>,
    /// How the delivered output scored, and by whom (as `complete` said).
    pub quality: Option<QualityReport>,
    /// The reviewer's verdict per acceptance criterion of the delivered
    /// draft, when one gave it.
    pub acceptance_report: Option<Value>,
    /// The final bundle under the specification's names: `result` (the
    /// output), `quality` and `acceptance-report`. Aliases of `output`,
    /// `quality` and `acceptanceReport`; absent until the run completes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bundle: Option<FinalBundle>,
    /// Which node (and attempt, in which plan version) made each top-level
    /// property of the output.
    pub output_provenance: BTreeMap<String, OutputProvenance>,
    pub plan_versions: Vec<PlanVersionSummary>,
    pub latest_snapshot: Option<PlanSnapshot>,
    pub diagnostics: Option<DiagnosticsBundle>,
    pub nodes: BTreeMap<String, NodeLedgerEntry>,
}

/// The final bundle as the specification names it:
/// `{ result, quality, acceptance-report }`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct FinalBundle {
    pub result: Value,
    pub quality: Option<QualityReport>,
    #[serde(rename = "acceptance-report")]
    pub acceptance_report: Option<Value>,
}

#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureSummary {
    pub code: String,
    pub message: String,
}

#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunSummary {
    pub run_id: String,
    pub thread_id: String,
    pub correlation_id: String,
    /// The run's workflow name: `workflowName`, else the output schema's
    /// `title`, else `baton` (its trace's root span carries it too).
    pub workflow_name: String,
    /// The run's W3C trace id (its spans, when traces are exported, and
    /// every frame's `traceId`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    pub status: String,
    pub version: u64,
    pub plan_version: Option<u32>,
    pub created_at: String,
    pub updated_at: String,
    pub failure: Option<FailureSummary>,
    /// The envelope with secret values redacted.
    pub envelope: Value,
    /// `sha256:` and the hex SHA-256 of the output contract's JSON Schema
    /// text, as submitted: the exact contract the run was held to.
    pub schema_hash: String,
    /// The user the submitting request named (`X-Baton-User`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub submitted_by: Option<String>,
    /// The registry facets the run's plans used, as they were when planned:
    /// each one's `metadata.version` and schema hash.
    pub facet_snapshot: BTreeMap<String, baton_core::records::audit::FacetStamp>,
    pub satisfaction_score: Option<f64>,
    pub observed_satisfaction: Option<f64>,
    /// The run this one was forked from (`POST /runs/{runId}/fork`):
    /// `{runId, at, reusedNodes}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<Value>,
    pub usage: UsageSummary,
    /// The approval request or clarifying question the run waits on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_request: Option<baton_core::records::governance::HitlRequest>,
    /// `runContext.hitlClarifications`: questions asked and their answers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hitl_clarifications: Vec<baton_core::records::governance::ClarificationEntry>,
    /// Durable timers the run waits for (task SLAs, `onTimeout` policies), by id.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub timers: std::collections::BTreeMap<String, baton_core::records::governance::Timer>,
    /// Completion notifications (the `callbackUrl` webhook, the event bus),
    /// by id: attempts, delivered or given up, the last error.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub notifications:
        std::collections::BTreeMap<String, baton_core::records::notifications::NotificationRecord>,
}

#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageSummary {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    /// Of `promptTokens`, served from the provider's prompt cache.
    pub cached_prompt_tokens: u64,
    /// What the priced model calls cost (the registry's `models.json`);
    /// absent when none was priced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// The run's totals split by what the calls were for: `planning`,
    /// `execution`, `review`, `judge`, `summary` (absent on a node's).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub by_operation: BTreeMap<String, OperationUsage>,
}

/// One operation's share of a run's usage.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperationUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl UsageSummary {
    fn of(usage: TokenUsage, cost_usd: Option<f64>) -> Self {
        UsageSummary {
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            total_tokens: usage.total(),
            cached_prompt_tokens: usage.cached_prompt_tokens,
            cost_usd: cost_usd.map(baton_core::catalog::model_catalog::round_cost),
            by_operation: BTreeMap::new(),
        }
    }

    /// A run's totals with their split by operation.
    fn of_run(run: &RunState) -> Self {
        UsageSummary {
            by_operation: run
                .usage_by_operation
                .iter()
                .map(|(operation, spend)| {
                    (
                        operation.as_str().to_string(),
                        OperationUsage {
                            prompt_tokens: spend.usage.prompt_tokens,
                            completion_tokens: spend.usage.completion_tokens,
                            total_tokens: spend.usage.total(),
                            cost_usd: spend
                                .cost_usd
                                .map(baton_core::catalog::model_catalog::round_cost),
                        },
                    )
                })
                .collect(),
            ..UsageSummary::of(run.total_usage(), run.total_cost_usd())
        }
    }
}

/// The node that made one property of a run's output.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OutputProvenance {
    pub node_id: String,
    pub capability_id: String,
    /// The node's attempt whose answer stands.
    pub attempt: u32,
    pub plan_version: u32,
}

#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanVersionSummary {
    pub version: u32,
    pub planner_runtime: String,
    pub planner_model: Option<String>,
    /// The version's nodes.
    pub node_ids: Vec<String>,
    /// The current version's nodes not yet completed (none for a version a
    /// newer one replaced).
    pub pending_node_ids: Vec<String>,
    /// When the version was put in force, and why (`initial`, or the
    /// replan's trigger kind with its node, policy and rationale); absent
    /// for runs stored before versions were recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<baton_core::records::audit::PlanVersionRecord>,
}

#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanSnapshot {
    pub version: u32,
    pub nodes: Value,
    pub edges: Value,
}

#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeLedgerEntry {
    pub status: NodeStatus,
    pub current_attempt: u32,
    /// The node's output with secret values redacted.
    pub output: Option<Value>,
    pub feedback: Value,
    pub error: Option<String>,
    pub usage: UsageSummary,
    /// The model that answered last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Human nodes: the signed-in user who answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<String>,
}

impl RunSnapshotResponse {
    /// The snapshot of `run`, its `superseded` plan versions (oldest
    /// first) listed before the current one.
    pub fn of(run: &RunState, version: u64, superseded: &[PlanGraph]) -> Self {
        let envelope = serde_json::to_value(&*run.envelope).unwrap_or(Value::Null);
        let summary = |plan: &PlanGraph, pending_node_ids: Vec<String>| PlanVersionSummary {
            version: plan.plan_version,
            planner_runtime: plan.planner_runtime.clone(),
            planner_model: plan.planner_model.clone(),
            node_ids: plan.nodes.iter().map(|node| node.node_id.clone()).collect(),
            pending_node_ids,
            history: run
                .plan_history
                .iter()
                .rev()
                .find(|record| record.version == plan.plan_version)
                .cloned(),
        };
        let plan_versions = superseded
            .iter()
            .map(|plan| summary(plan, Vec::new()))
            .chain(run.plan.iter().map(|plan| {
                summary(
                    plan,
                    run.nodes
                        .iter()
                        .filter(|(_, record)| !record.status().is_settled())
                        .map(|(node_id, _)| node_id.clone())
                        .collect(),
                )
            }))
            .collect();
        RunSnapshotResponse {
            ok: true,
            run: RunSummary {
                run_id: run.run_id.clone(),
                thread_id: run.thread_id.clone(),
                correlation_id: run.correlation_id.clone(),
                workflow_name: run.envelope.workflow_name().to_string(),
                trace_id: run.trace.map(|trace| trace.trace_id.to_string()),
                status: run.status().as_str().to_string(),
                version,
                plan_version: run.plan.as_ref().map(|plan| plan.plan_version),
                created_at: run.created_at.rfc3339(),
                updated_at: run.updated_at.rfc3339(),
                failure: run.failure.as_ref().map(|failure| FailureSummary {
                    code: failure.code.as_str().to_string(),
                    message: failure.message.clone(),
                }),
                envelope: redact(&envelope),
                schema_hash: format!(
                    "sha256:{}",
                    baton_core::basics::schema::schema_key_of(&run.envelope.output_contract.schema)
                ),
                facet_snapshot: (*run.facet_snapshot).clone(),
                submitted_by: run.submitted_by.clone(),
                satisfaction_score: run
                    .plan_diagnostics
                    .as_ref()
                    .map(|bundle| bundle.satisfaction_score),
                observed_satisfaction: run.observed_satisfaction,
                forked_from: run
                    .forked_from
                    .as_ref()
                    .and_then(|origin| serde_json::to_value(origin).ok()),
                usage: UsageSummary::of_run(run),
                pending_request: run.governance.pending_request().cloned(),
                hitl_clarifications: run.governance.clarifications.clone(),
                timers: run.governance.timers.clone(),
                notifications: run.notifications.clone(),
            },
            output: run.output.as_ref().map(redact),
            quality: run.quality.as_deref().cloned(),
            acceptance_report: run.acceptance_report.as_deref().map(redact),
            bundle: run.output.as_ref().map(|output| FinalBundle {
                result: redact(output),
                quality: run.quality.as_deref().cloned(),
                acceptance_report: run.acceptance_report.as_deref().map(redact),
            }),
            output_provenance: output_provenance(run),
            plan_versions,
            latest_snapshot: run.plan.as_ref().map(|plan| PlanSnapshot {
                version: plan.plan_version,
                nodes: serde_json::to_value(&plan.nodes).unwrap_or(Value::Null),
                edges: serde_json::to_value(&plan.edges).unwrap_or(Value::Null),
            }),
            diagnostics: run.plan_diagnostics.as_deref().cloned(),
            nodes: run
                .nodes
                .iter()
                .map(|(node_id, record)| {
                    (
                        node_id.clone(),
                        NodeLedgerEntry {
                            status: record.status(),
                            current_attempt: record.current_attempt,
                            output: record.output.as_deref().map(redact),
                            feedback: serde_json::to_value(&record.feedback).unwrap_or(Value::Null),
                            error: record.error.clone(),
                            usage: UsageSummary::of(record.usage, record.cost_usd),
                            model: record.model.clone(),
                            answered_by: record.answered_by.clone(),
                        },
                    )
                })
                .collect(),
        }
    }
}

/// For each top-level property of the run's output, the node of the plan
/// in force that made it last, with the attempt whose answer stands.
fn output_provenance(run: &RunState) -> BTreeMap<String, OutputProvenance> {
    let (Some(output), Some(plan)) = (
        run.output.as_ref().and_then(Value::as_object),
        run.plan.as_ref(),
    ) else {
        return BTreeMap::new();
    };
    output
        .keys()
        .filter_map(|property| {
            let node = plan.final_producer_of(property)?;
            let record = run.nodes.get(&node.node_id)?;
            Some((
                property.clone(),
                OutputProvenance {
                    node_id: node.node_id.clone(),
                    capability_id: node.capability_id.clone(),
                    attempt: record.current_attempt,
                    plan_version: plan.plan_version,
                },
            ))
        })
        .collect()
}
