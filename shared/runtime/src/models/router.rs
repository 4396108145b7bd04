//! One model port over many providers: each request goes to the provider
//! of the catalog model it names (`ModelRequest::model`, chosen per node by
//! `baton_core::planning::model_choice`); a request naming none goes to the
//! deployment's default model. A provider this process cannot reach (no
//! endpoint configured, the offline model outside the CLI) answers with a
//! configuration error that says what to set; it is never silently replaced
//! by another model.
//!
//! Fallback: when the requested model fails after its provider's own
//! retries with a retryable error (rate limited, server error, timeout,
//! transport), its fallbacks (`ModelTarget::fallbacks`) are asked in order,
//! each announced to the stream's reader as `ModelDelta::FellBack` (the step
//! writes a `model_fallback` warning naming both models and the cause). A
//! refused request is not a fallback trigger.
//!
//! The default model, when the catalog names it (`with_default_target`),
//! takes its catalog entry's fallbacks and its provider's limit too, and a
//! request naming it goes to the default provider.
//!
//! Each call runs in a `gen_ai.chat` span (`model_spans`), the
//! OpenTelemetry GenAI conventions' attributes on it.
//!
//! Back-pressure: a provider given a limit (`maxConcurrentCalls` in the
//! catalog) takes at most that many calls at once from this process; the
//! others wait for a permit, so a thousand runs do not open a thousand
//! connections to one provider.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use baton_core::contracts::model_request::ModelTarget;
use baton_core::records::conversation::{SessionAnswer, ToolSession};
use baton_core::state::context::ModelRequest;
use tokio::sync::mpsc::UnboundedSender;

use crate::error::LlmError;
use crate::ports::{LlmProvider, ModelAnswer, ModelDelta, ModelFallback};

/// How this process reaches one provider of the catalog.
#[derive(Clone)]
pub enum ProviderRoute {
    Ready(Arc<dyn LlmProvider>),
    /// Why it cannot be reached, and what to set.
    Unavailable(String),
}

/// What one call answered.
enum Answered {
    Completion(ModelAnswer),
    Turn(SessionAnswer),
}

/// Routes each request to its catalog model's provider.
pub struct ModelRouter {
    default: Arc<dyn LlmProvider>,
    /// The catalog's entry for the default model, when `BATON_LLM_MODEL`
    /// names one: its fallbacks and its provider's limit apply to requests
    /// naming no model (they still go to `default`).
    default_target: Option<ModelTarget>,
    providers: BTreeMap<String, ProviderRoute>,
    /// Providers with a limit on calls at once: their permits.
    limits: BTreeMap<String, Arc<tokio::sync::Semaphore>>,
    /// Model spans carry the prompt and completion (`model_spans`).
    capture_message_content: bool,
}

impl ModelRouter {
    /// Every request goes to `default` until providers are added.
    pub fn new(default: Arc<dyn LlmProvider>) -> Self {
        ModelRouter {
            default,
            default_target: None,
            providers: BTreeMap::new(),
            limits: BTreeMap::new(),
            capture_message_content: false,
        }
    }

    /// At most `calls` requests to provider `name` at once; the others wait.
    pub fn with_limit(mut self, name: impl Into<String>, calls: u32) -> Self {
        let permits = usize::try_from(calls.max(1)).unwrap_or(1);
        self.limits
            .insert(name.into(), Arc::new(tokio::sync::Semaphore::new(permits)));
        self
    }

    /// The default model is the catalog's `target`: requests naming no
    /// model take its fallbacks and its provider's limit.
    /// Model call spans carry the prompt and the completion, redacted
    /// (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`).
    pub fn with_content_capture(mut self, capture: bool) -> Self {
        self.capture_message_content = capture;
        self
    }

    pub fn with_default_target(mut self, target: ModelTarget) -> Self {
        self.default_target = Some(target);
        self
    }

    /// Requests for the models of provider `name` go through `route`.
    pub fn with_provider(mut self, name: impl Into<String>, route: ProviderRoute) -> Self {
        self.providers.insert(name.into(), route);
        self
    }

    /// `request` and then, while the answer is a retryable failure, the same
    /// request to each fallback model in turn.
    async fn with_fallbacks(
        &self,
        request: &ModelRequest,
        session: Option<&ToolSession>,
        deltas: &UnboundedSender<ModelDelta>,
    ) -> Result<Answered, LlmError> {
        let mut answered = self.ask(request, session, deltas).await;
        let Some(target) = request.model.as_deref().or(self.default_target.as_ref()) else {
            return answered;
        };
        let mut failed = target.name.clone();
        for fallback in &target.fallbacks {
            let error = match &answered {
                Err(error) if error.is_retryable() => error.to_string(),
                _ => return answered,
            };
            let _ = deltas.send(ModelDelta::FellBack(Box::new(ModelFallback {
                from: failed.clone(),
                to: fallback.name.clone(),
                cause: error,
            })));
            let mut instead = request.clone();
            instead.model = Some(Box::new(fallback.clone()));
            answered = self.ask(&instead, session, deltas).await;
            failed = fallback.name.clone();
        }
        answered
    }

    /// One call of the provider `request` goes to.
    async fn ask(
        &self,
        request: &ModelRequest,
        session: Option<&ToolSession>,
        deltas: &UnboundedSender<ModelDelta>,
    ) -> Result<Answered, LlmError> {
        let provider = self.provider_for(request)?;
        let target = request.model.as_deref().or(self.default_target.as_ref());
        let limit = target.and_then(|target| self.limits.get(&target.provider));
        let _permit = match limit {
            Some(limit) => Some(limit.acquire().await.map_err(|_| {
                LlmError::Configuration("the provider's call limit was closed".into())
            })?),
            None => None,
        };
        let model = target.map_or_else(|| provider.model_name(), |target| target.name.clone());
        let span = crate::models::spans::model_call_span(
            target.map(|target| target.provider.as_str()),
            &model,
            session.is_some(),
        );
        let capture = self.capture_message_content && !span.is_disabled();
        if capture {
            crate::models::spans::record_input(&span, request, session);
        }
        let call = async {
            match session {
                None => provider
                    .complete(request, deltas.clone())
                    .await
                    .map(Answered::Completion),
                Some(session) => provider
                    .converse(request, session, deltas.clone())
                    .await
                    .map(Answered::Turn),
            }
        };
        let answered = tracing::Instrument::instrument(call, span.clone()).await;
        match &answered {
            Ok(Answered::Completion(answer)) => {
                crate::models::spans::record_answer(&span, &answer.model, &answer.usage, false);
                if capture {
                    crate::models::spans::record_output(&span, &answer.content, None);
                }
            }
            Ok(Answered::Turn(turn)) => {
                let asked_for_tools = !turn.tool_calls.is_empty();
                crate::models::spans::record_answer(
                    &span,
                    &turn.model,
                    &turn.usage,
                    asked_for_tools,
                );
                if capture {
                    crate::models::spans::record_output(&span, &turn.content, Some(turn));
                }
            }
            Err(error) => crate::models::spans::record_failure(&span, error),
        }
        // A catalog model's failure names its provider and model.
        answered.map_err(|error| match target {
            Some(target) => LlmError::Named {
                provider: target.provider.clone(),
                model: target.name.clone(),
                source: Box::new(error),
            },
            None => error,
        })
    }

    /// The provider `request` goes to.
    fn provider_for(&self, request: &ModelRequest) -> Result<&dyn LlmProvider, LlmError> {
        let Some(target) = &request.model else {
            return Ok(self.default.as_ref());
        };
        // The default model, named as every node without a preference names
        // it, is called on the default endpoint as before.
        if self
            .default_target
            .as_ref()
            .is_some_and(|default| default.name == target.name)
        {
            return Ok(self.default.as_ref());
        }
        match self.providers.get(&target.provider) {
            Some(ProviderRoute::Ready(provider)) => Ok(provider.as_ref()),
            Some(ProviderRoute::Unavailable(why)) => Err(LlmError::Configuration(format!(
                "model `{}` is served by provider `{}`, which this process cannot reach: {why}",
                target.name, target.provider
            ))),
            None => Err(LlmError::Configuration(format!(
                "model `{}` names provider `{}`, which this process was not given (the registry's models.json lists the providers)",
                target.name, target.provider
            ))),
        }
    }
}

#[async_trait]
impl LlmProvider for ModelRouter {
    fn model_name(&self) -> String {
        self.default.model_name()
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        match self.with_fallbacks(request, None, &deltas).await? {
            Answered::Completion(answer) => Ok(answer),
            Answered::Turn(_) => Err(LlmError::UnexpectedResponse(
                "a completion was answered as a conversation turn".into(),
            )),
        }
    }

    async fn converse(
        &self,
        request: &ModelRequest,
        session: &ToolSession,
        deltas: UnboundedSender<ModelDelta>,
    ) -> Result<SessionAnswer, LlmError> {
        match self.with_fallbacks(request, Some(session), &deltas).await? {
            Answered::Turn(answer) => Ok(answer),
            Answered::Completion(_) => Err(LlmError::UnexpectedResponse(
                "a conversation turn was answered as a completion".into(),
            )),
        }
    }
}
