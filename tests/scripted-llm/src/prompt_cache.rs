//! The double's prompt cache, modelled on what the providers document:
//!
//! - Anthropic and Bedrock cache the prefix a request marks (Anthropic's
//!   `cache_control` on a block, Bedrock's `cachePoint` block). The prefix
//!   runs in the providers' order, tools then system, up to the last mark.
//!   The first request with a prefix writes it (`cache_creation_input_tokens`
//!   / `cacheWriteInputTokens`); a later one with the same prefix reads it.
//! - OpenAI caches on its own: a request whose leading part (tools, then
//!   the system message) was seen before reads it (`cached_tokens`), and
//!   nothing is billed as a write.
//!
//! A prefix shorter than `minimum_tokens` is never cached (the providers'
//! documented minimum, 1,024 tokens for most models). Tokens are counted as
//! four characters each, the double's rough tokenizer.

use std::collections::HashSet;

/// What a request's prefix did to the cache, in tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheUse {
    pub read: u64,
    pub written: u64,
}

/// Prefixes seen so far, by hash.
#[derive(Debug)]
pub struct PromptCache {
    seen: HashSet<u64>,
    pub minimum_tokens: u64,
}

impl Default for PromptCache {
    fn default() -> Self {
        PromptCache {
            seen: HashSet::new(),
            minimum_tokens: 1024,
        }
    }
}

impl PromptCache {
    /// Accounts for a marked prefix (Anthropic, Bedrock): a write the first
    /// time, a read after.
    pub fn marked(&mut self, prefix: Option<&str>) -> CacheUse {
        let Some((key, tokens)) = self.cacheable(prefix) else {
            return CacheUse::default();
        };
        if self.seen.insert(key) {
            CacheUse {
                read: 0,
                written: tokens,
            }
        } else {
            CacheUse {
                read: tokens,
                written: 0,
            }
        }
    }

    /// Accounts for an automatic prefix (OpenAI): a read when seen before,
    /// never a billed write.
    pub fn automatic(&mut self, prefix: Option<&str>) -> CacheUse {
        let Some((key, tokens)) = self.cacheable(prefix) else {
            return CacheUse::default();
        };
        if self.seen.insert(key) {
            CacheUse::default()
        } else {
            CacheUse {
                read: tokens,
                written: 0,
            }
        }
    }

    fn cacheable(&self, prefix: Option<&str>) -> Option<(u64, u64)> {
        use std::hash::{Hash, Hasher};
        let prefix = prefix?;
        let tokens = crate::tokens_of(prefix);
        if tokens < self.minimum_tokens {
            return None;
        }
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        prefix.hash(&mut hasher);
        Some((hasher.finish(), tokens))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marked_prefix_is_written_once_then_read() {
        let mut cache = PromptCache {
            minimum_tokens: 2,
            ..PromptCache::default()
        };
        let prefix = "a long enough system prompt";
        let tokens = crate::tokens_of(prefix);
        assert_eq!(
            cache.marked(Some(prefix)),
            CacheUse {
                read: 0,
                written: tokens
            }
        );
        assert_eq!(
            cache.marked(Some(prefix)),
            CacheUse {
                read: tokens,
                written: 0
            }
        );
        assert_eq!(cache.marked(None), CacheUse::default());
    }

    #[test]
    fn a_short_prefix_is_not_cached_and_automatic_caching_bills_no_write() {
        let mut cache = PromptCache::default();
        assert_eq!(cache.marked(Some("short")), CacheUse::default());
        assert_eq!(cache.marked(Some("short")), CacheUse::default());
        let long = "x".repeat(5000);
        assert_eq!(cache.automatic(Some(&long)), CacheUse::default());
        assert_eq!(cache.automatic(Some(&long)).read, 1250);
    }
}
