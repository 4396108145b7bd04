//! `baton-a2a-client`: a remote agent speaking A2A (1.0, JSON-RPC binding)
//! invoked as itself for a node, as a provider of the model port: a
//! capability's `remoteAgent` makes its node's request go to provider `a2a`
//! (`baton_core::planning::model_choice::remote_agent_target`), and the router sends
//! it here.
//!
//! - The request (the capability's instructions and the node's context
//!   bundle) is sent as the message's text part, and the node's output
//!   contract as a data part `{"outputSchema"}`: the answer expected.
//! - `SendStreamingMessage`: each status update's text is streamed as a
//!   `delta`; the answer is the first data part of the task's artifacts (or
//!   of the agent's reply message), else their text. The engine validates
//!   it against the contract and re-prompts on a violation, as a model's.
//! - A task that ends failed, rejected or cancelled is a provider error; one
//!   that asks for input or authentication is one too (Baton does not relay
//!   a remote agent's questions).
//! - A call abandoned before its stream ended (the step's deadline, a
//!   dropped step, the time cap) sends `CancelTask` for the remote task.
//! - The card is read through the outbound guard when a capability naming
//!   it is registered ([`RemoteAgentCards`]), and again (then kept) by the
//!   first call of a process.
//!
//! Feature `agent-calls` (the step function, the CLI) makes the calls;
//! without it the crate only checks cards (the api function).
//!
//! A capability's `remoteAgent.headers` (credentials by reference: an SSM
//! parameter, a Secrets Manager secret, a variable) are read when a call
//! starts and sent with it and its `CancelTask`; whatever the agent answers
//! is scrubbed of their values before the engine sees it.
//!
//! Invariants: every connection goes through `baton-outbound` (allow-list,
//! SSRF checks, pinned address, size cap); a call never outlasts its time
//! cap; no answer is invented: no artifact and no reply is an error.

pub mod card;
#[cfg(feature = "agent-calls")]
mod remote_call;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use baton_outbound::{GuardedClient, OutboundPolicy, Resolver, SystemResolver};
use baton_runtime::error::CardRefused;
use baton_runtime::ports::RemoteAgentCards;
use reqwest::Method;
use reqwest::header::{ACCEPT, HeaderMap, HeaderValue};

/// The largest agent card read.
pub const MAX_CARD_BYTES: usize = 256 * 1024;
/// The largest streamed answer read from an agent.
pub const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;
/// How long one call to an agent may take, first byte to last.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// The remote agents of this process: their cards checked and kept, their
/// calls made through the outbound guard.
pub struct RemoteAgents {
    resolver: Arc<dyn Resolver>,
    /// Hosts reachable over plain http (`BATON_OUTBOUND_HTTP_HOSTS`).
    http_allowed_hosts: String,
    /// Card URL → its JSON-RPC interface, once read.
    interfaces: Mutex<HashMap<String, String>>,
    #[cfg_attr(not(feature = "agent-calls"), allow(dead_code))]
    call_timeout: Duration,
    /// Where the agents' `{"secret": …}` headers are read.
    #[cfg_attr(not(feature = "agent-calls"), allow(dead_code))]
    secrets: Arc<dyn baton_runtime::ports::SecretStore>,
    /// Reads the variables `{"env": …}` headers name.
    #[cfg_attr(not(feature = "agent-calls"), allow(dead_code))]
    environment: baton_runtime::ports::EnvironmentLookup,
}

impl RemoteAgents {
    /// `http_allowed_hosts` is the outbound allow-list setting (`host,host`).
    pub fn new(http_allowed_hosts: &str) -> Self {
        RemoteAgents {
            resolver: Arc::new(SystemResolver),
            http_allowed_hosts: http_allowed_hosts.to_string(),
            interfaces: Mutex::new(HashMap::new()),
            call_timeout: CALL_TIMEOUT,
            secrets: Arc::new(baton_runtime::ports::NoSecrets),
            environment: Arc::new(|_| None),
        }
    }

    /// Reads the agents' `{"secret": …}` headers from `secrets` and their
    /// `{"env": …}` headers with `environment`.
    pub fn with_secrets(
        mut self,
        secrets: Arc<dyn baton_runtime::ports::SecretStore>,
        environment: baton_runtime::ports::EnvironmentLookup,
    ) -> Self {
        self.secrets = secrets;
        self.environment = environment;
        self
    }

    /// The headers of `target` with their values read now.
    #[cfg(feature = "agent-calls")]
    async fn credentials_of(
        &self,
        target: &baton_core::contracts::model_request::ModelTarget,
    ) -> Result<remote_call::AgentCredentials, baton_runtime::error::LlmError> {
        use baton_runtime::error::LlmError;
        let resolved = baton_runtime::ports::resolve_headers(
            &target.remote_headers,
            self.secrets.as_ref(),
            self.environment.as_ref(),
        )
        .await
        .map_err(|error| {
            let message = format!("the remote agent {}: {}", target.name, error.message);
            if error.retryable {
                LlmError::Transport {
                    attempts: 1,
                    message,
                }
            } else {
                LlmError::Configuration(message)
            }
        })?;
        let mut headers = HeaderMap::new();
        for (name, value) in &resolved.headers {
            let (Ok(name), Ok(mut value)) = (
                reqwest::header::HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) else {
                return Err(LlmError::Configuration(format!(
                    "the remote agent {}: header `{name}` is not a valid header",
                    target.name
                )));
            };
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        Ok(remote_call::AgentCredentials {
            headers,
            secret_values: resolved
                .secret_values()
                .into_iter()
                .map(String::from)
                .collect(),
        })
    }

    fn client(&self, max_bytes: usize, timeout: Duration) -> GuardedClient {
        let policy = OutboundPolicy {
            max_response_bytes: max_bytes,
            timeout,
            ..OutboundPolicy::default()
        }
        .with_http_allowed_hosts(&self.http_allowed_hosts);
        GuardedClient::new(policy, self.resolver.clone())
    }

    /// Reads the card at `card_url` (no cache): its JSON-RPC interface.
    async fn read_card(&self, card_url: &str) -> Result<String, CardRefused> {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        let response = self
            .client(MAX_CARD_BYTES, Duration::from_secs(10))
            .send(Method::GET, card_url, headers, None)
            .await
            .map_err(|refusal| CardRefused::Unreachable(refusal.to_string()))?;
        if !response.status.is_success() {
            return Err(CardRefused::Status(response.status.as_u16()));
        }
        let card: serde_json::Value = serde_json::from_slice(&response.body)
            .map_err(|error| CardRefused::NotA2a(format!("the card is not JSON: {error}")))?;
        card::json_rpc_interface(&card, response.final_url.as_str())
            .map_err(|problem| CardRefused::NotA2a(problem.to_string()))
    }

    /// Reads the card at `card_url` and keeps its interface.
    async fn read_and_remember(&self, card_url: &str) -> Result<String, CardRefused> {
        let interface = self.read_card(card_url).await?;
        self.interfaces
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(card_url.to_string(), interface.clone());
        Ok(interface)
    }

    /// The interface of `card_url`, read once per process.
    #[cfg(feature = "agent-calls")]
    async fn interface_of(&self, card_url: &str) -> Result<String, CardRefused> {
        if let Some(known) = self
            .interfaces
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(card_url)
        {
            return Ok(known.clone());
        }
        self.read_and_remember(card_url).await
    }
}

#[async_trait]
impl RemoteAgentCards for RemoteAgents {
    async fn check_card(&self, card_url: &str) -> Result<String, CardRefused> {
        self.read_and_remember(card_url).await
    }
}

#[cfg(feature = "agent-calls")]
#[async_trait]
impl baton_runtime::ports::LlmProvider for RemoteAgents {
    fn model_name(&self) -> String {
        "a2a".into()
    }

    async fn complete(
        &self,
        request: &baton_core::state::context::ModelRequest,
        deltas: tokio::sync::mpsc::UnboundedSender<baton_runtime::ports::ModelDelta>,
    ) -> Result<baton_runtime::ports::ModelAnswer, baton_runtime::error::LlmError> {
        use baton_runtime::error::LlmError;
        use baton_runtime::ports::ModelAnswer;
        let Some(target) = request.model.as_deref() else {
            return Err(LlmError::Configuration(
                "a remote agent's request names no agent card".into(),
            ));
        };
        let interface =
            self.interface_of(&target.model_id)
                .await
                .map_err(|why| LlmError::Transport {
                    attempts: 1,
                    message: format!("the agent card at {}: {why}", target.model_id),
                })?;
        let credentials = self.credentials_of(target).await?;
        let client = self.client(MAX_ANSWER_BYTES, self.call_timeout);
        let canceller = remote_call::AbandonedTaskCanceller::new(
            self.client(64 * 1024, Duration::from_secs(10)),
            &interface,
            credentials.headers.clone(),
        );
        let call = remote_call::send_streaming_message(
            &client,
            &interface,
            request,
            &deltas,
            canceller,
            &credentials,
        );
        match tokio::time::timeout(self.call_timeout, call).await {
            Ok(answered) => answered.map(|content| ModelAnswer {
                content,
                usage: Default::default(),
                model: target.name.clone(),
            }),
            Err(_) => Err(LlmError::Timeout { attempts: 1 }),
        }
    }
}
