//! The stable codes a client can branch on: why a run or node failed
//! (`error.payload.code`, `node_error.payload.code`, `RunFailure.code`) and
//! what a `warning` is about (`warning.payload.code`). One enum each, so a
//! code is never a string literal spelled twice.

use serde::{Deserialize, Serialize};

/// Why a node or a run failed.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum FailureCode {
    /// No plan satisfies the contract (`plan_rejected` carries the diagnostics).
    PlanRejected,
    /// A node never produced output valid for its contract, or the assembled
    /// output breaks the caller's schema.
    OutputContractViolated,
    /// A node's input broke its compiled input contract; nothing was invoked.
    InputContractViolated,
    /// A hard JSONLogic constraint does not hold on the output.
    HardConstraintViolated,
    /// `policies.planner.optimisation.maxTokens` was passed.
    TokenBudgetExceeded,
    /// The caller cancelled the run.
    Cancelled,
    /// The run's state no longer fits the store.
    StateTooLarge,
    /// The model provider's configuration is unusable.
    LlmConfiguration,
    /// The provider kept rate-limiting after its retries.
    LlmRateLimited,
    /// The provider kept failing (5xx) after its retries.
    LlmServerError,
    /// The provider refused the request (4xx other than 429).
    LlmRequestRejected,
    /// The provider kept timing out after its retries.
    LlmTimeout,
    /// The connection to the provider kept failing after its retries.
    LlmTransport,
    /// The provider answered in a shape that is not an answer.
    LlmUnexpectedResponse,
    /// A person declined a human node's task.
    HumanDeclined,
    /// A human task was not answered within its SLA.
    HumanTaskTimedOut,
    /// A runtime policy's `fail` action ended the run.
    PolicyFailed,
    /// A person rejected an approval request (and no `rejectAction` said otherwise).
    HitlRejected,
    /// A judge panel reached no verdict (no judge ever answered).
    PanelNoVerdict,
    /// An agent session was ended by a guardrail (tool calls per turn,
    /// model turns, the session watchdog) before it answered.
    AgentIncomplete,
    /// The run's nodes used `constraints.maxTurns` model turns and more
    /// were needed.
    MaxTurnsReached,
    /// `constraints.maxCostUsd` was spent before a model call, or
    /// `constraints.maxDurationSeconds` passed (the `error` frame's
    /// `budget` says which, the limit and the spend).
    BudgetExceeded,
    /// A step of the run failed for good (an error no retry mends, or its
    /// retries ran out): the `error` frame names the step and the error.
    StepFailed,
    /// A node's capability is a registration no longer active, and no
    /// other capability (nor the catch-all) takes its facets over.
    CapabilityInactive,
}

impl FailureCode {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The part of the orchestrator a failure of this code comes from, for
    /// an `error` frame's `component` (a log's tag, a dashboard's facet).
    pub fn component(self) -> FailureComponent {
        use FailureCode as Code;
        match self {
            Code::PlanRejected => FailureComponent::Planner,
            Code::OutputContractViolated
            | Code::InputContractViolated
            | Code::HardConstraintViolated => FailureComponent::Validator,
            Code::TokenBudgetExceeded | Code::MaxTurnsReached | Code::BudgetExceeded => {
                FailureComponent::Budget
            }
            Code::Cancelled => FailureComponent::Caller,
            Code::StateTooLarge | Code::StepFailed => FailureComponent::Runtime,
            Code::LlmConfiguration
            | Code::LlmRateLimited
            | Code::LlmServerError
            | Code::LlmRequestRejected
            | Code::LlmTimeout
            | Code::LlmTransport
            | Code::LlmUnexpectedResponse => FailureComponent::Model,
            Code::HumanDeclined | Code::HumanTaskTimedOut | Code::HitlRejected => {
                FailureComponent::Person
            }
            Code::PolicyFailed => FailureComponent::Policy,
            Code::PanelNoVerdict => FailureComponent::Panel,
            Code::AgentIncomplete => FailureComponent::Agent,
            Code::CapabilityInactive => FailureComponent::Registry,
        }
    }
}

/// The part of the orchestrator a run's failure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FailureComponent {
    /// No valid plan.
    Planner,
    /// An output or input that breaks its contract or constraints.
    Validator,
    /// A token, cost, duration or model-turn budget.
    Budget,
    /// The caller (a cancel).
    Caller,
    /// The durable runtime (a step failed for good, a state too large).
    Runtime,
    /// A model provider.
    Model,
    /// A person (a decline, a rejection, a task past its SLA).
    Person,
    /// A runtime policy's `fail`.
    Policy,
    /// A judge panel.
    Panel,
    /// An agent session's guardrail.
    Agent,
    /// The capability registry (a registration no longer active).
    Registry,
}

impl std::fmt::Display for FailureCode {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// What a `warning` frame is about.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum WarningCode {
    /// The model's stream broke and restarted: drop the node's deltas since its `node_start`.
    StreamRestarted,
    /// The node's model failed after its provider's retries (rate limited,
    /// server error, timeout); its fallback model answered.
    ModelFallback,
    /// The token budget was passed by the answer that completed the run.
    TokenBudgetExceeded,
    /// The LLM planner produced no valid plan; the deterministic planner planned.
    PlannerFallback,
    /// A node's attempts ran out; a new plan version gives its facets to the
    /// next-ranked capability.
    CapabilityFallback,
    /// A node's capability is a registration that is no longer active (its
    /// heartbeat lapsed, or it was deregistered): it is not called, and the
    /// node escalates as a failed one would.
    CapabilityInactive,
    /// `constraints.executionDepth` drafts were reviewed below the quality
    /// threshold: the best-scoring one is delivered.
    ExecutionDepthReached,
    /// A judge of a panel did not answer a round in time, or answered
    /// outside its contract: it is left out of that round.
    JudgeLeftOut,
    /// A model turn asked for more tool calls than `maxToolCallsPerTurn`:
    /// none of them ran and the session ended.
    ToolCallsPerTurnExceeded,
    /// A session took `maxIterations` model turns without answering.
    MaxIterationsReached,
    /// The turn-by-turn orchestrator made `maxTurns` decisions without
    /// deciding `final`: the run finishes with what its nodes produced.
    OrchestratorTurnsExhausted,
    /// A session lasted longer than the watchdog allows.
    SessionTimedOut,
    /// A model answered that `registry/models.json` does not price: its
    /// calls have no cost (said once per run and model).
    ModelPriceUnknown,
    /// A legacy policy key (`policies.persona`, `hitlRequiredFor`, …) was
    /// rewritten into its canonical form; the frame names the key
    /// (`field`) and says what it became.
    LegacyPolicyNormalized,
    /// The delivered output lacks terms of `constraints.mustInclude`
    /// (after any revision a quality loop could make).
    MustIncludeMissing,
    /// A field accepted as advisory changes nothing in this run (the
    /// frame's `field` names it, the message says why).
    AdvisoryField,
    /// A role the run needed did not run (no reviewer checked a quality
    /// threshold): the output is delivered without it.
    SpecialistSkipped,
    /// The run has spent 80% of `constraints.maxCostUsd`, or 80% of
    /// `constraints.maxDurationSeconds` has passed (`budget` says which).
    BudgetNearlySpent,
    /// A chat node's request would not fit its model's context window: the
    /// thread's oldest exchanges were left out (`context` gives the counts).
    ContextTrimmed,
    /// A runtime policy's condition could not be read when a node's event
    /// was checked against it (it reads a name the node's data does not
    /// have, or it failed to evaluate): the policy did not fire. The
    /// frame's `field` is the condition's JSON path; the message names the
    /// policy and what was missing.
    PolicyConditionUnreadable,
    /// A node gave feedback with open items after `constraints.maxRevisions`
    /// revisions: nothing more is revised, the items stay open.
    FeedbackRevisionsExhausted,
    /// A feedback item names a facet no node of the plan makes, or a node
    /// the plan does not have: it revises nothing.
    FeedbackUnmatched,
    /// A derived capability (run outside its declared inputs) answered: its
    /// output was checked once more, each facet against the caller's schema
    /// for it, and the node ran on probation (`policies.reviewDerived`
    /// holds it for a person too).
    DerivedOutputChecked,
}

impl WarningCode {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_named_as_serde_writes_it() {
        use strum::VariantArray;
        for code in FailureCode::VARIANTS {
            assert_eq!(
                serde_json::to_value(code).unwrap(),
                serde_json::Value::String(code.as_str().into())
            );
        }
        for code in WarningCode::VARIANTS {
            assert_eq!(
                serde_json::to_value(code).unwrap(),
                serde_json::Value::String(code.as_str().into())
            );
        }
        assert_eq!(FailureCode::StateTooLarge.as_str(), "state_too_large");
        assert_eq!(
            WarningCode::ToolCallsPerTurnExceeded.as_str(),
            "tool_calls_per_turn_exceeded"
        );
    }
}
