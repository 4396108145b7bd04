//! Token usage as providers report it, summed per node and per run.

use serde::{Deserialize, Serialize};

/// Token usage reported by a provider.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Of `prompt_tokens`, those the provider served from its prompt cache
    /// (0 when it does not say).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub cached_prompt_tokens: u64,
    /// Of `prompt_tokens`, those the provider wrote to its prompt cache
    /// (priced at the catalog's cache-write rate; 0 when it does not say).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub cache_write_prompt_tokens: u64,
}

fn is_zero_u64(value: &u64) -> bool {
    *value == 0
}

impl TokenUsage {
    /// Adds `other` to these totals.
    pub fn add(&mut self, other: &TokenUsage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cached_prompt_tokens += other.cached_prompt_tokens;
        self.cache_write_prompt_tokens += other.cache_write_prompt_tokens;
    }

    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

/// Who and what a model call's usage is attributed to (the chat
/// specification's usage fields): what the calls were for, the plan tool's
/// `execution_mode` that started the run, the user, the session (the
/// run's thread) and the context type. A node's `metrics` carry what its
/// calls were for (`operationType`); the run's last `metrics` and its
/// listing carry this, once per run rather than on every node's frame.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UsageAttribution {
    /// `planning`, `execution`, `review`, `judge` or `summary` (absent on
    /// a run's totals, which split by operation; a node's `metrics` say it
    /// as their own `operationType`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_type: Option<std::borrow::Cow<'static, str>>,
    /// `auto_execute` or `agent_review`: the plan tool call that started
    /// this run (absent: not started by an agent's plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// The run's thread (absent on a node's metrics: its run's say it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_type: Option<String>,
}
