//! One model port over many providers: each request goes to the provider
//! of the catalog model it names (`ModelRequest::model`, chosen per node by
//! `baton_core::model_choice`); a request naming none goes to the
//! deployment's default model. A provider this process cannot reach (no
//! endpoint configured, the offline model outside the CLI) answers with a
//! configuration error that says what to set; it is never silently replaced
//! by another model.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use baton_core::context::ModelRequest;
use baton_core::conversation::{SessionAnswer, ToolSession};
use tokio::sync::mpsc::UnboundedSender;

use crate::error::LlmError;
use crate::ports::{LlmProvider, ModelAnswer, ModelDelta};

/// How this process reaches one provider of the catalog.
#[derive(Clone)]
pub enum ProviderRoute {
    Ready(Arc<dyn LlmProvider>),
    /// Why it cannot be reached, and what to set.
    Unavailable(String),
}

/// Routes each request to its catalog model's provider.
pub struct ModelRouter {
    default: Arc<dyn LlmProvider>,
    providers: BTreeMap<String, ProviderRoute>,
}

impl ModelRouter {
    /// Every request goes to `default` until providers are added.
    pub fn new(default: Arc<dyn LlmProvider>) -> Self {
        ModelRouter {
            default,
            providers: BTreeMap::new(),
        }
    }

    /// Requests for the models of provider `name` go through `route`.
    pub fn with_provider(mut self, name: impl Into<String>, route: ProviderRoute) -> Self {
        self.providers.insert(name.into(), route);
        self
    }

    /// The provider `request` goes to.
    fn provider_for(&self, request: &ModelRequest) -> Result<&dyn LlmProvider, LlmError> {
        let Some(target) = &request.model else {
            return Ok(self.default.as_ref());
        };
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
        self.provider_for(request)?.complete(request, deltas).await
    }

    async fn converse(
        &self,
        request: &ModelRequest,
        session: &ToolSession,
        deltas: UnboundedSender<ModelDelta>,
    ) -> Result<SessionAnswer, LlmError> {
        self.provider_for(request)?
            .converse(request, session, deltas)
            .await
    }
}
