//! The evaluation transcript: every message of a panel, grouped by round,
//! as a hash chain. A message's `hash` is
//! `sha256(previousHash ‖ canonical JSON of the message)` in lowercase hex,
//! where the canonical JSON (RFC 8785) covers every field of the message but
//! `hash`, `previousHash` and `hcsTxId` (a ledger's receipt, written after
//! the chain), and the first message's `previousHash` is the empty string. Changing one byte of one message breaks its link and every
//! later one; `verify` names the first.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MessageRole {
    System,
    Agent,
    Orchestrator,
}

/// When in the evaluation a message was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MessagePhase {
    Scoring,
    Discussion,
    Consensus,
}

/// `ConversationMessage`, with its link in the chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConversationMessage {
    pub id: String,
    pub role: MessageRole,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// The model that wrote a judge's message (its provider's name for
    /// it); hashed with the rest of the message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub content: String,
    /// Unix milliseconds.
    pub timestamp: u64,
    pub phase: MessagePhase,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<u32>,
    /// An external ledger's receipt (its transaction id), when the
    /// transcript is published there; the wire name is the specification's.
    #[serde(default, rename = "hcsTxId", skip_serializing_if = "Option::is_none")]
    pub ledger_tx_id: Option<String>,
    #[serde(default)]
    pub previous_hash: String,
    #[serde(default)]
    pub hash: String,
}

/// One round of the transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TranscriptRound {
    pub round: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variance: Option<f64>,
    pub messages: Vec<ConversationMessage>,
}

/// `EvaluationTranscript`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvaluationTranscript {
    /// Where the transcript is published (the run's event log by default;
    /// an external ledger's topic when one is plugged in).
    pub topic_id: String,
    /// The ledger explorer's base URL when the transcript is published on
    /// one (`{explorerUrl}/topic/{topicId}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explorer_url: Option<String>,
    pub rounds: Vec<TranscriptRound>,
}

/// The first link of a chain that does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokenLink {
    pub round: u32,
    /// Position of the message within its round.
    pub index: usize,
    pub message_id: String,
    pub expected_hash: String,
    pub found_hash: String,
}

impl std::fmt::Display for BrokenLink {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "round {} message {} (`{}`): its hash is {} but its content hashes to {}",
            self.round, self.index, self.message_id, self.found_hash, self.expected_hash
        )
    }
}

/// The hash a message must carry after `previous_hash`.
pub fn message_hash(message: &ConversationMessage, previous_hash: &str) -> String {
    let mut content = serde_json::to_value(message).unwrap_or(Value::Null);
    if let Value::Object(fields) = &mut content {
        fields.remove("hash");
        fields.remove("previousHash");
        fields.remove("hcsTxId");
    }
    let canonical = serde_json_canonicalizer::to_string(&content).unwrap_or_default();
    let mut hasher = Sha256::new();
    hasher.update(previous_hash.as_bytes());
    hasher.update(canonical.as_bytes());
    hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

impl EvaluationTranscript {
    pub fn new(topic_id: impl Into<String>) -> Self {
        EvaluationTranscript {
            topic_id: topic_id.into(),
            explorer_url: None,
            rounds: Vec::new(),
        }
    }

    fn last_hash(&self) -> String {
        self.rounds
            .iter()
            .rev()
            .find_map(|round| round.messages.last())
            .map(|message| message.hash.clone())
            .unwrap_or_default()
    }

    /// Appends `message` to `round` (created when new), linking it to the
    /// chain: its `previousHash` and `hash` are set here.
    pub fn append(&mut self, round: u32, mut message: ConversationMessage) -> &ConversationMessage {
        let previous = self.last_hash();
        message.previous_hash = previous.clone();
        message.hash = message_hash(&message, &previous);
        let position = match self
            .rounds
            .iter()
            .position(|existing| existing.round == round)
        {
            Some(position) => position,
            None => {
                self.rounds.push(TranscriptRound {
                    round,
                    variance: None,
                    messages: Vec::new(),
                });
                self.rounds.len() - 1
            }
        };
        let messages = &mut self.rounds[position].messages;
        messages.push(message);
        &messages[messages.len() - 1]
    }

    /// Every message in chain order.
    pub fn messages(&self) -> impl Iterator<Item = (u32, usize, &ConversationMessage)> {
        self.rounds.iter().flat_map(|round| {
            round
                .messages
                .iter()
                .enumerate()
                .map(move |(index, message)| (round.round, index, message))
        })
    }

    /// Recomputes the chain; the first link that does not hold, if any.
    pub fn verify(&self) -> Result<usize, BrokenLink> {
        let mut previous = String::new();
        let mut count = 0;
        for (round, index, message) in self.messages() {
            let expected = message_hash(message, &previous);
            if message.previous_hash != previous || message.hash != expected {
                return Err(BrokenLink {
                    round,
                    index,
                    message_id: message.id.clone(),
                    expected_hash: expected,
                    found_hash: message.hash.clone(),
                });
            }
            previous = message.hash.clone();
            count += 1;
        }
        Ok(count)
    }
}
