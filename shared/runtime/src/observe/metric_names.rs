//! The specification's metric names, kept beside Baton's own as aliases:
//! a dashboard built on `flex.planner.requests` or `flex.run.status` reads
//! the same counts as one built on `baton_planner_requests_total`. In the
//! Prometheus exposition an alias is its own series (dots become
//! underscores: `flex_planner_requests_total`); in an EMF line it is a
//! second metric name over the same value, so CloudWatch gets no extra
//! line.

/// The specification's name of counter `name` (Baton's, without its
/// `baton_` prefix and `_total` suffix), when it has one.
pub fn flex_alias(name: &str) -> Option<&'static str> {
    Some(match name {
        "planner_requests" => "flex.planner.requests",
        "planner_rejections" => "flex.planner.rejections",
        "plans_generated" => "flex.planner.generated",
        "plans_updated" => "flex.planner.updated",
        "policy_triggers" => "flex.policy.triggers",
        "hitl_requests" => "flex.hitl.requests",
        "hitl_resolved" => "flex.hitl.resolved",
        "validation_retries" => "flex.validation.retries",
        "run_status" => "flex.run.status",
        _ => return None,
    })
}

/// The specification's name of the node-duration histogram (its label is
/// `capabilityId`, Baton's `capability`).
pub const FLEX_NODE_DURATION: &str = "flex.node.duration_ms";

/// An alias as Prometheus names it: dots as underscores, and `_total` on a
/// counter.
pub fn prometheus_name(alias: &str, counter: bool) -> String {
    let name = alias.replace('.', "_");
    if counter { name + "_total" } else { name }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_counter_of_the_specification_has_its_alias() {
        assert_eq!(flex_alias("run_status"), Some("flex.run.status"));
        assert_eq!(
            flex_alias("plans_generated"),
            Some("flex.planner.generated")
        );
        assert_eq!(flex_alias("runs_ended"), None, "Baton's own, no alias");
        assert_eq!(
            prometheus_name("flex.planner.requests", true),
            "flex_planner_requests_total"
        );
        assert_eq!(
            prometheus_name(FLEX_NODE_DURATION, false),
            "flex_node_duration_ms"
        );
    }
}
