//! A plan as a picture: Mermaid (`flowchart LR`) and Graphviz DOT text.
//!
//! The same graph the run viewer draws: the caller's inputs on the left, one
//! box per node (its label, capability and executor), an edge per producer
//! → consumer labelled with the facets it carries, and the output on the
//! right fed by the nodes producing the contract's goal facets. Human nodes
//! and built-in nodes are styled apart from AI nodes.

use std::collections::BTreeMap;

use crate::contracts::capability::AgentType;
use crate::planning::plan::PlanGraph;

/// The id of the box standing for the caller's inputs.
const INPUTS_ID: &str = "inputs";
/// The id of the box standing for the run's output.
const OUTPUT_ID: &str = "output";

/// One arrow: its ends and the facets it carries.
struct Arrow {
    from: String,
    to: String,
    facets: Vec<String>,
}

/// Every arrow of the picture, producer edges merged per pair of ends.
fn arrows(plan: &PlanGraph) -> Vec<Arrow> {
    let mut merged: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for edge in &plan.edges {
        merged
            .entry((edge.from.clone(), edge.to.clone()))
            .or_default()
            .push(edge.facet.clone());
    }
    for node in &plan.nodes {
        for facet in &node.input_facets {
            let produced_upstream = plan
                .edges
                .iter()
                .any(|edge| edge.to == node.node_id && &edge.facet == facet);
            if !produced_upstream && plan.supplied_facets.contains(facet) {
                merged
                    .entry((INPUTS_ID.to_string(), node.node_id.clone()))
                    .or_default()
                    .push(facet.clone());
            }
        }
    }
    for facet in &plan.goal_facets {
        let consumed_downstream = |node_id: &str| {
            plan.edges
                .iter()
                .any(|edge| edge.from == node_id && &edge.facet == facet)
        };
        let producers: Vec<&str> = plan
            .nodes
            .iter()
            .filter(|node| node.output_facets.contains(facet))
            .map(|node| node.node_id.as_str())
            .collect();
        // A facet produced by several nodes (variant branches) reaches the
        // output through whichever of them is not consumed downstream.
        for producer in producers
            .iter()
            .filter(|producer| !consumed_downstream(producer) || producers.len() == 1)
        {
            merged
                .entry((producer.to_string(), OUTPUT_ID.to_string()))
                .or_default()
                .push(facet.clone());
        }
    }
    merged
        .into_iter()
        .map(|((from, to), mut facets)| {
            facets.sort();
            facets.dedup();
            Arrow { from, to, facets }
        })
        .collect()
}

fn executor_of(agent_type: AgentType) -> &'static str {
    match agent_type {
        AgentType::Ai => "ai",
        AgentType::Human => "human",
        AgentType::Builtin => "builtin",
    }
}

/// Mermaid's entity codes for the characters that end a quoted label.
fn mermaid_text(text: &str) -> String {
    text.replace('"', "#quot;")
        .replace('<', "#lt;")
        .replace('>', "#gt;")
}

/// The plan as a Mermaid flowchart.
pub fn to_mermaid(plan: &PlanGraph) -> String {
    let mut lines = vec!["flowchart LR".to_string()];
    lines.push(format!("    {INPUTS_ID}([\"inputs\"])"));
    for node in &plan.nodes {
        let guard = guard_text(node)
            .map(|guard| format!("<br/><i>{}</i>", mermaid_text(&guard)))
            .unwrap_or_default();
        lines.push(format!(
            "    {}[\"{}<br/><small>{} · {}</small>{guard}\"]",
            node.node_id,
            mermaid_text(&node.label),
            mermaid_text(&node.capability_id),
            executor_of(node.agent_type()),
        ));
    }
    lines.push(format!("    {OUTPUT_ID}([\"output\"])"));
    for arrow in arrows(plan) {
        lines.push(format!(
            "    {} -->|\"{}\"| {}",
            arrow.from,
            mermaid_text(&arrow.facets.join(", ")),
            arrow.to
        ));
    }
    lines.push("    classDef human fill:#fff4d6,stroke:#b7791f".to_string());
    lines
        .push("    classDef builtin fill:#eef2f7,stroke:#718096,stroke-dasharray: 4 3".to_string());
    lines.push("    classDef io fill:#e6fffa,stroke:#319795".to_string());
    let branches: Vec<&str> = plan
        .nodes
        .iter()
        .filter(|node| node.guard.is_some())
        .map(|node| node.node_id.as_str())
        .collect();
    if !branches.is_empty() {
        lines.push("    classDef branch stroke:#975a16,stroke-dasharray: 6 3".to_string());
        lines.push(format!("    class {} branch", branches.join(",")));
    }
    lines.push(format!("    class {INPUTS_ID},{OUTPUT_ID} io"));
    for (class, agent_type) in [("human", AgentType::Human), ("builtin", AgentType::Builtin)] {
        let members: Vec<&str> = plan
            .nodes
            .iter()
            .filter(|node| node.agent_type() == agent_type)
            .map(|node| node.node_id.as_str())
            .collect();
        if !members.is_empty() {
            lines.push(format!("    class {} {class}", members.join(",")));
        }
    }
    lines.join("\n") + "\n"
}

/// A branch node's condition as drawn: `if` and its JSONLogic.
fn guard_text(node: &crate::planning::plan::PlanNode) -> Option<String> {
    node.guard.as_ref().map(|guard| format!("if {guard}"))
}

fn dot_text(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"")
}

/// The plan as a Graphviz digraph.
pub fn to_dot(plan: &PlanGraph) -> String {
    let mut lines = vec![
        format!("digraph \"plan v{}\" {{", plan.plan_version),
        "    rankdir=LR;".to_string(),
        "    node [shape=box, style=\"rounded,filled\", fillcolor=\"#ffffff\", fontname=\"Helvetica\"];"
            .to_string(),
        "    edge [fontname=\"Helvetica\", fontsize=10];".to_string(),
        format!("    {INPUTS_ID} [label=\"inputs\", shape=oval, fillcolor=\"#e6fffa\"];"),
    ];
    for node in &plan.nodes {
        let fill = match node.agent_type() {
            AgentType::Ai => "#ffffff",
            AgentType::Human => "#fff4d6",
            AgentType::Builtin => "#eef2f7",
        };
        let (guard, style) = match guard_text(node) {
            Some(guard) => (
                format!("\\n{}", dot_text(&guard)),
                ", style=\"rounded,filled,dashed\"",
            ),
            None => (String::new(), ""),
        };
        lines.push(format!(
            "    {} [label=\"{}\\n{} · {}{guard}\", fillcolor=\"{fill}\"{style}];",
            node.node_id,
            dot_text(&node.label),
            dot_text(&node.capability_id),
            executor_of(node.agent_type()),
        ));
    }
    lines.push(format!(
        "    {OUTPUT_ID} [label=\"output\", shape=oval, fillcolor=\"#e6fffa\"];"
    ));
    for arrow in arrows(plan) {
        lines.push(format!(
            "    {} -> {} [label=\"{}\"];",
            arrow.from,
            arrow.to,
            dot_text(&arrow.facets.join(", "))
        ));
    }
    lines.push("}".to_string());
    lines.join("\n") + "\n"
}
