//! Judge panel evaluations as runs: a caller's panel request becomes a run
//! whose one node is the registry's request-carrying panel capability, so an
//! evaluation is durable (one step per judge), streamed and stored like any
//! run. The registry names the facets; nothing here does.

use baton_core::state::run::{RunFailure, RunStatus};
use baton_judge::request::PanelRequest;
use serde_json::{Value, json};

use super::{RunService, SubmittedRun};
use crate::error::RuntimeError;

/// The registry's capability that runs a caller's panel request.
#[derive(Debug, Clone, PartialEq)]
pub struct PanelEntry {
    pub capability_id: String,
    /// The input facet carrying the request.
    pub request_facet: String,
    /// The output facet carrying the evaluation.
    pub verdict_facet: String,
}

/// A stored evaluation as a caller sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct EvaluationView {
    pub status: RunStatus,
    /// The panel's `OrchestratorOutput`, once the panel concluded.
    pub verdict: Option<Value>,
    pub failure: Option<RunFailure>,
}

impl RunService {
    /// The capability that takes whole panel requests, when the registry
    /// has one (the first by id).
    pub fn panel_entry(&self) -> Option<PanelEntry> {
        self.registry.capabilities().find_map(|capability| {
            let panel = capability.panel.as_ref()?;
            Some(PanelEntry {
                capability_id: capability.capability_id.clone(),
                request_facet: panel.request_facet.clone()?,
                verdict_facet: capability.output_contract.first()?.clone(),
            })
        })
    }

    /// Starts an evaluation of `request` (already parsed from `body`, the
    /// caller's JSON) through `entry`: a run asking for the verdict facet.
    pub async fn submit_evaluation(
        &self,
        tenant_id: &str,
        entry: &PanelEntry,
        request: &PanelRequest,
        body: &Value,
    ) -> Result<SubmittedRun, RuntimeError> {
        self.submit_evaluation_once(tenant_id, entry, request, body, None)
            .await
    }

    /// [`Self::submit_evaluation`] under an idempotency key: submitted
    /// again with the same key, it answers the same run.
    pub async fn submit_evaluation_once(
        &self,
        tenant_id: &str,
        entry: &PanelEntry,
        request: &PanelRequest,
        body: &Value,
        idempotency_key: Option<&str>,
    ) -> Result<SubmittedRun, RuntimeError> {
        // A judge's model is the catalog's: a name it lacks is refused here,
        // not left to the default model.
        baton_core::planning::model_choice::check_judge_models(self.registry.models(), request)
            .map_err(|(path, message)| RuntimeError::InvalidInput { path, message })?;
        let verdict = &entry.verdict_facet;
        let envelope = json!({
            "objective": format!(
                "Evaluate `{}` with a panel of {} judges.",
                request.request.id,
                request.request.selected_agents.len()
            ),
            "inputs": { entry.request_facet.clone(): body },
            "policies": {"planner": {"selection": {"require": [entry.capability_id]}}},
            "outputContract": {"schema": {
                "type": "object",
                "required": [verdict],
                "properties": { verdict.clone(): {"type": "object"} }
            }},
            "metadata": {"evaluationRequestId": request.request.id}
        });
        let mut envelope = envelope;
        if let Some(key) = idempotency_key {
            envelope["idempotencyKey"] = Value::String(key.to_string());
        }
        self.submit(tenant_id, &envelope).await
    }

    /// The evaluation run `run_id` of `tenant_id`: None when there is no
    /// such run or it is not an evaluation.
    pub async fn evaluation(
        &self,
        tenant_id: &str,
        run_id: &str,
    ) -> Result<Option<EvaluationView>, RuntimeError> {
        let Some(stored) = self.load(tenant_id, run_id).await? else {
            return Ok(None);
        };
        let state = stored.state;
        let Some(entry) = self.panel_entry() else {
            return Ok(None);
        };
        if !state.envelope.inputs.contains_key(&entry.request_facet) {
            return Ok(None);
        }
        let verdict = state
            .output
            .as_ref()
            .and_then(|output| output.get(&entry.verdict_facet))
            .cloned();
        Ok(Some(EvaluationView {
            status: state.status(),
            verdict,
            failure: state.failure,
        }))
    }
}
