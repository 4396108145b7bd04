//! Run entries: what lives beside the run item instead of inside it.
//!
//! An agent session's conversation turns and a panel round's judge calls
//! grow with the work (a 200-turn session, a 50-judge discussion); kept in
//! the run state they would be rewritten by every commit and, in the end,
//! push the run past what one store item holds. So each is an entry of its
//! own: written once, by the commit of the step that produced it (in the
//! same transaction as the state that counts it), and read only by the step
//! that needs it (a model turn loads its conversation, a judge its round).
//! A panel round is one entry, not one per judge: with its judges' step
//! messages, one per judge, it must fit in one commit (DynamoDB takes 100
//! actions per transaction).
//!
//! Invariants:
//! - an entry is never rewritten with another body: its key names the node
//!   attempt (and turn or round) that wrote it, and a commit that lost a
//!   version race wrote nothing;
//! - `AgentSession::conversation.recorded_turns` counts exactly the turn
//!   entries under `conversation_prefix(node, attempt)`, with sequence
//!   numbers `0..recorded_turns`;
//! - keys order as their sequence numbers do (zero-padded), so a prefix
//!   read returns a conversation in order.

use baton_judge::panel::JudgeCall;
use serde::{Deserialize, Serialize};

use crate::records::conversation::SessionTurn;

/// What one entry is, and so where it is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKey {
    /// Turn `seq` of the conversation of `node_id`'s attempt `attempt`.
    ConversationTurn {
        node_id: String,
        attempt: u32,
        seq: u32,
    },
    /// What every judge is asked in `round` of the panel of `node_id`'s
    /// attempt `attempt`.
    PanelRound {
        node_id: String,
        attempt: u32,
        round: u32,
    },
    /// Plan version `version`, kept when a newer version replaced it.
    PlanVersion { version: u32 },
}

impl EntryKey {
    /// The text stores keep the entry under (ordered as the entries are).
    pub fn storage_key(&self) -> String {
        match self {
            EntryKey::ConversationTurn {
                node_id,
                attempt,
                seq,
            } => format!("{}{seq:06}", conversation_prefix(node_id, *attempt)),
            EntryKey::PanelRound {
                node_id,
                attempt,
                round,
            } => format!("panel#{node_id}#{attempt}#{round:04}#"),
            EntryKey::PlanVersion { version } => format!("{PLAN_VERSION_PREFIX}{version:06}"),
        }
    }
}

/// The prefix every superseded plan version is stored under.
pub const PLAN_VERSION_PREFIX: &str = "plan#";

/// The prefix every turn of one session's conversation is stored under.
pub fn conversation_prefix(node_id: &str, attempt: u32) -> String {
    format!("turn#{node_id}#{attempt}#")
}

/// One entry as a store keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunEntry {
    /// `EntryKey::storage_key`.
    pub key: String,
    pub body: EntryBody,
}

/// What an entry holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum EntryBody {
    /// A turn of an agent session's conversation.
    Turn(SessionTurn),
    /// The judges' calls of a panel round.
    PanelRound(Vec<JudgeCall>),
    /// A plan version a newer one replaced, as the plan's JSON (records
    /// know no plan type: planning depends on them, not the reverse).
    PlanVersion(Box<serde_json::Value>),
}

impl RunEntry {
    pub fn new(key: &EntryKey, body: EntryBody) -> Self {
        RunEntry {
            key: key.storage_key(),
            body,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turn_keys_order_as_their_sequence_and_stay_under_their_prefix() {
        let key = |seq| {
            EntryKey::ConversationTurn {
                node_id: "node_1".into(),
                attempt: 2,
                seq,
            }
            .storage_key()
        };
        assert!(key(9) < key(10));
        assert!(key(99) < key(100));
        assert!(key(0).starts_with(&conversation_prefix("node_1", 2)));
        assert!(!key(0).starts_with(&conversation_prefix("node_1", 1)));
        // Attempt 1 of node_1 is not a prefix of attempt 12, nor node_1 of node_10.
        assert!(!conversation_prefix("node_1", 12).starts_with(&conversation_prefix("node_1", 1)));
        assert!(!conversation_prefix("node_10", 1).starts_with(&conversation_prefix("node_1", 1)));
    }

    #[test]
    fn a_round_key_is_no_prefix_of_another_rounds() {
        let key = |node: &str, attempt| {
            EntryKey::PanelRound {
                node_id: node.into(),
                attempt,
                round: 0,
            }
            .storage_key()
        };
        assert!(!key("node_2", 10).starts_with(&key("node_2", 1)));
        assert!(!key("node_20", 1).starts_with(&key("node_2", 1)));
    }
}
