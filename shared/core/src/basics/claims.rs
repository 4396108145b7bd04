//! What a lease protects. A node attempt is claimed whole for a model
//! call; the steps inside an agent session or a judge panel (a turn, a tool
//! call, a child run's start, a plan review, one judge's round) each claim
//! their own, so parallel steps of one node do not contend.
//!
//! The stores keep a claim under its [`ClaimKey::storage_key`] (the text
//! leases were always stored under: a lease written before this type reads
//! the same); everything above the store handles the typed key.

use std::fmt;

/// One lease's subject within a node attempt (the attempt travels beside it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ClaimKey {
    /// The node itself: a model call, or an agent session's first turn.
    Node { node_id: String },
    /// One judge's call in one round of a panel.
    Judge {
        node_id: String,
        judge_id: String,
        round: u32,
    },
    /// An agent session's model turn after the first.
    Turn { node_id: String, turn: u32 },
    /// One tool call of a turn.
    ToolCall {
        node_id: String,
        turn: u32,
        call_id: String,
    },
    /// The child run an `agent_create_plan` call starts.
    ChildRunStart {
        node_id: String,
        turn: u32,
        call_id: String,
    },
    /// The reviewer's verdict on an `agent_create_plan` call's plan.
    PlanReview {
        node_id: String,
        turn: u32,
        call_id: String,
    },
}

impl ClaimKey {
    /// The node whose attempt this claim is part of.
    pub fn node_id(&self) -> &str {
        match self {
            ClaimKey::Node { node_id }
            | ClaimKey::Judge { node_id, .. }
            | ClaimKey::Turn { node_id, .. }
            | ClaimKey::ToolCall { node_id, .. }
            | ClaimKey::ChildRunStart { node_id, .. }
            | ClaimKey::PlanReview { node_id, .. } => node_id,
        }
    }

    /// The text a store keeps the lease under.
    pub fn storage_key(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for ClaimKey {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClaimKey::Node { node_id } => write!(out, "{node_id}"),
            ClaimKey::Judge {
                node_id,
                judge_id,
                round,
            } => write!(out, "{node_id}#judge:{judge_id}#r{round}"),
            ClaimKey::Turn { node_id, turn } => write!(out, "{node_id}#turn{turn}"),
            ClaimKey::ToolCall {
                node_id,
                turn,
                call_id,
            } => write!(out, "{node_id}#turn{turn}#{call_id}"),
            ClaimKey::ChildRunStart {
                node_id,
                turn,
                call_id,
            } => write!(out, "{node_id}#turn{turn}#{call_id}#child"),
            ClaimKey::PlanReview {
                node_id,
                turn,
                call_id,
            } => write!(out, "{node_id}#turn{turn}#{call_id}#review"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_stored_under_the_keys_they_always_had() {
        let node = || "node_1".to_string();
        let call = || "call_1".to_string();
        let table = [
            (ClaimKey::Node { node_id: node() }, "node_1"),
            (
                ClaimKey::Judge {
                    node_id: node(),
                    judge_id: "a".into(),
                    round: 2,
                },
                "node_1#judge:a#r2",
            ),
            (
                ClaimKey::Turn {
                    node_id: node(),
                    turn: 3,
                },
                "node_1#turn3",
            ),
            (
                ClaimKey::ToolCall {
                    node_id: node(),
                    turn: 0,
                    call_id: call(),
                },
                "node_1#turn0#call_1",
            ),
            (
                ClaimKey::ChildRunStart {
                    node_id: node(),
                    turn: 0,
                    call_id: call(),
                },
                "node_1#turn0#call_1#child",
            ),
            (
                ClaimKey::PlanReview {
                    node_id: node(),
                    turn: 0,
                    call_id: call(),
                },
                "node_1#turn0#call_1#review",
            ),
        ];
        for (key, stored) in table {
            assert_eq!(key.storage_key(), stored);
            assert_eq!(key.node_id(), "node_1");
        }
    }
}
