//! The policy keys the specifications' sample envelopes send outside the
//! canonical shape, turned into what they mean before a run starts:
//!
//! | legacy key (under `policies`) | becomes |
//! | --- | --- |
//! | `persona`, `brandVoice` | `constraints.persona`, `constraints.brandVoice` (context for the nodes; a constraint already set wins) |
//! | `variantCount` | `policies.planner.topology.variantCount` (checked against the contract's item bounds; a topology value already set wins) |
//! | `hitlRequiredFor: ["final_publish"]`, `requiresHitlApproval: true` | a runtime policy asking a person to approve the final output before the run completes |
//! | `hitlRequiredFor: [<node kind>]` | a runtime policy asking for approval after each node of that kind |
//! | `requiresHitlApproval: false` | nothing (removed) |
//!
//! Each rewrite is returned as a [`LegacyRewrite`], which the run announces
//! as a `warning` `legacy_policy_normalized` naming the key and what it
//! became. A legacy key whose value cannot mean anything (`variantCount:
//! "two"`, `hitlRequiredFor: ["launch_party"]`) is refused naming its path.
//!
//! Invariant: after normalisation no legacy key is left in
//! `policies.hints`; every one acted or was refused.

use serde_json::{Value, json};

use crate::basics::error::CoreError;
use crate::contracts::capability::NodeKind;
use crate::contracts::envelope::TaskEnvelope;
use crate::contracts::policies::{PlannerPolicy, RuntimePolicy, TopologyPolicy};

/// What one legacy key became.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyRewrite {
    /// The key's JSON path as sent (`$.policies.persona`).
    pub field: String,
    /// What it became, in words a caller reads.
    pub became: String,
}

/// The id of the runtime policy `final_publish` becomes.
pub const FINAL_APPROVAL_POLICY_ID: &str = "legacy-final-approval";

/// The legacy keys this module understands.
pub const LEGACY_POLICY_KEYS: [&str; 5] = [
    "persona",
    "brandVoice",
    "variantCount",
    "hitlRequiredFor",
    "requiresHitlApproval",
];

fn invalid(path: &str, message: impl Into<String>) -> CoreError {
    CoreError::InvalidEnvelope {
        path: path.to_string(),
        message: message.into(),
    }
}

/// Rewrites `envelope`'s legacy policy keys into canonical policies and
/// constraints; what each became, in key order.
pub fn normalize_legacy_policies(
    envelope: &mut TaskEnvelope,
) -> Result<Vec<LegacyRewrite>, CoreError> {
    let mut rewrites = Vec::new();
    for key in ["persona", "brandVoice"] {
        let Some(value) = envelope.policies.hints.remove(key) else {
            continue;
        };
        let field = format!("$.policies.{key}");
        let became = if envelope.constraints.other.contains_key(key) {
            format!("dropped: `constraints.{key}` is already set and wins")
        } else {
            envelope.constraints.other.insert(key.to_string(), value);
            format!("`constraints.{key}`, context for the nodes")
        };
        rewrites.push(LegacyRewrite { field, became });
    }
    if let Some(value) = envelope.policies.hints.remove("variantCount") {
        let field = "$.policies.variantCount";
        let count = value
            .as_u64()
            .filter(|count| *count >= 1)
            .and_then(|count| u32::try_from(count).ok())
            .ok_or_else(|| {
                invalid(
                    field,
                    format!("must be a whole number of at least 1 (got {value})"),
                )
            })?;
        let topology = envelope
            .policies
            .planner
            .get_or_insert_with(PlannerPolicy::default)
            .topology
            .get_or_insert_with(TopologyPolicy::default);
        let became = match topology.variant_count {
            Some(set) => format!(
                "dropped: `policies.planner.topology.variantCount` is already {set} and wins"
            ),
            None => {
                topology.variant_count = Some(count);
                format!("`policies.planner.topology.variantCount: {count}`")
            }
        };
        rewrites.push(LegacyRewrite {
            field: field.into(),
            became,
        });
    }
    let mut gates: Vec<(String, String)> = Vec::new();
    if let Some(value) = envelope.policies.hints.remove("requiresHitlApproval") {
        let field = "$.policies.requiresHitlApproval";
        match value.as_bool() {
            Some(true) => gates.push((field.into(), "final_publish".into())),
            Some(false) => rewrites.push(LegacyRewrite {
                field: field.into(),
                became: "nothing: no approval is asked".into(),
            }),
            None => {
                return Err(invalid(
                    field,
                    format!("must be true or false (got {value})"),
                ));
            }
        }
    }
    if let Some(value) = envelope.policies.hints.remove("hitlRequiredFor") {
        let entries = value.as_array().ok_or_else(|| {
            invalid(
                "$.policies.hitlRequiredFor",
                format!("must be a list of `final_publish` or node kinds (got {value})"),
            )
        })?;
        for (index, entry) in entries.iter().enumerate() {
            let field = format!("$.policies.hitlRequiredFor[{index}]");
            let name = entry
                .as_str()
                .ok_or_else(|| invalid(&field, format!("must be a string (got {entry})")))?;
            gates.push((field, name.to_string()));
        }
    }
    let mut final_approval_added = false;
    for (field, gate) in gates {
        let became = if gate == "final_publish" {
            if !final_approval_added {
                envelope.policies.runtime.push(final_approval_policy()?);
                final_approval_added = true;
            }
            format!(
                "runtime policy `{FINAL_APPROVAL_POLICY_ID}`: a person approves the final output before the run completes"
            )
        } else {
            let kind = NODE_KINDS
                .iter()
                .find(|kind| kind.as_str() == gate)
                .ok_or_else(|| {
                    let known: Vec<&str> = NODE_KINDS.iter().map(|kind| kind.as_str()).collect();
                    invalid(
                        &field,
                        format!(
                            "`{gate}` is neither `final_publish` nor a node kind ({})",
                            known.join(", ")
                        ),
                    )
                })?;
            let id = format!("legacy-approval-{}", kind.as_str());
            if !envelope
                .policies
                .runtime
                .iter()
                .any(|policy| policy.id == id)
            {
                envelope
                    .policies
                    .runtime
                    .push(kind_approval_policy(&id, kind.as_str())?);
            }
            format!(
                "runtime policy `{id}`: a person approves each `{}` node's output",
                kind.as_str()
            )
        };
        rewrites.push(LegacyRewrite { field, became });
    }
    rewrites.sort_by(|first, second| first.field.cmp(&second.field));
    expand_review_derived(envelope)?;
    Ok(rewrites)
}

const NODE_KINDS: [NodeKind; 6] = [
    NodeKind::Structuring,
    NodeKind::Branch,
    NodeKind::Execution,
    NodeKind::Transformation,
    NodeKind::Validation,
    NodeKind::Fallback,
];

fn policy(definition: Value) -> Result<RuntimePolicy, CoreError> {
    serde_json::from_value(definition)
        .map_err(|error| invalid("$.policies.runtime", error.to_string()))
}

/// The id of the runtime policy `policies.reviewDerived` becomes.
pub const REVIEW_DERIVED_POLICY_ID: &str = "review-derived";

/// `policies.reviewDerived: true` as the runtime policy it stands for (a
/// canonical shorthand, not a legacy key: no rewrite is said). Called with
/// the legacy normalisation, wherever an envelope is submitted or planned.
pub fn expand_review_derived(envelope: &mut TaskEnvelope) -> Result<(), CoreError> {
    if !envelope.policies.review_derived
        || envelope
            .policies
            .runtime
            .iter()
            .any(|policy| policy.id == REVIEW_DERIVED_POLICY_ID)
    {
        return Ok(());
    }
    envelope.policies.runtime.push(policy(json!({
        "id": REVIEW_DERIVED_POLICY_ID,
        "trigger": {"kind": "onNodeComplete", "selector": {"derived": true}},
        "action": {"type": "hitl", "rationale": "policies.reviewDerived: a person approves a derived capability's output"}
    }))?);
    Ok(())
}

/// Approval when the last node of the plan completes: every node done.
fn final_approval_policy() -> Result<RuntimePolicy, CoreError> {
    policy(json!({
        "id": FINAL_APPROVAL_POLICY_ID,
        "trigger": {"kind": "onNodeComplete",
                    "condition": {"==": [{"var": "$metrics.nodesCompleted"}, {"var": "$metrics.nodesTotal"}]}},
        "action": {"type": "hitl", "rationale": "policies.hitlRequiredFor: final_publish: approve the final output before it is published"}
    }))
}

/// Approval after each node of `kind`.
fn kind_approval_policy(id: &str, kind: &str) -> Result<RuntimePolicy, CoreError> {
    policy(json!({
        "id": id,
        "trigger": {"kind": "onNodeComplete", "selector": {"kind": kind}},
        "action": {"type": "hitl", "rationale": format!("policies.hitlRequiredFor: {kind}: approve this node's output")}
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(policies: Value) -> TaskEnvelope {
        TaskEnvelope::parse_value(&json!({
            "objective": "o",
            "outputContract": {"schema": {"type": "object"}},
            "policies": policies
        }))
        .unwrap()
    }

    #[test]
    fn every_legacy_key_becomes_its_canonical_form_and_says_so() {
        let mut parsed = envelope(
            json!({"persona": "marketer", "brandVoice": "warm", "variantCount": 2,
                                         "hitlRequiredFor": ["final_publish", "validation"], "requiresHitlApproval": true}),
        );
        let rewrites = normalize_legacy_policies(&mut parsed).unwrap();
        let fields: Vec<&str> = rewrites
            .iter()
            .map(|rewrite| rewrite.field.as_str())
            .collect();
        assert_eq!(
            fields,
            [
                "$.policies.brandVoice",
                "$.policies.hitlRequiredFor[0]",
                "$.policies.hitlRequiredFor[1]",
                "$.policies.persona",
                "$.policies.requiresHitlApproval",
                "$.policies.variantCount"
            ]
        );
        assert_eq!(parsed.constraints.other["persona"], "marketer");
        assert_eq!(parsed.constraints.other["brandVoice"], "warm");
        let topology = parsed
            .policies
            .planner
            .as_ref()
            .unwrap()
            .topology
            .as_ref()
            .unwrap();
        assert_eq!(topology.variant_count, Some(2));
        let ids: Vec<&str> = parsed
            .policies
            .runtime
            .iter()
            .map(|policy| policy.id.as_str())
            .collect();
        assert_eq!(
            ids,
            [FINAL_APPROVAL_POLICY_ID, "legacy-approval-validation"],
            "final_publish once"
        );
        for key in LEGACY_POLICY_KEYS {
            assert!(!parsed.policies.hints.contains_key(key), "{key} is left");
        }
    }

    #[test]
    fn canonical_values_win_and_false_asks_nothing() {
        let mut parsed = TaskEnvelope::parse_value(&json!({
            "objective": "o", "outputContract": {"schema": {"type": "object"}},
            "constraints": {"persona": "editor"},
            "policies": {"persona": "marketer", "variantCount": 3, "requiresHitlApproval": false,
                         "planner": {"topology": {"variantCount": 2}}}
        }))
        .unwrap();
        let rewrites = normalize_legacy_policies(&mut parsed).unwrap();
        assert_eq!(parsed.constraints.other["persona"], "editor");
        assert_eq!(
            parsed
                .policies
                .planner
                .unwrap()
                .topology
                .unwrap()
                .variant_count,
            Some(2)
        );
        assert!(parsed.policies.runtime.is_empty());
        assert!(
            rewrites
                .iter()
                .all(|rewrite| rewrite.became.starts_with("dropped")
                    || rewrite.became.starts_with("nothing")),
            "{rewrites:?}"
        );
    }

    #[test]
    fn a_legacy_value_that_means_nothing_is_refused_naming_its_path() {
        for (policies, path) in [
            (json!({"variantCount": "two"}), "$.policies.variantCount"),
            (json!({"variantCount": 0}), "$.policies.variantCount"),
            (
                json!({"requiresHitlApproval": "yes"}),
                "$.policies.requiresHitlApproval",
            ),
            (
                json!({"hitlRequiredFor": "final_publish"}),
                "$.policies.hitlRequiredFor",
            ),
            (
                json!({"hitlRequiredFor": ["final_publish", "launch_party"]}),
                "$.policies.hitlRequiredFor[1]",
            ),
            (
                json!({"hitlRequiredFor": [7]}),
                "$.policies.hitlRequiredFor[0]",
            ),
        ] {
            let mut parsed = envelope(policies.clone());
            match normalize_legacy_policies(&mut parsed) {
                Err(CoreError::InvalidEnvelope { path: found, .. }) => {
                    assert_eq!(found, path, "{policies}")
                }
                other => panic!("{policies}: refused, got {other:?}"),
            }
        }
    }
}
