//! Running a judge panel: the panel's state machine (`baton_judge::panel`)
//! says whom to ask; this asks them concurrently through the model port,
//! each within the round's timeout, and feeds the answers back until the
//! panel concludes. In process (the CLI's `baton judge`); on the step
//! engine a panel is a plan node whose judges are steps (`engine/panel.rs`
//! in `baton-core`). Also the default `TranscriptPublisher`.

use std::sync::Arc;
use std::time::Duration;

use baton_core::catalog::model_catalog::ModelCatalog;
use baton_core::planning::model_choice::model_for_judge;
use baton_core::state::context::ModelRequest;
use baton_judge::panel::{
    EvaluationProgress, JudgeAnswer, JudgeCall, JudgeOutcome, Panel, PanelAdvance, PanelOutput,
    judge_answer_schema,
};
use baton_judge::request::PanelRequest;

use crate::ports::{Clock, LlmProvider, TranscriptPublisher};

/// Runs panels through one model port.
pub struct PanelRunner {
    llm: Arc<dyn LlmProvider>,
    clock: Arc<dyn Clock>,
    /// The catalog that resolves each judge's `modelName`/`modelProvider`;
    /// without one, every judge asks the port's default model.
    catalog: Option<ModelCatalog>,
}

async fn ask(
    llm: &dyn LlmProvider,
    catalog: Option<&ModelCatalog>,
    call: &JudgeCall,
    schema: Arc<serde_json::Value>,
    timeout: Duration,
) -> JudgeOutcome {
    let request = ModelRequest {
        system_instruction: call.system_prompt.clone(),
        user_message: call.user_message.clone(),
        schema_name: "judge_answer".to_string(),
        output_schema: schema,
        // The judge's own model, as on the step engine.
        model: catalog
            .and_then(|catalog| {
                model_for_judge(
                    catalog,
                    call.model_name.as_deref(),
                    call.model_provider.as_deref(),
                )
            })
            .map(Box::new),
    };
    // The panel keeps whole answers only; streamed text is dropped.
    let (deltas, _ignored) = tokio::sync::mpsc::unbounded_channel();
    match tokio::time::timeout(timeout, llm.complete(&request, deltas)).await {
        Err(_) => JudgeOutcome::TimedOut,
        Ok(Err(error)) => JudgeOutcome::Failed(format!("the model failed: {error}")),
        Ok(Ok(answer)) => match serde_json::from_str::<JudgeAnswer>(&answer.content) {
            Ok(mut parsed) => {
                parsed.model = Some(answer.model.clone());
                JudgeOutcome::Answered(parsed)
            }
            Err(error) => JudgeOutcome::Failed(format!("the answer is not a judgement: {error}")),
        },
    }
}

impl PanelRunner {
    pub fn new(llm: Arc<dyn LlmProvider>, clock: Arc<dyn Clock>) -> Self {
        PanelRunner {
            llm,
            clock,
            catalog: None,
        }
    }

    /// Each judge asks the catalog model its request names (`llm` must
    /// route catalog models, as a `ModelRouter` does).
    pub fn with_catalog(mut self, catalog: ModelCatalog) -> Self {
        self.catalog = Some(catalog);
        self
    }

    fn now_millis(&self) -> u64 {
        self.clock.now().unix_millis()
    }

    /// Asks every judge of a round at once; returns when all answered or
    /// timed out.
    pub async fn run_round(&self, panel: &mut Panel, calls: &[JudgeCall], timeout: Duration) {
        let schema = Arc::new(judge_answer_schema());
        let asked = calls.iter().map(|call| {
            let schema = schema.clone();
            async move {
                let outcome = ask(
                    self.llm.as_ref(),
                    self.catalog.as_ref(),
                    call,
                    schema,
                    timeout,
                )
                .await;
                (call, outcome)
            }
        });
        for (call, outcome) in futures_util::future::join_all(asked).await {
            panel.take(&call.judge_id, call.round, outcome, self.now_millis());
        }
    }

    /// Runs the panel to its conclusion, reporting progress after each round.
    pub async fn run(
        &self,
        request: PanelRequest,
        topic_id: &str,
        mut on_progress: impl FnMut(&EvaluationProgress),
    ) -> Result<PanelOutput, baton_judge::panel::PanelFailure> {
        let timeout = Duration::from_millis(request.config.round_timeout);
        let (mut panel, mut calls) = Panel::start(request, topic_id, self.now_millis());
        on_progress(&panel.progress("initializing"));
        on_progress(&panel.progress("scoring"));
        loop {
            self.run_round(&mut panel, &calls, timeout).await;
            let converging = panel.progress("converging");
            match panel.advance(self.now_millis()) {
                PanelAdvance::Ask(next) => {
                    on_progress(&panel.progress("discussing"));
                    calls = next;
                }
                PanelAdvance::Done(output) => {
                    on_progress(&converging);
                    on_progress(&output.progress);
                    return Ok(*output);
                }
                PanelAdvance::Failed(reason) => {
                    let mut failed = converging;
                    failed.status = "failed".to_string();
                    on_progress(&failed);
                    return Err(reason);
                }
            }
        }
    }
}

/// The default transcript publisher: the run's own event log, which already
/// holds every concluded transcript (in the verdict of the panel node's
/// `node_complete`), so there is nothing more to send.
pub struct EventLogTranscripts;

#[async_trait::async_trait]
impl TranscriptPublisher for EventLogTranscripts {
    async fn publish(
        &self,
        _tenant_id: &str,
        _run_id: &str,
        _publication: &baton_core::contracts::panels::TranscriptPublication,
    ) -> Result<Option<baton_core::contracts::panels::LedgerReceipt>, crate::error::PublishError>
    {
        Ok(None)
    }
}
