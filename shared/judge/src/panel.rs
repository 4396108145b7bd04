//! A panel as a state machine without I/O: it says which judges to ask
//! (with what prompt), takes their answers (or their silence), decides
//! whether another discussion round is needed, and builds the output. The
//! shell performs the model calls (concurrently) and feeds the answers back.
//!
//! Round 0 is independent scoring. While the variance of the latest scores
//! is above `convergenceThreshold`, discussion is enabled and rounds remain,
//! each judge sees the others' latest scores and reasons and may revise. A
//! judge that does not answer within `roundTimeout` is left out of that
//! round (a warning); its latest earlier score, if any, still counts.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::consensus::{ConsensusError, ConsensusResult, consensus, needs_discussion, variance};
use crate::request::PanelRequest;
use crate::transcript::{ConversationMessage, EvaluationTranscript, MessagePhase, MessageRole};

/// What a judge answers (the response schema of every judge call).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JudgeAnswer {
    pub score: f64,
    pub feedback: String,
    #[serde(default)]
    pub strengths: Vec<String>,
    #[serde(default)]
    pub improvements: Vec<String>,
    /// The model that answered, as its provider named it: set by Baton
    /// from the call, never taken from the judge's text (the answer schema
    /// has no such property).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// The JSON Schema a judge must answer with.
pub fn judge_answer_schema() -> Value {
    json!({
        "type": "object",
        "required": ["score", "feedback", "strengths", "improvements"],
        "additionalProperties": false,
        "properties": {
            "score": {"type": "number", "minimum": 0, "maximum": 10},
            "feedback": {"type": "string"},
            "strengths": {"type": "array", "items": {"type": "string"}},
            "improvements": {"type": "array", "items": {"type": "string"}}
        }
    })
}

/// One call the shell must make.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JudgeCall {
    pub judge_id: String,
    pub round: u32,
    pub system_prompt: String,
    pub user_message: String,
    /// The judge's own model, when its registration names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_name: Option<String>,
    /// The judge's provider (`modelProvider`): with no model name, the
    /// provider's first catalog model with structured output answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_provider: Option<String>,
}

/// What came of one call.
#[derive(Debug, Clone, PartialEq)]
pub enum JudgeOutcome {
    Answered(JudgeAnswer),
    /// No answer within `roundTimeout`.
    TimedOut,
    /// The model failed, or answered outside the schema.
    Failed(String),
}

/// `EvaluationProgress`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvaluationProgress {
    pub status: String,
    pub current_round: u32,
    pub total_rounds: u32,
    pub scores_received: usize,
    pub total_agents: usize,
    pub topic_id: String,
    pub current_scores: BTreeMap<String, f64>,
    pub variance: f64,
}

/// One judge's result (`individualResults[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IndividualResult {
    pub agent_id: String,
    pub score: f64,
    pub feedback: String,
    pub strengths: Vec<String>,
    pub improvements: Vec<String>,
    pub completed_at: u64,
    /// The model that gave this judge's last answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// `OrchestratorOutput`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PanelOutput {
    pub request_id: String,
    pub topic_id: String,
    pub progress: EvaluationProgress,
    pub transcript: EvaluationTranscript,
    pub consensus: ConsensusResult,
    pub individual_results: Vec<IndividualResult>,
    /// Judges left out of a round (`judgeId: round …`), for the reader.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Where the panel stands after a round.
#[derive(Debug, Clone, PartialEq)]
pub enum PanelAdvance {
    /// Ask these judges (a discussion round).
    Ask(Vec<JudgeCall>),
    /// The panel is done.
    Done(Box<PanelOutput>),
    /// The panel concludes without a verdict.
    Failed(PanelFailure),
}

/// Why a panel concluded without a verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PanelFailure {
    /// No judge answered the round.
    NoJudgeAnswered,
    /// The judges' scores form no consensus.
    NoConsensus(ConsensusError),
}

impl std::fmt::Display for PanelFailure {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PanelFailure::NoJudgeAnswered => formatter.write_str("no judge answered"),
            PanelFailure::NoConsensus(error) => error.fmt(formatter),
        }
    }
}

impl std::error::Error for PanelFailure {}

/// A panel in progress. Serializable, so a durable shell can keep it in a
/// run's state between the steps of its judges.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Panel {
    request: PanelRequest,
    topic_id: String,
    round: u32,
    latest: BTreeMap<String, (JudgeAnswer, u64)>,
    answered_this_round: usize,
    transcript: EvaluationTranscript,
    warnings: Vec<String>,
    next_message: u64,
}

impl Panel {
    /// Starts a panel: the scoring calls of round 0.
    pub fn start(
        request: PanelRequest,
        topic_id: &str,
        now_millis: u64,
    ) -> (Panel, Vec<JudgeCall>) {
        let mut panel = Panel {
            request,
            topic_id: topic_id.to_string(),
            round: 0,
            latest: BTreeMap::new(),
            answered_this_round: 0,
            transcript: EvaluationTranscript::new(topic_id),
            warnings: Vec::new(),
            next_message: 0,
        };
        let criteria = criteria_or_default(&panel.request.request.criteria).join(", ");
        let opening = format!(
            "Evaluation {} opened: {} judges score against {criteria}.",
            panel.request.request.id,
            panel.request.request.selected_agents.len()
        );
        panel.record(
            MessageRole::Orchestrator,
            None,
            opening,
            MessagePhase::Scoring,
            now_millis,
        );
        let calls = panel.calls(|_| None);
        (panel, calls)
    }

    fn record(
        &mut self,
        role: MessageRole,
        agent_id: Option<&str>,
        content: String,
        phase: MessagePhase,
        now_millis: u64,
    ) {
        self.record_from_model(role, agent_id, None, content, phase, now_millis);
    }

    /// Appends a message, naming the model that wrote it when one did.
    fn record_from_model(
        &mut self,
        role: MessageRole,
        agent_id: Option<&str>,
        model: Option<String>,
        content: String,
        phase: MessagePhase,
        now_millis: u64,
    ) {
        self.next_message += 1;
        let message = ConversationMessage {
            id: format!("{}:m{}", self.topic_id, self.next_message),
            role,
            agent_id: agent_id.map(str::to_string),
            model,
            content,
            timestamp: now_millis,
            phase,
            round: Some(self.round),
            ledger_tx_id: None,
            previous_hash: String::new(),
            hash: String::new(),
        };
        self.transcript.append(self.round, message);
    }

    fn calls(&self, discussion: impl Fn(&str) -> Option<String>) -> Vec<JudgeCall> {
        let request = &self.request.request;
        request
            .selected_agents
            .iter()
            .map(|judge| {
                let capabilities = judge.capabilities.clone().unwrap_or_default();
                let system_prompt = capabilities.system_prompt.unwrap_or_else(|| {
                    "You are an impartial judge. Score the content from 0 to 10.".to_string()
                });
                let mut message = json!({
                    "task": "Score the content from 0 (worst) to 10 (best) against the criteria; give feedback, strengths and improvements.",
                    "content": request.content,
                    "criteria": criteria_or_default(&request.criteria),
                    "round": self.round,
                });
                if let Some(others) = discussion(&judge.id) {
                    message["discussion"] = Value::String(others);
                }
                JudgeCall {
                    judge_id: judge.id.clone(),
                    round: self.round,
                    system_prompt,
                    user_message: message.to_string(),
                    model_name: capabilities.model_name,
                    model_provider: capabilities.model_provider,
                }
            })
            .collect()
    }

    /// Takes one judge's outcome for the current round (stale rounds are ignored).
    pub fn take(&mut self, judge_id: &str, round: u32, outcome: JudgeOutcome, now_millis: u64) {
        if round != self.round {
            return;
        }
        let phase = if round == 0 {
            MessagePhase::Scoring
        } else {
            MessagePhase::Discussion
        };
        match outcome {
            JudgeOutcome::Answered(answer) if (0.0..=10.0).contains(&answer.score) => {
                let content = format!(
                    "score {}: {} | strengths: {} | improvements: {}",
                    answer.score,
                    answer.feedback,
                    answer.strengths.join("; "),
                    answer.improvements.join("; ")
                );
                self.record_from_model(
                    MessageRole::Agent,
                    Some(judge_id),
                    answer.model.clone(),
                    content,
                    phase,
                    now_millis,
                );
                self.latest
                    .insert(judge_id.to_string(), (answer, now_millis));
                self.answered_this_round += 1;
            }
            JudgeOutcome::Answered(answer) => self.warnings.push(format!(
                "{judge_id}: round {round}: score {} is off the 0-10 scale; left out",
                answer.score
            )),
            JudgeOutcome::TimedOut => self.warnings.push(format!(
                "{judge_id}: round {round}: no answer within {} ms; left out of the round",
                self.request.config.round_timeout
            )),
            JudgeOutcome::Failed(reason) => self.warnings.push(format!(
                "{judge_id}: round {round}: {reason}; left out of the round"
            )),
        }
    }

    fn latest_scores(&self) -> Vec<f64> {
        self.latest
            .values()
            .map(|(answer, _)| answer.score)
            .collect()
    }

    /// Progress as readers see it.
    pub fn progress(&self, status: &str) -> EvaluationProgress {
        EvaluationProgress {
            status: status.to_string(),
            current_round: self.round,
            total_rounds: self.request.config.max_discussion_rounds,
            scores_received: self.answered_this_round,
            total_agents: self.request.request.selected_agents.len(),
            topic_id: self.topic_id.clone(),
            current_scores: self
                .latest
                .iter()
                .map(|(judge, (answer, _))| (judge.clone(), answer.score))
                .collect(),
            variance: variance(&self.latest_scores()),
        }
    }

    /// The round's outcomes are all in: discuss again, or conclude.
    pub fn advance(&mut self, now_millis: u64) -> PanelAdvance {
        if self.latest.is_empty() {
            return PanelAdvance::Failed(PanelFailure::NoJudgeAnswered);
        }
        let scores = self.latest_scores();
        let spread = variance(&scores);
        if let Some(round) = self.transcript.rounds.last_mut() {
            round.variance = Some(spread);
        }
        let config = &self.request.config;
        if config.enable_discussion
            && self.latest.len() > 1
            && needs_discussion(
                &scores,
                config.convergence_threshold,
                self.round,
                config.max_discussion_rounds,
            )
        {
            let summary = self
                .latest
                .iter()
                .map(|(judge, (answer, _))| {
                    format!("{judge}: {} ({})", answer.score, answer.feedback)
                })
                .collect::<Vec<_>>()
                .join("\n");
            self.round += 1;
            self.answered_this_round = 0;
            self.record(
                MessageRole::Orchestrator,
                None,
                format!(
                    "Variance {spread:.3} is above {}; discussion round {}.",
                    config.convergence_threshold, self.round
                ),
                MessagePhase::Discussion,
                now_millis,
            );
            let latest = self.latest.clone();
            let calls = self.calls(|judge_id| {
                let own = latest
                    .get(judge_id)
                    .map(|(answer, _)| format!("Your latest score: {}.", answer.score))
                    .unwrap_or_default();
                Some(format!(
                    "The panel's latest scores and reasons:\n{summary}\n{own} Revise your score if the others convinced you; keep it if not."
                ))
            });
            return PanelAdvance::Ask(calls);
        }
        let judged: Vec<_> = self
            .latest
            .iter()
            .map(|(judge, (answer, _))| self.request.judge_score(judge, answer.score))
            .collect();
        let result = match consensus(
            &judged,
            config.consensus_algorithm,
            config.outlier_detection,
            self.round,
        ) {
            Ok(result) => result,
            Err(error) => return PanelAdvance::Failed(PanelFailure::NoConsensus(error)),
        };
        self.record(
            MessageRole::Orchestrator,
            None,
            format!(
                "Consensus {:.3} ({}), confidence {:.3}, variance {:.3}{}.",
                result.final_score,
                result.algorithm,
                result.confidence,
                result.variance,
                if result.excluded_outliers.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; outliers left out: {}",
                        result.excluded_outliers.join(", ")
                    )
                }
            ),
            MessagePhase::Consensus,
            now_millis,
        );
        let progress = self.progress("completed");
        PanelAdvance::Done(Box::new(PanelOutput {
            request_id: self.request.request.id.clone(),
            topic_id: self.topic_id.clone(),
            progress,
            transcript: self.transcript.clone(),
            consensus: result,
            individual_results: self
                .latest
                .iter()
                .map(|(judge, (answer, at))| IndividualResult {
                    agent_id: judge.clone(),
                    score: answer.score,
                    feedback: answer.feedback.clone(),
                    strengths: answer.strengths.clone(),
                    improvements: answer.improvements.clone(),
                    completed_at: *at,
                    model: answer.model.clone(),
                })
                .collect(),
            warnings: self.warnings.clone(),
        }))
    }

    /// The round being asked.
    pub fn round(&self) -> u32 {
        self.round
    }

    /// Judges left out so far (`judgeId: round …`).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The request the panel runs.
    pub fn request(&self) -> &PanelRequest {
        &self.request
    }

    /// The transcript so far.
    pub fn transcript(&self) -> &EvaluationTranscript {
        &self.transcript
    }
}

/// The criteria the judges score against: the request's, or, when it names
/// none, `overall quality` (said in the transcript's opening and in every
/// judge's request alike).
fn criteria_or_default(criteria: &[String]) -> Vec<String> {
    if criteria.is_empty() {
        vec![DEFAULT_CRITERION.to_string()]
    } else {
        criteria.to_vec()
    }
}

/// What judges score against when a request names no criteria.
pub const DEFAULT_CRITERION: &str = "overall quality";
