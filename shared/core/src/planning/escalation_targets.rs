//! Where a failed node's facets go, known before the run starts:
//!
//! 1. the next-ranked capability that makes them (the plan a replan
//!    without the failed capability would draw);
//! 2. else the catch-all fallback (`catchAll: true`): the envelope's
//!    `policies.fallbackCapability`, else the registry's first; the shipped
//!    registry has one, a person's review task;
//! 3. else nowhere: the run fails with the node.
//!
//! The engine follows the same order when a node fails
//! (`engine/escalation.rs`); `baton plan` prints the answer for every node.

use serde::Serialize;

use crate::CoreError;
use crate::basics::schema::ValidatorCache;
use crate::catalog::registry::Registry;
use crate::contracts::capability::{AgentType, CapabilityRegistration};
use crate::contracts::diagnostics::PlanStatus;
use crate::contracts::envelope::TaskEnvelope;
use crate::contracts::policies::{PlannerPolicy, SelectionPolicy};
use crate::planning::plan::PlanGraph;
use crate::planning::planner::plan_deterministically;

/// `policies.fallbackCapability: "none"`: no catch-all; a node no
/// capability can take over fails the run (an unattended batch that would
/// rather fail fast than wait for a person).
pub const NO_FALLBACK: &str = "none";

/// The catch-all fallback of a run of `envelope`: the one it names (none
/// for `"none"`), else the registry's first (by id).
pub fn catch_all_for<'a>(
    envelope: &TaskEnvelope,
    registry: &'a Registry,
) -> Option<&'a CapabilityRegistration> {
    match &envelope.policies.fallback_capability {
        Some(named) if named == NO_FALLBACK => None,
        Some(named) => registry
            .capability(named)
            .filter(|capability| capability.catch_all),
        None => registry
            .capabilities()
            .find(|capability| capability.catch_all),
    }
}

/// The envelope's `policies.fallbackCapability` names a catch-all
/// capability of the registry (refused at submission otherwise).
pub fn check_fallback_capability(
    envelope: &TaskEnvelope,
    registry: &Registry,
) -> Result<(), CoreError> {
    let Some(named) = &envelope.policies.fallback_capability else {
        return Ok(());
    };
    if named == NO_FALLBACK {
        return Ok(());
    }
    let refuse = |message: String| {
        Err(CoreError::InvalidEnvelope {
            path: "$.policies.fallbackCapability".into(),
            message,
        })
    };
    match registry.capability(named) {
        None => refuse(format!("`{named}` is not a capability of the registry")),
        Some(capability) if !capability.catch_all => refuse(format!(
            "`{named}` is not a catch-all fallback (`catchAll: true`, kind `fallback`); the registry's are: {}",
            {
                let catch_alls: Vec<&str> = registry
                    .capabilities()
                    .filter(|capability| capability.catch_all)
                    .map(|capability| capability.capability_id.as_str())
                    .collect();
                if catch_alls.is_empty() {
                    "none".to_string()
                } else {
                    catch_alls.join(", ")
                }
            }
        )),
        Some(_) => Ok(()),
    }
}

/// Where one node's facets go when it fails.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EscalationTarget {
    pub node_id: String,
    /// `nextCapability`, `fallback` or `none` (the run fails with the node).
    pub via: &'static str,
    /// The capability that takes over; absent with `none`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capability_id: Option<String>,
    /// Whether a person takes over.
    pub person: bool,
}

/// Where each node of `plan` would escalate (builtins do not: they are the
/// orchestrator's own).
pub fn escalation_targets(
    plan: &PlanGraph,
    envelope: &TaskEnvelope,
    registry: &Registry,
    validators: &ValidatorCache,
) -> Vec<EscalationTarget> {
    plan.nodes
        .iter()
        .filter(|node| node.builtin().is_none())
        .map(|node| {
            let next = next_capability(node, envelope, registry, validators);
            let (via, capability) = match next {
                Some(capability) => ("nextCapability", Some(capability)),
                None => match catch_all_for(envelope, registry)
                    .filter(|fallback| fallback.capability_id != node.capability_id)
                {
                    Some(fallback) => ("fallback", Some(fallback)),
                    None => ("none", None),
                },
            };
            EscalationTarget {
                node_id: node.node_id.clone(),
                via,
                capability_id: capability.map(|capability| capability.capability_id.clone()),
                person: capability
                    .is_some_and(|capability| capability.agent_type == AgentType::Human),
            }
        })
        .collect()
}

/// The capability a replan without `node`'s would give its first output
/// facet.
fn next_capability<'a>(
    node: &crate::planning::plan::PlanNode,
    envelope: &TaskEnvelope,
    registry: &'a Registry,
    validators: &ValidatorCache,
) -> Option<&'a CapabilityRegistration> {
    let mut without = envelope.clone();
    without
        .policies
        .planner
        .get_or_insert_with(PlannerPolicy::default)
        .selection
        .get_or_insert_with(SelectionPolicy::default)
        .forbid
        .push(node.capability_id.clone());
    let replanned = plan_deterministically(&without, registry).ok()?;
    let bundle =
        crate::planning::validator::validate_plan(&replanned, &without, registry, validators);
    if bundle.status == PlanStatus::Rejected {
        return None;
    }
    let facet = node.output_facets.first()?;
    replanned
        .nodes
        .iter()
        .find(|candidate| candidate.output_facets.contains(facet))
        .and_then(|candidate| registry.capability(&candidate.capability_id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn capability(fields: serde_json::Value) -> CapabilityRegistration {
        let mut base = json!({"capabilityId": "people.takeOver", "agentType": "human", "version": "1",
                              "displayName": "d", "summary": "s", "kind": "fallback", "catchAll": true,
                              "inputContract": [], "outputContract": []});
        for (key, value) in fields.as_object().unwrap() {
            base[key] = value.clone();
        }
        serde_json::from_value(base).unwrap()
    }

    fn refusal(registry: &Registry, fields: serde_json::Value) -> String {
        match registry.check_capability(&capability(fields), "test") {
            Err(CoreError::InvalidRegistry { path, message, .. }) => format!("{path}: {message}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_catch_all_declares_no_facets_and_is_a_fallback() {
        let mut registry = Registry::default();
        registry
            .add_facet(
                crate::contracts::facet::Facet {
                    name: "draft".into(),
                    title: "d".into(),
                    description: "d".into(),
                    schema: json!({"type": "object"}),
                    semantics: String::new(),
                    direction: crate::contracts::facet::FacetDirection::Bidirectional,
                    required_by_default: true,
                    drives_revisions: false,
                    merge: Default::default(),
                    widget: None,
                    metadata: serde_json::Map::new(),
                },
                "test",
            )
            .unwrap();
        assert!(
            registry
                .check_capability(&capability(json!({})), "test")
                .is_ok()
        );
        assert!(
            refusal(&registry, json!({"kind": "execution"})).starts_with("$.kind:"),
            "a catch-all runs only when a node fails"
        );
        assert!(
            refusal(&registry, json!({"outputContract": ["draft"]}))
                .starts_with("$.outputContract:")
        );
        assert!(
            refusal(&registry, json!({"inputContract": ["draft"]})).starts_with("$.inputContract:")
        );
        // Without `catchAll`, empty contracts are refused as before.
        assert!(refusal(&registry, json!({"catchAll": false})).starts_with("$.outputContract:"));
        registry
            .add_capability(capability(json!({})), "test")
            .unwrap();
        let envelope = TaskEnvelope::parse_value(&json!({
            "objective": "o", "outputContract": {"schema": {"type": "object"}}
        }))
        .unwrap();
        assert_eq!(
            catch_all_for(&envelope, &registry).map(|found| found.capability_id.as_str()),
            Some("people.takeOver"),
            "the registry's catch-all when the envelope names none"
        );
    }
}
