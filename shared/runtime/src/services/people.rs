//! People in a run: a person answers a parked node (their output judged
//! against the node's contract) or declines its task, resolves an approval
//! request, answers a clarifying question, resumes a paused run or fires a
//! `manual` policy. Each is one conditional commit on the version read, so
//! two concurrent inputs for one request make one transition; the loser is
//! told the request no longer waits.

use std::sync::Arc;

use baton_core::basics::schema::ValidatorCache;
use baton_core::catalog::registry::Registry;
use baton_core::engine::{
    ApprovalDecision, ApprovalResolution, ClarificationAnswer, Decision, EngineContext,
    HumanAnswer, HumanDecline, HumanInputRefused, answer_clarification, answer_human_node,
    decline_human_node, resolve_approval, resume_paused_run, trigger_manual_policy,
};
use baton_core::state::run::{RunState, RunStatus};
use baton_core::state::tasks::{Answerer, HumanTask, PendingRequest};
use serde_json::Value;

use super::commit::{CommitResult, CommitTarget, Decided, DecisionCommitter};
use super::{CommonParts, OrchestratorSettings};
use crate::error::RuntimeError;
use crate::ports::{Clock, RunQueries};

/// What answering or declining came to.
#[derive(Debug, Clone, PartialEq)]
pub enum PersonInputOutcome {
    /// Committed: the run's status and version afterwards.
    Applied {
        status: RunStatus,
        version: u64,
    },
    /// Nothing changed, and why.
    Refused(HumanInputRefused),
    RunNotFound,
}

/// A person's input for one parked node.
#[derive(Debug, Clone, PartialEq)]
pub enum PersonInput {
    Answer {
        node_id: String,
        expected_plan_version: u32,
        output: Value,
    },
    Decline {
        node_id: String,
        reason_code: String,
        note: Option<String>,
    },
    /// An approval request's decision.
    Resolve {
        request_id: String,
        decision: ApprovalDecision,
        note: Option<String>,
    },
    /// The answer to the pending clarifying question.
    Clarify {
        request_id: Option<String>,
        expected_plan_version: u32,
        answer: String,
    },
    /// Resume a paused run.
    ResumePaused { expected_plan_version: u32 },
    /// Fire a `manual` policy.
    TriggerPolicy { policy_id: String },
}

pub struct PeopleService {
    registry: Arc<Registry>,
    /// What waits for people.
    queries: Arc<dyn RunQueries>,
    committer: DecisionCommitter,
    validators: Arc<ValidatorCache>,
    clock: Arc<dyn Clock>,
    settings: OrchestratorSettings,
}

impl PeopleService {
    pub(super) fn new(common: CommonParts) -> Self {
        PeopleService {
            registry: common.registry,
            queries: common.store,
            committer: common.committer,
            validators: common.validators,
            clock: common.clock,
            settings: common.settings,
        }
    }

    fn engine(&self) -> EngineContext<'_> {
        self.settings
            .engine_context(&self.registry, &self.validators)
    }

    fn decide(
        &self,
        state: RunState,
        input: &PersonInput,
        by: &Answerer,
    ) -> Result<Result<Decision, HumanInputRefused>, RuntimeError> {
        let now = self.clock.now();
        let engine = self.engine();
        Ok(match input {
            PersonInput::Answer {
                node_id,
                expected_plan_version,
                output,
            } => answer_human_node(
                state,
                HumanAnswer {
                    node_id,
                    expected_plan_version: *expected_plan_version,
                    output: output.clone(),
                    by,
                },
                now,
                &engine,
            )?,
            PersonInput::Decline {
                node_id,
                reason_code,
                note,
            } => decline_human_node(
                state,
                HumanDecline {
                    node_id,
                    reason_code,
                    note: note.as_deref(),
                    by,
                },
                now,
                &engine,
            )?,
            PersonInput::Resolve {
                request_id,
                decision,
                note,
            } => resolve_approval(
                state,
                ApprovalResolution {
                    request_id,
                    decision: *decision,
                    note: note.as_deref(),
                    by,
                },
                now,
                &engine,
            )?,
            PersonInput::Clarify {
                request_id,
                expected_plan_version,
                answer,
            } => answer_clarification(
                state,
                ClarificationAnswer {
                    request_id: request_id.as_deref(),
                    expected_plan_version: *expected_plan_version,
                    answer,
                    answered_by: by.user.as_deref(),
                },
                now,
                &engine,
            )?,
            PersonInput::ResumePaused {
                expected_plan_version,
            } => resume_paused_run(state, *expected_plan_version, now, &engine)?,
            PersonInput::TriggerPolicy { policy_id } => {
                trigger_manual_policy(state, policy_id, now, &engine)?
            }
        })
    }

    /// The tenant's pending human tasks (of one capability, when given),
    /// oldest run first.
    pub async fn pending_tasks(
        &self,
        tenant_id: &str,
        capability_id: Option<&str>,
    ) -> Result<Vec<HumanTask>, RuntimeError> {
        Ok(self.queries.pending_tasks(tenant_id, capability_id).await?)
    }

    /// The tenant's pending approval requests and clarifying questions.
    pub async fn pending_requests(
        &self,
        tenant_id: &str,
    ) -> Result<Vec<PendingRequest>, RuntimeError> {
        Ok(self.queries.pending_requests(tenant_id).await?)
    }

    /// [`PeopleService::apply_as`] by an operator who may answer any task
    /// and is not named (the local CLI, tests).
    pub async fn apply(
        &self,
        tenant_id: &str,
        run_id: &str,
        input: PersonInput,
    ) -> Result<PersonInputOutcome, RuntimeError> {
        self.apply_as(tenant_id, run_id, input, &Answerer::operator(None))
            .await
    }

    /// Applies a person's input to the run through the one commit
    /// protocol: after a conflict the input is judged again on the new state
    /// (where the node may no longer wait). `by` is who gives it: a task
    /// assigned to others refuses them (`NotAssignee`), and the user is
    /// recorded on the node and in the frames.
    pub async fn apply_as(
        &self,
        tenant_id: &str,
        run_id: &str,
        input: PersonInput,
        by: &Answerer,
    ) -> Result<PersonInputOutcome, RuntimeError> {
        let target = CommitTarget {
            tenant_id,
            run_id,
            consumed_message_id: None,
        };
        let decide = |state: RunState| {
            Ok(match self.decide(state, &input, by)? {
                Ok(decision) => Decided::Commit(Box::new(decision)),
                Err(refused) => Decided::Nothing(refused),
            })
        };
        let result = self
            .committer
            .commit(target, &self.engine(), None, decide)
            .await?;
        Ok(match result {
            CommitResult::Committed {
                new_version,
                status,
            }
            | CommitResult::RunFailedTooLarge {
                new_version: Some(new_version),
                status,
            } => PersonInputOutcome::Applied {
                status,
                version: new_version,
            },
            CommitResult::RunFailedTooLarge {
                new_version: None,
                status,
            } => PersonInputOutcome::Refused(HumanInputRefused::NotAwaiting {
                run_status: status,
                node_status: None,
            }),
            CommitResult::Nothing(refused) => PersonInputOutcome::Refused(refused),
            CommitResult::RunNotFound => PersonInputOutcome::RunNotFound,
        })
    }
}
