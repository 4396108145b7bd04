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
