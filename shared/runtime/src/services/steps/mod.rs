//! One durable step: load the run, let the engine begin, perform the effect
//! it asks for (claim + model call, or a planner draft), let it resume with
//! the outcome, commit the decision conditionally on the version read, then
//! send the outbox. A version conflict reloads and re-applies the same
//! outcome; the capability is never called again for it.

use crate::ports::NodeLeases;
use crate::ports::RunLog;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use baton_core::basics::claims::ClaimKey;
use baton_core::basics::ids::RunKey;
use baton_core::basics::instant::Instant;
use baton_core::basics::schema::ValidatorCache;
use baton_core::catalog::registry::Registry;
use baton_core::engine::{
    Decision, EngineContext, Performed, StepAdvance, begin_step, is_stale, resume_step,
};
use baton_core::state::run::{RunState, StepCommand, StepMessage};
use baton_core::wire::event::EventDraft;
use tracing::{Instrument, info_span};

use super::admission::RunAdmission;
use super::commit::{CommitResult, CommitTarget, Decided, DecisionCommitter};
use super::{CapabilityService, CommonParts, OrchestratorSettings, OutboxRelay};
use crate::error::RuntimeError;
use crate::ports::{ClaimOutcome, Clock, LlmProvider, NodeClaim, ToolRunner};

mod effects;
mod give_up;
mod health;
mod planning_registry;
use planning_registry::PlanningRegistry;
mod liveness;

pub use give_up::GaveUp;

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
    /// The run loaded, committed, its frames streamed and entries read.
    run_log: Arc<dyn RunLog>,
    /// Claims on node attempts.
    leases: Arc<dyn NodeLeases>,
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
    committer: DecisionCommitter,
    admission: RunAdmission,
    tools: Arc<dyn ToolRunner>,
    notifier: Arc<dyn crate::ports::CompletionNotifier>,
    /// Each tenant's recent calls per capability, as this process saw them.
    health: health::CapabilityHealthBook,
    lifecycle: super::lifecycle_bus::LifecycleBus,
    /// The tenant's memory: what nodes recall, what completed runs remember.
    memory: Arc<super::memory::MemoryService>,
}

/// Where performing the engine's effects left a step.
enum Effects {
    /// Nothing to commit (stale, or the node is busy elsewhere).
    Ended(StepOutcome),
    /// Commit `decision`; `performed` is the last effect and its outcome, to
    /// re-apply after a version conflict.
    Decided {
        decision: Box<Decision>,
        performed: Option<Box<Performed>>,
    },
}

/// A claim this handling holds, released if its result is lost.
struct HeldClaim {
    key: ClaimKey,
    /// `key` as the store keeps it.
    stored_key: String,
    attempt: u32,
    claimant: String,
}

impl StepService {
    pub(super) fn new(
        common: CommonParts,
        llm: Arc<dyn LlmProvider>,
        capabilities: Arc<CapabilityService>,
        worker_id: String,
        tools: Arc<dyn ToolRunner>,
        notifier: Arc<dyn crate::ports::CompletionNotifier>,
        memory: Arc<super::memory::MemoryService>,
    ) -> Self {
        StepService {
            registry: common.registry,
            run_log: common.store.clone(),
            leases: common.store,
            relay: common.relay,
            llm,
            clock: common.clock,
            capabilities,
            validators: common.validators,
            settings: common.settings,
            worker_id,
            claim_counter: AtomicU64::new(0),
            committer: common.committer,
            admission: common.admission,
            tools,
            notifier,
            health: health::CapabilityHealthBook::default(),
            lifecycle: common.lifecycle,
            memory,
        }
    }

    /// How long a worker keeps a step's message hidden at a time while the
    /// step runs (`worker::holding_message`): one node lease, so a dead
    /// holder's message and its node come back together.
    /// The deadline of a step a long-running worker starts now
    /// (`OrchestratorSettings::step_budget`).
    pub fn step_deadline(&self) -> Option<Instant> {
        self.settings
            .step_budget
            .map(|budget| self.clock.now().plus(budget))
    }

    pub fn message_hold(&self) -> Duration {
        self.settings.node_lease
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
        let node_id = message.command.node_id().unwrap_or_default();
        let span = info_span!(
            "step",
            otel.name = message.command.kind_name(),
            run_id = %message.run_id,
            step_id = %message.message_id,
            node_id = %node_id
        );
        crate::observe::run_traces::continue_trace(&span, message.traceparent.as_deref());
        // Boxed: the task a worker spawns for a step holds this future,
        // and spawning moves it; a box is one pointer to move.
        Box::pin(self.handle_inner(message, deadline))
            .instrument(span)
            .await
    }

    async fn handle_inner(
        &self,
        message: &StepMessage,
        deadline: Option<Instant>,
    ) -> Result<StepOutcome, RuntimeError> {
        let (tenant_id, run_id) = (message.tenant_id.as_str(), message.run_id.as_str());
        if let Some(due) = message.not_before {
            let remaining = due.since(self.clock.now());
            if !remaining.is_zero() {
                return Ok(StepOutcome::NotYetDue { remaining });
            }
        }
        // The inner async fns this step awaits are boxed (here and below): a
        // step's future is as large as its largest await, and it stays that
        // large while it waits on a model; ten thousand runs in flight each
        // hold one. Port calls (`async_trait`) come boxed already.
        // The state boxed, and the stored run let go within the block: the
        // state is held until the step's effect is done, and inline it would
        // take its size again in each future it passes through.
        let (state, read_at) = {
            let Some(stored) = self
                .run_log
                .load_run(RunKey::new(tenant_id, run_id))
                .await?
            else {
                return Ok(StepOutcome::RunNotFound);
            };
            let read_at = super::commit::ReadAt::of(&stored);
            (Box::new(stored.state), read_at)
        };
        // A child's end whose outputs came by reference (too large for a
        // message): read from the child run before the engine sees them.
        let resolved;
        let message = match &message.command {
            StepCommand::ChildRunEnded { summary, .. }
                if baton_core::state::run::summary_outputs_by_reference(summary).is_some() =>
            {
                resolved = Box::pin(self.with_child_outputs(message)).await?;
                resolved.as_ref().unwrap_or(message)
            }
            _ => message,
        };
        if is_stale(&state, &message.command) {
            Box::pin(self.relay.resend_pending(tenant_id, run_id)).await?;
            return Ok(StepOutcome::Stale);
        }
        let PlanningRegistry {
            registry,
            relevance,
        } = Box::pin(self.planning_registry(tenant_id, &state, &message.command)).await?;
        let unavailable = Box::pin(self.unavailable_capability(&state, &message.command)).await?;
        let mut engine = self.engine(&registry);
        engine.unavailable_capabilities = &unavailable;
        engine.capability_relevance = relevance.as_deref();
        let escalations_before = state.governance.escalations.len();
        let advance = self.health.deciding(tenant_id, &engine, |engine| {
            begin_step(&state, &message.command, self.clock.now(), engine)
        })?;
        let mut held_claim: Option<HeldClaim> = None;
        let performed = Box::pin(self.perform_effects(
            message,
            state,
            advance,
            &engine,
            &mut held_claim,
            deadline,
        ))
        .await;
        let outcome = match performed {
            Ok(Effects::Ended(outcome)) => return Ok(outcome),
            Ok(Effects::Decided {
                decision,
                performed,
            }) => {
                let calls = health::call_outcomes(
                    &decision,
                    escalations_before,
                    self.clock.now().unix_millis(),
                );
                let committed = Box::pin(self.commit_reapplying_on_conflict(
                    message, read_at, *decision, performed, &engine,
                ))
                .await;
                if matches!(committed, Ok(StepOutcome::Committed { .. })) {
                    self.health.record(tenant_id, calls);
                }
                committed
            }
            Err(error) => Err(error),
        };
        if outcome.is_err()
            && let Some(claim) = &held_claim
            && let Err(error) = self
                .leases
                .release_claim(
                    RunKey::new(tenant_id, run_id),
                    &claim.stored_key,
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
        state: Box<RunState>,
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
                    Box::pin(self.relay.resend_pending(tenant_id, run_id)).await?;
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
                    if let Some((key, attempt)) = effect.claim() {
                        let claiming = self.claim(
                            message,
                            (key, attempt),
                            claim_frames,
                            (current.trace, &current.correlation_id),
                        );
                        match Box::pin(claiming).await? {
                            Ok(claim) => *held_claim = Some(claim),
                            Err(busy) => return Ok(Effects::Ended(busy)),
                        }
                    }
                    // Both boxed: the effect's future is large, a step's
                    // future holding it inline is copied whole each time it
                    // moves (into its task, into the timeout), and
                    // `holding_lease` would hold it twice (argument, local).
                    let performing = Box::pin(self.holding_lease(
                        message,
                        held_claim.as_ref(),
                        Box::pin(self.perform(&current, effect, engine)),
                    ));
                    let held = match self.time_left(deadline)? {
                        None => performing.await,
                        Some(budget) => match tokio::time::timeout(budget, performing).await {
                            Ok(held) => held,
                            Err(_) => return Err(self.out_of_time(deadline)),
                        },
                    };
                    let Some(done) = held else {
                        // The run ended meanwhile (cancelled): the call was
                        // dropped, and nothing of it is committed.
                        return Ok(Effects::Ended(StepOutcome::Stale));
                    };
                    let done = done?;
                    // These may ask for another effect: the state is needed again.
                    if done.may_ask_again() {
                        state = Some(current.clone());
                    }
                    advance = self.health.deciding(tenant_id, engine, |engine| {
                        resume_step(*current, &message.command, &done, self.clock.now(), engine)
                    })?;
                    performed = Some(Box::new(done));
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
    /// frames (stamped with the run's `trace`). `Err(Busy)` when another
    /// worker holds it.
    async fn claim(
        &self,
        message: &StepMessage,
        (key, attempt): (ClaimKey, u32),
        start_frames: Vec<EventDraft>,
        (trace, correlation_id): (Option<baton_core::basics::trace_context::RunTrace>, &str),
    ) -> Result<Result<HeldClaim, StepOutcome>, RuntimeError> {
        let stored_key = key.storage_key();
        let now = self.clock.now();
        // One claimant per handling, so two deliveries in the same process are rivals too.
        let claimant = [
            self.worker_id.as_str(),
            "/",
            itoa::Buffer::new().format(self.claim_counter.fetch_add(1, Ordering::Relaxed)),
        ]
        .concat();
        let claim = NodeClaim {
            claim_key: &stored_key,
            attempt,
            worker_id: &claimant,
            now,
            lease_expires_at: now.plus(self.settings.node_lease),
        };
        let start_frames = crate::observe::run_traces::traced_frames(trace.as_ref(), start_frames);
        let published = self.lifecycle.is_heard().then(|| start_frames.clone());
        match self
            .leases
            .claim_node(message.run_key(), claim, start_frames)
            .await?
        {
            ClaimOutcome::Claimed => {
                if let Some(frames) = published {
                    self.lifecycle.publish(
                        &message.tenant_id,
                        &message.run_id,
                        correlation_id,
                        frames,
                    );
                }
                Ok(Ok(HeldClaim {
                    key,
                    stored_key,
                    attempt,
                    claimant,
                }))
            }
            ClaimOutcome::HeldByOther { lease_expires_at } => Ok(Err(StepOutcome::Busy {
                retry_after: lease_expires_at
                    .since(now)
                    .min(self.settings.busy_retry_delay),
            })),
        }
    }

    /// Runs `work` while renewing `claim`'s lease every third of a lease, so
    /// a living worker keeps its node however long the capability takes and
    /// a dead one's lease runs out within one `node_lease`. A renewal that
    /// finds the lease gone (taken over after it expired) is logged: the
    /// work goes on and its commit applies only if still current.
    ///
    /// Each beat also reads the run's status: a run that ended meanwhile
    /// (cancelled, or failed by another step) stops the work there, and
    /// the call in flight (a model's answer, a remote agent's task) is
    /// dropped, its connection closed, instead of running to its end:
    /// `None`. A cancel reaches a call within a third of a lease.
    async fn holding_lease<T>(
        &self,
        message: &StepMessage,
        claim: Option<&HeldClaim>,
        work: impl Future<Output = T>,
    ) -> Option<T> {
        let Some(claim) = claim else {
            return Some(work.await);
        };
        let beat = (self.settings.node_lease / 3).max(Duration::from_millis(10));
        let heartbeat = async {
            loop {
                tokio::time::sleep(beat).await;
                let now = self.clock.now();
                let renewal = NodeClaim {
                    claim_key: &claim.stored_key,
                    attempt: claim.attempt,
                    worker_id: &claim.claimant,
                    now,
                    lease_expires_at: now.plus(self.settings.node_lease),
                };
                let renewed = self.leases.renew_claim(message.run_key(), renewal).await;
                // An ended run's leases may be gone with it: its status first.
                if self.run_has_ended(message).await {
                    tracing::info!(node_id = %claim.key.node_id(), "the run ended while its node was at work: the call in flight is cancelled");
                    return;
                }
                match renewed {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::warn!(node_id = %claim.key.node_id(), claim = %claim.key, "the node's lease was taken over: another worker may be running it too");
                        break;
                    }
                    Err(error) => {
                        tracing::warn!(%error, "could not renew the node's lease; trying again at the next beat");
                    }
                }
            }
            std::future::pending::<()>().await
        };
        tokio::pin!(work);
        tokio::select! {
            biased;
            output = &mut work => Some(output),
            () = heartbeat => None,
        }
    }

    /// Whether the message's run has ended (a failed read says no: the
    /// work goes on and its commit decides).
    async fn run_has_ended(&self, message: &StepMessage) -> bool {
        match self.run_log.load_run(message.run_key()).await {
            Ok(Some(stored)) => stored.state.status().is_terminal(),
            Ok(None) => true,
            Err(error) => {
                tracing::warn!(%error, "could not read the run's status; the work goes on");
                false
            }
        }
    }

    /// Commits through the one protocol; on a version conflict the state
    /// is reloaded and decided again from the same outcome (or, for a step
    /// decided without an effect, begun again): the capability is never
    /// called twice for one attempt.
    async fn commit_reapplying_on_conflict(
        &self,
        message: &StepMessage,
        read_at: super::commit::ReadAt,
        first_decision: Decision,
        performed: Option<Box<Performed>>,
        engine: &EngineContext<'_>,
    ) -> Result<StepOutcome, RuntimeError> {
        let target = CommitTarget {
            tenant_id: &message.tenant_id,
            run_id: &message.run_id,
            consumed_message_id: Some(&message.message_id),
        };
        let decide_again = |state: RunState| {
            let now = self.clock.now();
            let advance =
                self.health.deciding(&message.tenant_id, engine, |engine| {
                    match performed.as_deref() {
                        Some(done) => resume_step(state, &message.command, done, now, engine),
                        None => begin_step(&state, &message.command, now, engine),
                    }
                })?;
            match advance {
                StepAdvance::Decided(decision) => Ok(Decided::Commit(decision)),
                StepAdvance::Stale => Ok(Decided::Nothing(())),
                StepAdvance::Perform(_) => {
                    Err(RuntimeError::Core(baton_core::CoreError::StepDoesNotApply(
                        "re-applying a performed outcome asked for another effect".into(),
                    )))
                }
            }
        };
        let first = Some((read_at, Decided::Commit(Box::new(first_decision))));
        let result = Box::pin(self.committer.commit(target, engine, first, decide_again)).await?;
        Ok(match result {
            CommitResult::Committed { new_version, .. }
            | CommitResult::RunFailedTooLarge {
                new_version: Some(new_version),
                ..
            } => StepOutcome::Committed { new_version },
            CommitResult::Nothing(())
            | CommitResult::RunFailedTooLarge {
                new_version: None, ..
            } => StepOutcome::Stale,
            CommitResult::RunNotFound => StepOutcome::RunNotFound,
        })
    }
}
