//! A runtime policy's condition checked at submission against what its
//! trigger gives it to read, so a misspelled name is refused instead of
//! making the guard silently false. The operators were checked when the
//! envelope was parsed (`basics::logic::check_expression`); here, the
//! variables, which need the registry:
//!
//! - `onValidationFail` reads `attempt`, `violations`, `$node` and
//!   `$metrics`: any other name is refused.
//! - `onNodeComplete` reads the completed node's output fields (its facets)
//!   and `$node`, `$metrics`. With a selector naming a capability of the
//!   registry, the fields are that capability's output facets; otherwise
//!   any facet of the registry's catalog (a node chosen at run time, or a
//!   capability registered later, may produce it). A name outside those is
//!   refused. A name that only the run can settle (a facet the matched node
//!   turns out not to produce) is a `policy_condition_unreadable` warning
//!   when the condition is evaluated (`engine/policy.rs`).
//!
//! - `onMetricBelow` reads its `metric`: a run metric, or a dotted path
//!   into a node's output whose first segment is a registry facet; any
//!   other is refused at `$.policies.runtime[i].trigger.metric`.
//!
//! A refusal names the JSON path of the `var` and the name.

use crate::CoreError;
use crate::basics::logic::variables_read;
use crate::catalog::registry::Registry;
use crate::contracts::envelope::TaskEnvelope;
use crate::contracts::policies::PolicyTrigger;

/// Every runtime policy condition of `envelope` reads only names its
/// trigger provides; the error names the first that does not.
pub fn check_policy_conditions(
    envelope: &TaskEnvelope,
    registry: &Registry,
) -> Result<(), CoreError> {
    for (index, policy) in envelope.policies.runtime.iter().enumerate() {
        if let PolicyTrigger::OnMetricBelow { metric, .. } = &policy.trigger {
            check_metric(index, metric, registry)?;
            continue;
        }
        let Some(condition) = policy.trigger.condition() else {
            continue;
        };
        let provided = policy.trigger.provided_variables();
        let output_fields: Option<Vec<String>> = match &policy.trigger {
            PolicyTrigger::OnNodeComplete { selector, .. } => Some(
                match selector
                    .as_ref()
                    .and_then(|selector| selector.capability_id.as_deref())
                {
                    Some(capability_id) => match registry.capability(capability_id) {
                        Some(capability) => capability.output_contract.clone(),
                        // Registered later, if at all: only the run can tell.
                        None => continue,
                    },
                    None => registry
                        .facets
                        .list()
                        .map(|facet| facet.name.clone())
                        .collect(),
                },
            ),
            _ => None,
        };
        for read in variables_read(condition) {
            let root = read.root();
            let known = provided.contains(&root)
                || output_fields
                    .as_ref()
                    .is_some_and(|fields| fields.iter().any(|field| field == root));
            if known {
                continue;
            }
            let mut offered: Vec<String> = provided.iter().map(|name| name.to_string()).collect();
            if let Some(fields) = &output_fields {
                offered.extend(fields.iter().cloned());
            }
            return Err(CoreError::InvalidEnvelope {
                path: format!(
                    "$.policies.runtime[{index}].trigger.condition{}",
                    read.inner_path
                ),
                message: format!(
                    "the condition reads `{}`, which its trigger never provides: it can read {}",
                    read.name,
                    offered
                        .iter()
                        .map(|name| format!("`{name}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
    }
    Ok(())
}

/// An `onMetricBelow` metric is a run metric, or a dotted path whose first
/// segment is a facet of the registry (a node's output field); anything
/// else could never be read, so the guard would never fire.
fn check_metric(index: usize, metric: &str, registry: &Registry) -> Result<(), CoreError> {
    use crate::contracts::policies::RUN_METRIC_NAMES;
    let root = metric.split('.').next().unwrap_or_default();
    if RUN_METRIC_NAMES.contains(&metric) || registry.facets.contains(root) {
        return Ok(());
    }
    Err(CoreError::InvalidEnvelope {
        path: format!("$.policies.runtime[{index}].trigger.metric"),
        message: format!(
            "`{metric}` is neither a run metric ({}) nor a path into a node's output starting with a facet of the registry",
            RUN_METRIC_NAMES.join(", ")
        ),
    })
}
