//! Judge panels as plan nodes: the registry's `panel` executor (which
//! judges, how they decide) and a panel's durable progress in the run
//! state. The panel itself is `baton_judge::panel::Panel`, a state machine
//! without I/O; the engine (`engine::panel`) drives it one judge step at a
//! time.

use std::collections::{BTreeMap, BTreeSet};

use baton_judge::panel::Panel;
use baton_judge::request::{Judge, JudgmentRequest, PanelConfig, PanelRequest};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A capability whose executor is a judge panel (registry data). Either
/// the judges are named here (with `config`), or the whole panel request
/// (`{request, config}`, as `baton judge` takes it) arrives as the input facet
/// `requestFacet`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PanelExecutor {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub judges: Vec<Judge>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<PanelConfig>,
    /// Criteria every evaluation is judged against, before the envelope's
    /// `constraints.acceptanceCriteria`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub criteria: Vec<String>,
    /// Explicit weights by judge id (`weighted_average`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub weights: BTreeMap<String, f64>,
    /// The input facet that carries a whole panel request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_facet: Option<String>,
}

impl PanelExecutor {
    /// Checks the executor of a capability consuming `inputs` and producing
    /// `outputs`; an error is `(JSON path, message)`.
    pub fn check(&self, inputs: &[String], outputs: &[String]) -> Result<(), (String, String)> {
        let fail = |path: &str, message: String| Err((path.to_string(), message));
        if outputs.len() != 1 {
            return fail(
                "$.outputContract",
                "a panel produces exactly one facet (its evaluation)".into(),
            );
        }
        match (&self.request_facet, self.judges.is_empty()) {
            (Some(facet), true) => {
                if !inputs.contains(facet) {
                    return fail(
                        "$.panel.requestFacet",
                        format!("`{facet}` is not in the capability's inputContract"),
                    );
                }
                Ok(())
            }
            (Some(_), false) => fail(
                "$.panel.judges",
                "name the judges here or take the request from `requestFacet`, not both".into(),
            ),
            (None, true) => fail(
                "$.panel.judges",
                "a panel needs judges, or a `requestFacet` that carries them".into(),
            ),
            (None, false) => {
                let Some(config) = &self.config else {
                    return fail(
                        "$.panel.config",
                        "a panel with named judges needs its config".into(),
                    );
                };
                let probe = PanelRequest {
                    request: JudgmentRequest {
                        id: "check".into(),
                        content: "check".into(),
                        criteria: self.criteria.clone(),
                        selected_agents: self.judges.clone(),
                        requested_by: None,
                    },
                    config: config.clone(),
                    weights: self.weights.clone(),
                };
                let value = serde_json::to_value(&probe).map_err(|error| {
                    ("$.panel".to_string(), format!("cannot be encoded: {error}"))
                })?;
                PanelRequest::parse(&value).map(|_| ()).map_err(|error| {
                    (
                        error
                            .path
                            .replacen("$.request.selectedAgents", "$.panel.judges", 1)
                            .replacen("$.request", "$.panel", 1)
                            .replacen("$.", "$.panel.", 1),
                        error.message,
                    )
                })
            }
        }
    }

    /// The panel request for one evaluation: the request carried by the
    /// input facet, or the registry's judges over the node's inputs (their
    /// JSON, pretty-printed, is the content) and the criteria.
    pub fn request_for(
        &self,
        evaluation_id: &str,
        inputs: &Map<String, Value>,
        acceptance_criteria: &[String],
    ) -> Result<PanelRequest, crate::basics::error::Refusal> {
        if let Some(facet) = &self.request_facet {
            let carried = inputs
                .get(facet)
                .ok_or_else(|| format!("the input `{facet}` carries no panel request"))?;
            let mut request = PanelRequest::parse(carried)
                .map_err(|error| format!("input `{facet}`: {error}"))?;
            request
                .request
                .criteria
                .extend(acceptance_criteria.iter().cloned());
            return Ok(request);
        }
        let config = self
            .config
            .clone()
            .ok_or_else(|| "the panel has no config".to_string())?;
        let content = serde_json::to_string_pretty(inputs)
            .map_err(|error| format!("the inputs cannot be encoded: {error}"))?;
        let mut criteria = self.criteria.clone();
        criteria.extend(acceptance_criteria.iter().cloned());
        Ok(PanelRequest {
            request: JudgmentRequest {
                id: evaluation_id.to_string(),
                content,
                criteria,
                selected_agents: self.judges.clone(),
                requested_by: None,
            },
            config,
            weights: self.weights.clone(),
        })
    }
}

/// A panel node at work: the panel and the judges not heard from in its
/// current round (what each is asked is a run entry, `EntryKey::PanelRound`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PanelProgress {
    /// The node attempt the panel belongs to.
    pub attempt: u32,
    pub panel: Panel,
    pub pending: BTreeSet<String>,
}

impl PanelProgress {
    /// Whether `judge_id` still owes an answer for `round` of `attempt`.
    pub fn awaits(&self, attempt: u32, round: u32, judge_id: &str) -> bool {
        self.attempt == attempt && self.panel.round() == round && self.pending.contains(judge_id)
    }
}

/// A concluded panel's transcript, to publish where the deployment keeps
/// transcripts (an external ledger). The run's own event log always has
/// it: the verdict in `node_complete` carries the whole transcript.
#[derive(Debug, Clone, PartialEq)]
pub struct TranscriptPublication {
    /// `{runId}:{nodeId}:{attempt}`: the same for every retry of the step.
    pub idempotency_key: String,
    pub node_id: String,
    pub transcript: baton_judge::transcript::EvaluationTranscript,
}

/// The timer id of a panel round's `roundTimeout`.
pub fn round_timer_id(node_id: &str, attempt: u32, round: u32) -> String {
    format!("panel:{node_id}:{attempt}:{round}")
}

/// What an external ledger gave back for a published transcript: the
/// topic it is on, each message's transaction id, and where a person can
/// look at them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LedgerReceipt {
    pub topic_id: String,
    /// Message id → its transaction id (`hcsTxId`).
    pub message_transactions: BTreeMap<String, String>,
    /// The ledger explorer's base URL (`{url}/topic/{topicId}`,
    /// `{url}/transaction/{hcsTxId}`).
    pub explorer_url: Option<String>,
}

/// Writes `receipt` into every copy of the transcript first published
/// under `published_topic` inside `value`: the transcript's `topicId` and
/// `explorerUrl`, each message's `hcsTxId`, and any `topicId` beside it
/// (the panel's output and progress). The hash chain is untouched: a
/// message's hash does not cover its `hcsTxId`.
pub fn stamp_ledger_receipt(value: &mut Value, published_topic: &str, receipt: &LedgerReceipt) {
    match value {
        Value::Array(items) => {
            for item in items {
                stamp_ledger_receipt(item, published_topic, receipt);
            }
        }
        Value::Object(fields) => {
            let is_transcript = fields.get("topicId").and_then(Value::as_str)
                == Some(published_topic)
                && fields.get("rounds").is_some_and(Value::is_array);
            if fields.get("topicId").and_then(Value::as_str) == Some(published_topic) {
                fields.insert("topicId".into(), Value::String(receipt.topic_id.clone()));
            }
            if is_transcript {
                if let Some(url) = &receipt.explorer_url {
                    fields.insert("explorerUrl".into(), Value::String(url.clone()));
                }
                stamp_messages(fields, receipt);
                return;
            }
            for field in fields.values_mut() {
                stamp_ledger_receipt(field, published_topic, receipt);
            }
        }
        _ => {}
    }
}

fn stamp_messages(transcript: &mut Map<String, Value>, receipt: &LedgerReceipt) {
    let Some(Value::Array(rounds)) = transcript.get_mut("rounds") else {
        return;
    };
    for round in rounds {
        let Some(Value::Array(messages)) = round.get_mut("messages") else {
            continue;
        };
        for message in messages {
            let id = message
                .get("id")
                .and_then(Value::as_str)
                .map(str::to_string);
            if let (Some(id), Value::Object(fields)) = (id, message)
                && let Some(transaction) = receipt.message_transactions.get(&id)
            {
                fields.insert("hcsTxId".into(), Value::String(transaction.clone()));
            }
        }
    }
}
