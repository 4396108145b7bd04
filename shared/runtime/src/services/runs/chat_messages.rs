//! Chat messages as runs: a message (with its thread's recent exchanges)
//! becomes a chat run whose one node is the orchestrator's chat agent or a
//! specialist. Nothing is stored for a request that cannot be answered
//! (an unknown agent, context type or thread).

use baton_core::engine::{NewRunIdentity, queue_chat_run, start_chat_run};
use baton_core::planning::chat_plan::check_chat_request;
use baton_core::records::chat::ChatTurn;
use baton_core::records::thread_lane::{Admission, MultitaskStrategy};

use super::{RunService, SubmittedRun};
use crate::error::RuntimeError;
use crate::services::admission::{NewRun, TenantLimitCheck, UnsentFirstSteps};

/// The longest message a chat run takes, in characters.
pub const MAX_CHAT_MESSAGE_CHARS: usize = 32_000;

/// One chat message as a caller sends it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    pub message: String,
    /// The thread to continue; a new one when absent.
    pub thread_id: Option<String>,
    /// A registered specialist to talk to instead of the orchestrator.
    pub agent: Option<String>,
    /// A context type of the registry (its guidance joins the prompt).
    pub context_type: Option<String>,
    /// Facet values for the plans the conversation creates (each checked
    /// against its facet's schema, as an envelope's inputs are).
    pub inputs: serde_json::Map<String, serde_json::Value>,
    /// The entity the conversation is about.
    pub entity_id: Option<String>,
    /// The signed-in person sending it (the caller's `sub`), when known:
    /// a chat whose settings remember preferences keeps theirs.
    pub user: Option<String>,
    /// What this message does if its thread is still answering another
    /// (`baton_core::records::thread_lane::MultitaskStrategy`; `enqueue` when unsaid).
    pub multitask_strategy: MultitaskStrategy,
}

/// The longest `entityId` a chat message takes.
const MAX_ENTITY_ID_CHARS: usize = 256;

impl RunService {
    /// Starts a chat run for `request`. An unknown thread is an error
    /// (`ThreadNotFound`), as are an unknown agent or context type
    /// (`InvalidInput` naming `$.agent` / `$.contextType`). On a thread
    /// still answering another message, the request's `multitaskStrategy`
    /// decides (`chat_admission`): refused (`ThreadBusy`), queued (the run
    /// is created `queued` and starts when the one ahead ends), or the
    /// runs in flight cut short.
    pub async fn submit_chat(
        &self,
        tenant_id: &str,
        request: &ChatRequest,
    ) -> Result<SubmittedRun, RuntimeError> {
        self.submit_chat_traced(tenant_id, request, None).await
    }

    /// [`Self::submit_chat`], the chat run's trace under `caller` (the
    /// request's W3C `traceparent`) when there is one.
    pub async fn submit_chat_traced(
        &self,
        tenant_id: &str,
        request: &ChatRequest,
        caller: Option<baton_core::basics::trace_context::TraceParent>,
    ) -> Result<SubmittedRun, RuntimeError> {
        check_chat_request(
            &self.registry,
            request.agent.as_deref(),
            request.context_type.as_deref(),
        )
        .map_err(|(path, message)| RuntimeError::InvalidInput { path, message })?;
        self.check_inputs(&request.inputs)?;
        if let Some(entity_id) = &request.entity_id
            && (entity_id.trim().is_empty() || entity_id.chars().count() > MAX_ENTITY_ID_CHARS)
        {
            return Err(RuntimeError::InvalidInput {
                path: "$.entityId".into(),
                message: format!(
                    "must be a non-empty string of at most {MAX_ENTITY_ID_CHARS} characters"
                ),
            });
        }
        if request.message.chars().count() > MAX_CHAT_MESSAGE_CHARS {
            return Err(RuntimeError::InvalidInput {
                path: "$.message".into(),
                message: format!("longer than {MAX_CHAT_MESSAGE_CHARS} characters"),
            });
        }
        // A chat message starts a run: the tenant's limits hold for it as
        // for a submission.
        let limits = self.admission.check_tenant_limits(tenant_id).await?;
        let run_id = self.ids.new_id("run");
        let (thread_id, admission, (history, summary)) = match &request.thread_id {
            None => {
                let thread_id = self.ids.new_id("thread");
                let (admission, _) = self
                    .admit_on_thread(tenant_id, &thread_id, &run_id, request, true)
                    .await?;
                (thread_id, admission, (Vec::new(), None))
            }
            Some(thread_id) => {
                let (admission, lane) = self
                    .admit_on_thread(tenant_id, thread_id, &run_id, request, false)
                    .await?;
                if let Admission::Replace {
                    cancelled,
                    rollback,
                } = &admission
                {
                    self.cut_short(tenant_id, thread_id, &run_id, cancelled, *rollback)
                        .await?;
                }
                let history = self
                    .committer
                    .thread_history(tenant_id, thread_id, &lane)
                    .await?;
                (thread_id.clone(), admission, history)
            }
        };
        let identity = NewRunIdentity {
            run_id: run_id.clone(),
            tenant_id: tenant_id.to_string(),
            correlation_id: self.ids.new_id("corr"),
            thread_id: thread_id.clone(),
            trace: Some(crate::observe::run_traces::new_run_trace(caller)),
            submitted_by: None,
        };
        // Plans drafted earlier and not run yet stay on offer.
        let pending_drafts = history
            .last()
            .map(|exchange| exchange.drafts.clone())
            .unwrap_or_default();
        let turn = ChatTurn {
            thread_id,
            message: request.message.clone(),
            user: request.user.clone(),
            agent: request.agent.clone(),
            context_type: request.context_type.clone(),
            history,
            summary,
            pending_drafts,
            new_drafts: Vec::new(),
            inputs: request.inputs.clone(),
            entity_id: request.entity_id.clone(),
            waiting_on_thread: false,
            lane_releases: Default::default(),
        };
        let decision = match &admission {
            Admission::Queue { ahead } => queue_chat_run(identity, turn, self.clock.now(), ahead)?,
            _ => start_chat_run(identity, turn, self.clock.now())?,
        };
        let thread_id = decision.state.thread_id.clone();
        let admitted = self
            .admission
            .admit(NewRun {
                decision,
                idempotency_key: None,
                limits: TenantLimitCheck::Passed(limits),
                unsent: UnsentFirstSteps::LeftToTheSweeper,
            })
            .await?;
        let mut submitted = SubmittedRun::from(admitted);
        // Settled after the run exists: the lane may have moved meanwhile.
        if let Some(status) = self
            .settle_admission(tenant_id, &thread_id, &run_id, &admission)
            .await?
        {
            submitted.status = status;
        }
        Ok(submitted)
    }
}
