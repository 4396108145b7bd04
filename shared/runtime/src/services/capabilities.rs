//! Capability registrations (an agent advertises a capability, re-posting
//! is its heartbeat) and the capability snapshot a tenant's planner sees.

use std::sync::Arc;

use baton_core::basics::schema::ValidatorCache;
use baton_core::catalog::registry::Registry;
use baton_core::contracts::capability::{
    CapabilityRegistration, CapabilityStatus, RegisteredCapability,
};
use baton_core::contracts::compiler::{ContractDirection, compile_contract};
use serde_json::Value;

use crate::error::RuntimeError;
use crate::ports::{CapabilityDirectory, Clock};

/// A stored registration, its status now, and the contracts it compiles to.
pub struct Registered {
    pub record: RegisteredCapability,
    pub status: CapabilityStatus,
    pub input_schema: Arc<Value>,
    pub output_schema: Arc<Value>,
}

/// The capabilities one tenant's planner works with.
pub struct CapabilitySnapshot {
    /// The registry files plus the tenant's active registrations.
    pub registry: Arc<Registry>,
    /// Every registration of the tenant with its status now.
    pub registrations: Vec<(RegisteredCapability, CapabilityStatus)>,
}

/// What `GET /capabilities` lists.
pub struct CapabilityListing {
    /// The registry files (every tenant has these).
    pub registry: Arc<Registry>,
    /// The tenant's registrations with their status now.
    pub registrations: Vec<(RegisteredCapability, CapabilityStatus)>,
}

pub struct CapabilityService {
    registry: Arc<Registry>,
    directory: Arc<dyn CapabilityDirectory>,
    validators: Arc<ValidatorCache>,
    clock: Arc<dyn Clock>,
    remote_agents: Arc<dyn crate::ports::RemoteAgentCards>,
    /// The deployment's embedding model, for the search by meaning.
    pub(super) embedder: Option<Arc<dyn crate::ports::TextEmbedder>>,
    /// Capabilities' vectors made so far, by text (`capability_search`).
    pub(super) search_vectors: std::sync::Mutex<std::collections::HashMap<String, Arc<Vec<f32>>>>,
}

impl CapabilityService {
    pub fn new(
        registry: Arc<Registry>,
        directory: Arc<dyn CapabilityDirectory>,
        validators: Arc<ValidatorCache>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        CapabilityService {
            registry,
            directory,
            validators,
            clock,
            remote_agents: Arc::new(crate::ports::NoRemoteAgents),
            embedder: None,
            search_vectors: Default::default(),
        }
    }

    /// Searches rank by meaning too, with `embedder`'s vectors.
    pub fn with_embedder(mut self, embedder: Option<Arc<dyn crate::ports::TextEmbedder>>) -> Self {
        self.embedder = embedder;
        self
    }

    /// Remote agents' cards are checked with `cards` when registered.
    pub fn with_remote_agents(mut self, cards: Arc<dyn crate::ports::RemoteAgentCards>) -> Self {
        self.remote_agents = cards;
        self
    }

    /// Validates and stores a capability registration (or heartbeat) for
    /// `tenant_id`: the payload parses (JSON paths on errors), its facets
    /// exist in the catalog in the right direction, its merged input and
    /// output schemas compile, and its id is not one of the registry files'.
    /// Returns the stored record and the compiled contracts the capability
    /// will be held to (recompiled from the catalog at each planning step).
    pub async fn register(
        &self,
        tenant_id: &str,
        payload: &Value,
    ) -> Result<Registered, RuntimeError> {
        let registration = CapabilityRegistration::parse_value(payload)
            .map_err(|(path, message)| RuntimeError::InvalidRegistration { path, message })?;
        if registration.prompt_template_file.is_some() {
            return Err(RuntimeError::InvalidRegistration {
                path: "$.promptTemplateFile".into(),
                message:
                    "only registry files may name a prompt file; send the text as `instructions`"
                        .into(),
            });
        }
        // Its models are the catalog's, able to do what its nodes need.
        baton_core::planning::model_choice::check_capability_models(
            &registration,
            self.registry.models(),
        )
        .map_err(|(path, message)| RuntimeError::InvalidRegistration { path, message })?;
        if self
            .registry
            .capability(&registration.capability_id)
            .is_some()
        {
            return Err(RuntimeError::RegistrationConflict {
                capability_id: registration.capability_id,
                message: "is defined by the registry files and cannot be replaced by a registration; register under another id (e.g. a scoped one like `writer.fr`)".into(),
            });
        }
        self.registry
            .check_capability(&registration, "registration")
            .map_err(|error| match error {
                baton_core::CoreError::InvalidRegistry { path, message, .. } => {
                    RuntimeError::InvalidRegistration { path, message }
                }
                other => RuntimeError::Core(other),
            })?;
        let input_schema = self.compiled_schema(
            &registration.input_contract,
            ContractDirection::Input,
            "$.inputContract",
        )?;
        let output_schema = self.compiled_schema(
            &registration.output_contract,
            ContractDirection::Output,
            "$.outputContract",
        )?;
        // A remote agent's card is read now: a registration never names an
        // agent that cannot be reached or does not speak A2A.
        if let Some(agent) = &registration.remote_agent {
            self.remote_agents
                .check_card(&agent.card_url)
                .await
                .map_err(|why| RuntimeError::InvalidRegistration {
                    path: "$.remoteAgent.cardUrl".into(),
                    message: format!("the agent card was refused: {why}"),
                })?;
        }
        let now = self.clock.now().unix_millis();
        let record = RegisteredCapability {
            registration,
            registered_at_millis: now,
            last_seen_at_millis: now,
        };
        let record = self
            .directory
            .upsert_registration(tenant_id, record)
            .await?;
        let status = record.status_at(now);
        Ok(Registered {
            record,
            status,
            input_schema,
            output_schema,
        })
    }

    fn compiled_schema(
        &self,
        facets: &[String],
        direction: ContractDirection,
        path: &str,
    ) -> Result<Arc<Value>, RuntimeError> {
        let compiled = compile_contract(&self.registry.facets, facets, direction, &|_| None)
            .map_err(|error| RuntimeError::InvalidRegistration {
                path: path.into(),
                message: error.to_string(),
            })?;
        self.validators
            .validator_for(&compiled.schema, path)
            .map_err(|error| RuntimeError::InvalidRegistration {
                path: path.into(),
                message: format!("the merged schema does not compile: {error}"),
            })?;
        Ok(compiled.schema)
    }

    /// A heartbeat for `capability_id`'s registration: it is seen now, and
    /// active again if it had lapsed. Its status is returned with it.
    pub async fn heartbeat(
        &self,
        tenant_id: &str,
        capability_id: &str,
    ) -> Result<(RegisteredCapability, CapabilityStatus), RuntimeError> {
        let now = self.clock.now().unix_millis();
        let record = self
            .directory
            .renew_heartbeat(tenant_id, capability_id, now)
            .await?
            .ok_or_else(|| RuntimeError::CapabilityNotRegistered(capability_id.to_string()))?;
        let status = record.status_at(now);
        Ok((record, status))
    }

    /// Removes `capability_id`'s registration: the planner stops using it
    /// at once, and a run's node of it is escalated before it is called.
    pub async fn deregister(
        &self,
        tenant_id: &str,
        capability_id: &str,
    ) -> Result<(), RuntimeError> {
        if self.directory.deregister(tenant_id, capability_id).await? {
            Ok(())
        } else {
            Err(RuntimeError::CapabilityNotRegistered(
                capability_id.to_string(),
            ))
        }
    }

    /// The registered capabilities of `tenant_id` that are not active now:
    /// lapsed (no heartbeat within their timeout) or gone (deregistered),
    /// among `capability_ids` (a registry file's capability is always
    /// active and is not looked up).
    pub async fn inactive_among(
        &self,
        tenant_id: &str,
        capability_ids: &[&str],
    ) -> Result<std::collections::BTreeSet<String>, RuntimeError> {
        let registered: Vec<&str> = capability_ids
            .iter()
            .copied()
            .filter(|id| self.registry.capability(id).is_none())
            .collect();
        if registered.is_empty() {
            return Ok(Default::default());
        }
        let now = self.registrations_now(tenant_id).await?;
        Ok(registered
            .into_iter()
            .filter(|id| {
                !now.iter().any(|(record, status)| {
                    record.registration.capability_id == *id && *status == CapabilityStatus::Active
                })
            })
            .map(str::to_string)
            .collect())
    }

    async fn registrations_now(
        &self,
        tenant_id: &str,
    ) -> Result<Vec<(RegisteredCapability, CapabilityStatus)>, RuntimeError> {
        let now = self.clock.now().unix_millis();
        Ok(self
            .directory
            .list_registrations(tenant_id)
            .await?
            .into_iter()
            .map(|record| {
                let status = record.status_at(now);
                (record, status)
            })
            .collect())
    }

    /// The registry files (every tenant's, no tenant's registrations).
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The registry files' capabilities and `tenant_id`'s registrations.
    pub async fn list(&self, tenant_id: &str) -> Result<CapabilityListing, RuntimeError> {
        Ok(CapabilityListing {
            registry: self.registry.clone(),
            registrations: self.registrations_now(tenant_id).await?,
        })
    }

    /// What `tenant_id`'s planner sees: the registry files plus the
    /// tenant's active registrations (inactive ones are listed, not used).
    pub async fn snapshot(&self, tenant_id: &str) -> Result<CapabilitySnapshot, RuntimeError> {
        let registrations = self.registrations_now(tenant_id).await?;
        let active = registrations
            .iter()
            .filter(|(_, status)| *status == CapabilityStatus::Active)
            .map(|(record, _)| &record.registration);
        let registry = if registrations.is_empty() {
            self.registry.clone()
        } else {
            let (snapshot, left_out) = self.registry.with_additional_capabilities(active);
            for (capability_id, error) in left_out {
                tracing::warn!(%capability_id, %error, "a registered capability no longer fits the registry; the planner skips it");
            }
            Arc::new(snapshot)
        };
        Ok(CapabilitySnapshot {
            registry,
            registrations,
        })
    }
}
