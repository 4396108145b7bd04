//! One durable step: load the run, let the engine begin, perform the effect
//! it asks for (claim + model call, or a planner draft), let it resume with
//! the outcome, commit the decision conditionally on the version read, then
//! send the outbox. A version conflict reloads and re-applies the same
//! outcome; the capability is never called again for it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use baton_core::codes::FailureCode;
use baton_core::engine::{
    Decision, Effect, EffectOutcome, EngineContext, StepAdvance, begin_step, fail_run, is_stale,
    resume_step,
};
use baton_core::event::EventDraft;
use baton_core::instant::Instant;
use baton_core::registry::Registry;
use baton_core::run::{RunState, StepCommand, StepMessage};
use baton_core::schema::ValidatorCache;
use tracing::{Instrument, info_span};

use super::{CapabilityService, CommonParts, OrchestratorSettings, OutboxRelay};
use crate::error::{RuntimeError, StoreError};
use crate::ports::{
    ClaimOutcome, Clock, LlmProvider, NodeClaim, RunStore, StepCommit, StoredRun, ToolRunner,
    TranscriptPublisher,
};

mod effects;

/// What one step did, for the worker's acknowledgement decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepOutcome {
    Committed {
        new_version: u64,
    },
    /// Duplicate or late delivery: nothing changed but the outbox re-send.
    Stale,
    /// Another worker holds the node's lease; try again later.
    Busy {
        retry_after: Duration,
    },
    /// A timer's message came before its `notBefore`: send it again with
    /// this delay (`StepQueue::send_delayed`) and drop this delivery.
    NotYetDue {
        remaining: Duration,
    },
    RunNotFound,
}

pub struct StepService {
    registry: Arc<Registry>,
    store: Arc<dyn RunStore>,
    relay: OutboxRelay,
    llm: Arc<dyn LlmProvider>,
    clock: Arc<dyn Clock>,
    capabilities: Arc<CapabilityService>,
    validators: Arc<ValidatorCache>,
    settings: OrchestratorSettings,
    /// Unique per process; claims are scoped by it.
    worker_id: String,
    /// Numbers this process's claims.
    claim_counter: AtomicU64,
    transcripts: Arc<dyn TranscriptPublisher>,
    tools: Arc<dyn ToolRunner>,
    threads: Arc<dyn crate::ports::ThreadStore>,
    notifier: Arc<dyn crate::ports::CompletionNotifier>,
}

/// Where performing the engine's effects left a step.
enum Effects {
    /// Nothing to commit (stale, or the node is busy elsewhere).
    Ended(StepOutcome),
    /// Commit `decision`; `performed` is the last effect and its outcome, to
    /// re-apply after a version conflict.
    Decided {
        decision: Box<Decision>,
        performed: Option<Box<(Effect, EffectOutcome)>>,
    },
}

/// A claim this handling holds, released if its result is lost.
struct HeldClaim {
    node_id: String,
    attempt: u32,
    claimant: String,
}

impl StepService {
    pub(super) fn new(
        common: CommonParts,
        llm: Arc<dyn LlmProvider>,
        capabilities: Arc<CapabilityService>,
        worker_id: String,
        transcripts: Arc<dyn TranscriptPublisher>,
        tools: Arc<dyn ToolRunner>,
        notifier: Arc<dyn crate::ports::CompletionNotifier>,
    ) -> Self {
        StepService {
            registry: common.registry,
            store: common.store,
            relay: common.relay,
            llm,
            clock: common.clock,
            capabilities,
            validators: common.validators,
            settings: common.settings,
            worker_id,
            claim_counter: AtomicU64::new(0),
            transcripts,
            tools,
            notifier,
            threads: common.threads,
        }
    }

    fn engine<'a>(&'a self, registry: &'a Registry) -> EngineContext<'a> {
        self.settings.engine_context(registry, &self.validators)
    }

    /// Performs one step message durably, with no deadline.
    pub async fn handle(&self, message: &StepMessage) -> Result<StepOutcome, RuntimeError> {
        self.handle_before(message, None).await
    }

    /// Performs one step message durably before `deadline` (a Lambda
    /// invocation's): a model call is stopped `commit_margin` before it, the
    /// claim released, and `RuntimeError::DeadlineExceeded` returned so the
    /// message is redelivered.
    pub async fn handle_before(
        &self,
        message: &StepMessage,
        deadline: Option<Instant>,
    ) -> Result<StepOutcome, RuntimeError> {
        let node_id = match &message.command {
            StepCommand::ExecuteNode { node_id, .. }
            | StepCommand::AskJudge { node_id, .. }
            | StepCommand::AgentTurn { node_id, .. }
            | StepCommand::RunTool { node_id, .. }
            | StepCommand::ChildRunEnded { node_id, .. } => node_id.as_str(),
            StepCommand::Plan | StepCommand::FireTimer { .. } | StepCommand::Notify { .. } => "",
        };
        let span = info_span!("step", run_id = %message.run_id, step_id = %message.message_id, node_id = %node_id);
        self.handle_inner(message, deadline).instrument(span).await
    }

    async fn handle_inner(
        &self,
        message: &StepMessage,
        deadline: Option<Instant>,
    ) -> Result<StepOutcome, RuntimeError> {
        let (tenant_id, run_id) = (message.tenant_id.as_str(), message.run_id.as_str());
        if let Some(due) = message
            .not_before
            .as_deref()
            .and_then(Instant::parse_rfc3339)
        {
            let remaining = due.since(self.clock.now());
            if !remaining.is_zero() {
                return Ok(StepOutcome::NotYetDue { remaining });
            }
        }
        let Some(stored) = self.store.load_run(tenant_id, run_id).await? else {
            return Ok(StepOutcome::RunNotFound);
        };
        if is_stale(&stored.state, &message.command) {
            self.relay.resend_pending(tenant_id, run_id).await?;
            return Ok(StepOutcome::Stale);
        }
        // A plan is drafted and judged against the tenant's capability
        // snapshot; once planned, nodes carry their own compiled contracts.
        let registry = match message.command {
            StepCommand::Plan => self.capabilities.snapshot(tenant_id).await?.registry,
            StepCommand::ExecuteNode { .. }
            | StepCommand::AskJudge { .. }
            | StepCommand::AgentTurn { .. }
            | StepCommand::RunTool { .. }
            | StepCommand::ChildRunEnded { .. }
            | StepCommand::FireTimer { .. }
            | StepCommand::Notify { .. } => self.registry.clone(),
        };
        let engine = self.engine(&registry);
        let StoredRun { state, version } = stored;
        let advance = begin_step(&state, &message.command, self.clock.now(), &engine)?;
        let mut held_claim: Option<HeldClaim> = None;
        let performed = self
            .perform_effects(message, state, advance, &engine, &mut held_claim, deadline)
            .await;
        let outcome = match performed {
            Ok(Effects::Ended(outcome)) => return Ok(outcome),
            Ok(Effects::Decided {
                decision,
                performed,
            }) => {
                self.commit_reapplying_on_conflict(message, version, *decision, performed, &engine)
                    .await
            }
            Err(error) => Err(error),
        };
        if outcome.is_err()
            && let Some(claim) = &held_claim
            && let Err(error) = self
                .store
                .release_claim(
                    tenant_id,
                    run_id,
                    &claim.node_id,
                    claim.attempt,
                    &claim.claimant,
                )
                .await
        {
            tracing::warn!(%error, "could not release the claim after a lost result; it expires with its lease");
        }
        outcome
    }

    /// Performs what the engine asks until it decides. The state is handed
    /// to the engine by value (a model call's resume is the last use); a
    /// planner draft keeps a copy, since a rejected draft asks for another.
    async fn perform_effects(
        &self,
        message: &StepMessage,
        state: RunState,
        mut advance: StepAdvance,
        engine: &EngineContext<'_>,
        held_claim: &mut Option<HeldClaim>,
        deadline: Option<Instant>,
    ) -> Result<Effects, RuntimeError> {
        let (tenant_id, run_id) = (message.tenant_id.as_str(), message.run_id.as_str());
        let mut state = Some(state);
        let mut performed = None;
        loop {
            match advance {
                StepAdvance::Stale => {
                    self.relay.resend_pending(tenant_id, run_id).await?;
                    return Ok(Effects::Ended(StepOutcome::Stale));
                }
                StepAdvance::Decided(decision) => {
                    return Ok(Effects::Decided {
                        decision,
                        performed,
                    });
                }
                StepAdvance::Perform(mut effect) => {
                    let Some(current) = state.take() else {
                        return Err(RuntimeError::Core(baton_core::CoreError::StepDoesNotApply(
                            "the engine asked for another effect after a model call".into(),
                        )));
                    };
                    // No time for the effect and a commit: do not even claim.
                    self.time_left(deadline)?;
                    let claim_frames = effect.take_claim_frames();
                    if let Some((node_id, attempt)) = effect.claim() {
                        match self.claim(message, node_id, attempt, claim_frames).await? {
                            Ok(claim) => *held_claim = Some(claim),
                            Err(busy) => return Ok(Effects::Ended(busy)),
                        }
                    }
                    let outcome = match self.time_left(deadline)? {
                        None => self.perform(&current, &effect).await?,
                        Some(budget) => {
                            match tokio::time::timeout(budget, self.perform(&current, &effect))
                                .await
                            {
                                Ok(outcome) => outcome?,
                                Err(_) => return Err(self.out_of_time(deadline)),
                            }
                        }
                    };
                    // These may ask for another effect: the state is needed again.
                    if matches!(effect, Effect::DraftPlan(_) | Effect::ReviewPlan(_)) {
                        state = Some(current.clone());
                    }
                    advance = resume_step(
                        current,
                        &message.command,
                        &effect,
                        outcome.clone(),
                        self.clock.now(),
                        engine,
                    )?;
                    performed = Some(Box::new((effect, outcome)));
                }
            }
        }
    }

    /// The time an effect may take before `deadline`, keeping the commit
    /// margin; an error when nothing is left.
    fn time_left(&self, deadline: Option<Instant>) -> Result<Option<Duration>, RuntimeError> {
        let Some(deadline) = deadline else {
            return Ok(None);
        };
        let budget = deadline
            .since(self.clock.now())
            .saturating_sub(self.settings.commit_margin);
        if budget.is_zero() {
            return Err(self.out_of_time(Some(deadline)));
        }
        Ok(Some(budget))
    }

    fn out_of_time(&self, deadline: Option<Instant>) -> RuntimeError {
        let remaining =
            deadline.map_or(Duration::ZERO, |deadline| deadline.since(self.clock.now()));
        RuntimeError::DeadlineExceeded {
            remaining_millis: u64::try_from(remaining.as_millis()).unwrap_or(u64::MAX),
            needed_millis: u64::try_from(self.settings.commit_margin.as_millis())
                .unwrap_or(u64::MAX),
        }
    }

    /// Claims the node attempt with a lease, appending the effect's start
    /// frames. `Err(Busy)` when another worker holds it.
    async fn claim(
        &self,
        message: &StepMessage,
        node_id: &str,
        attempt: u32,
        start_frames: Vec<EventDraft>,
    ) -> Result<Result<HeldClaim, StepOutcome>, RuntimeError> {
        let now = self.clock.now();
        // One claimant per handling, so two deliveries in the same process are rivals too.
        let claimant = format!(
            "{}/{}",
            self.worker_id,
            self.claim_counter.fetch_add(1, Ordering::Relaxed)
        );
        let claim = NodeClaim {
            node_id,
            attempt,
            worker_id: &claimant,
            now,
            lease_expires_at: now.plus(self.settings.node_lease),
            consumed_message_id: Some(&message.message_id),
        };
        match self
            .store
            .claim_node(&message.tenant_id, &message.run_id, claim, start_frames)
            .await?
        {
            ClaimOutcome::Claimed => Ok(Ok(HeldClaim {
                node_id: node_id.to_string(),
                attempt,
                claimant,
            })),
            ClaimOutcome::HeldByOther { lease_expires_at } => Ok(Err(StepOutcome::Busy {
                retry_after: lease_expires_at
                    .since(now)
                    .min(self.settings.busy_retry_delay),
            })),
        }
    }

    /// Commits; on a version conflict reloads and decides again from the
    /// same outcome (or, for a step decided without an effect, begins again).
    async fn commit_reapplying_on_conflict(
        &self,
        message: &StepMessage,
        read_version: u64,
        first_decision: Decision,
        performed: Option<Box<(Effect, EffectOutcome)>>,
        engine: &EngineContext<'_>,
    ) -> Result<StepOutcome, RuntimeError> {
        let (tenant_id, run_id) = (message.tenant_id.as_str(), message.run_id.as_str());
        let mut version = read_version;
        let mut decision = first_decision;
        for _ in 0..self.settings.max_commit_rounds {
            // Published before the commit: a failure retries the step, so
            // a concluded transcript is never committed unpublished.
            for publication in &decision.transcripts {
                self.transcripts
                    .publish(tenant_id, run_id, publication)
                    .await
                    .map_err(RuntimeError::TranscriptPublisher)?;
            }
            // Recorded before the commit too: a failure retries the step,
            // and recording an exchange twice changes nothing.
            for appended in &decision.exchanges {
                self.threads
                    .record_exchange(tenant_id, &appended.thread_id, &appended.exchange)
                    .await?;
            }
            match self
                .store
                .commit_step(
                    tenant_id,
                    run_id,
                    StepCommit {
                        expected_version: version,
                        state: decision.state,
                        events: decision.events,
                        outbox: decision.outbox.clone(),
                        consumed_message_id: Some(message.message_id.clone()),
                    },
                )
                .await
            {
                Ok(new_version) => {
                    self.relay.send(&decision.outbox).await?;
                    return Ok(StepOutcome::Committed { new_version });
                }
                Err(StoreError::VersionConflict { .. }) => {}
                Err(StoreError::TooLarge(reason)) => {
                    return self.fail_run_too_large(message, &reason, engine).await;
                }
                Err(other) => return Err(other.into()),
            }
            let Some(reloaded) = self.store.load_run(tenant_id, run_id).await? else {
                return Ok(StepOutcome::RunNotFound);
            };
            let now = self.clock.now();
            let advance = match performed.as_deref() {
                Some((effect, outcome)) => resume_step(
                    reloaded.state,
                    &message.command,
                    effect,
                    outcome.clone(),
                    now,
                    engine,
                )?,
                None => begin_step(&reloaded.state, &message.command, now, engine)?,
            };
            decision = match advance {
                StepAdvance::Decided(decision) => *decision,
                StepAdvance::Stale => return Ok(StepOutcome::Stale),
                StepAdvance::Perform(_) => {
                    return Err(RuntimeError::Core(baton_core::CoreError::StepDoesNotApply(
                        "re-applying a performed outcome asked for another effect".into(),
                    )));
                }
            };
            version = reloaded.version;
        }
        Err(RuntimeError::Store(StoreError::VersionConflict {
            expected: version,
        }))
    }

    /// The step's result made the run state too large to store: the run
    /// fails from its last stored state (which fits) with a clear error,
    /// instead of the step failing for ever.
    async fn fail_run_too_large(
        &self,
        message: &StepMessage,
        reason: &str,
        engine: &EngineContext<'_>,
    ) -> Result<StepOutcome, RuntimeError> {
        let (tenant_id, run_id) = (message.tenant_id.as_str(), message.run_id.as_str());
        let Some(stored) = self.store.load_run(tenant_id, run_id).await? else {
            return Ok(StepOutcome::RunNotFound);
        };
        let Some(decision) = fail_run(
            stored.state,
            FailureCode::StateTooLarge,
            &format!("the run can no longer be stored: {reason}"),
            self.clock.now(),
            engine,
        ) else {
            return Ok(StepOutcome::Stale);
        };
        let new_version = self
            .store
            .commit_step(
                tenant_id,
                run_id,
                StepCommit {
                    expected_version: stored.version,
                    state: decision.state,
                    events: decision.events,
                    outbox: decision.outbox,
                    consumed_message_id: Some(message.message_id.clone()),
                },
            )
            .await?;
        Ok(StepOutcome::Committed { new_version })
    }
}
