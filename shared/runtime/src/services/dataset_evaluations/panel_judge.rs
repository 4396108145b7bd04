//! The judge of a dataset's examples: a panel request (its judges,
//! criteria and configuration; its `content` replaced per example) run in
//! process by [`PanelRunner`], each judge through its catalog model or the
//! default model given. Each panel's whole output, with its hash-chained
//! transcript, goes to a [`TranscriptShelf`].

use std::sync::Arc;

use async_trait::async_trait;
use baton_core::catalog::registry::Registry;
use baton_evaluation::checks::{JudgeFailure, judge_request_for};
use baton_evaluation::results::JudgeOutcome;
use baton_judge::panel::PanelOutput;
use baton_judge::request::PanelRequest;
use serde_json::Value;

use crate::models::panels::PanelRunner;
use crate::ports::evaluation_ports::{ExampleJudge, TranscriptShelf};
use crate::ports::{Clock, LlmProvider};

/// A panel ready to judge examples.
pub struct PanelJudge {
    template: Value,
    runner: PanelRunner,
    shelf: Arc<dyn TranscriptShelf>,
}

impl PanelJudge {
    /// Checks the panel request `template` against the registry's model
    /// catalog; a refusal names its JSON path. `llm` answers every judge
    /// (routing by the catalog); transcripts go to `shelf`.
    pub fn from_template(
        template: Value,
        registry: &Registry,
        llm: Arc<dyn LlmProvider>,
        clock: Arc<dyn Clock>,
        shelf: Arc<dyn TranscriptShelf>,
    ) -> Result<Self, (String, String)> {
        let probe = judge_request_for(&template, "probe", "", &Value::Null, None)
            .map_err(|error| ("$.request".to_string(), error.to_string()))?;
        let request = PanelRequest::parse(&probe).map_err(|error| (error.path, error.message))?;
        baton_core::planning::model_choice::check_judge_models(registry.models(), &request)?;
        let runner = PanelRunner::new(llm, clock).with_catalog(registry.models().clone());
        Ok(Self {
            template,
            runner,
            shelf,
        })
    }
}

#[async_trait]
impl ExampleJudge for PanelJudge {
    async fn judge(
        &self,
        example_id: &str,
        objective: &str,
        output: &Value,
        reference: Option<&Value>,
    ) -> Result<JudgeOutcome, JudgeFailure> {
        let request_value =
            judge_request_for(&self.template, example_id, objective, output, reference)?;
        let request = PanelRequest::parse(&request_value)
            .map_err(|error| JudgeFailure::InvalidRequest(error.to_string()))?;
        let panel = self
            .runner
            .run(request, &format!("eval_{example_id}"), |_| {})
            .await
            .map_err(|failure| JudgeFailure::NoConsensus(failure.to_string()))?;
        kept_outcome(&panel, example_id, self.shelf.as_ref()).await
    }
}

/// A panel's outcome for one example: its whole output (with the
/// hash-chained transcript) kept on `shelf` and named in the outcome, and
/// its consensus.
pub(super) async fn kept_outcome(
    panel: &PanelOutput,
    example_id: &str,
    shelf: &dyn TranscriptShelf,
) -> Result<JudgeOutcome, JudgeFailure> {
    let text = serde_json::to_string_pretty(panel)
        .map_err(|error| JudgeFailure::Unwritable(error.to_string()))?;
    let kept = shelf
        .keep(example_id, &text)
        .await
        .map_err(|error| JudgeFailure::TranscriptNotKept(error.to_string()))?;
    Ok(JudgeOutcome {
        score: panel.consensus.final_score,
        confidence: panel.consensus.confidence,
        variance: panel.consensus.variance,
        transcript_file: Some(kept),
        transcript_head: panel
            .transcript
            .messages()
            .last()
            .map(|(_, _, message)| message.hash.clone()),
    })
}
