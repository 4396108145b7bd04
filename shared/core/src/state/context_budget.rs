//! Context budgets: a chat node's request fits its model's context window.
//! The thread's history is trimmed oldest first, whole exchanges at a time
//! (a question is never kept without its answer); the system instruction,
//! the tools and the new message are always kept. The run says so with a
//! `warning` `context_trimmed` carrying the counts.
//!
//! Tokens are estimated, not counted: a tokenizer is the provider's and the
//! model's, so Baton reckons [`CHARS_PER_TOKEN`] characters per token, which
//! over-counts English prose (about 4.5 with OpenAI's and Anthropic's
//! tokenizers) and so errs on the side of fitting.

use serde::{Deserialize, Serialize};

use crate::catalog::model_catalog::ModelCatalog;
use crate::records::chat::ChatExchange;

/// The context window of a model the catalog does not describe (the
/// deployment's default model, or a catalog entry without
/// `contextWindow`): the smallest window of the catalog's current models.
pub const DEFAULT_CONTEXT_WINDOW_TOKENS: u64 = 128_000;

/// Characters reckoned per token.
pub const CHARS_PER_TOKEN: u64 = 4;

/// Tokens reckoned for `text`.
pub fn estimated_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(CHARS_PER_TOKEN)
}

/// The prompt tokens a request to `model` may take: its context window
/// (the catalog's, else [`DEFAULT_CONTEXT_WINDOW_TOKENS`]) less room for the
/// answer (its `maxOutputTokens`, at most a quarter of the window).
pub fn prompt_budget(catalog: &ModelCatalog, model: Option<&str>) -> u64 {
    let described = model.and_then(|name| catalog.model(name));
    let window = described
        .and_then(|model| model.context_window)
        .unwrap_or(DEFAULT_CONTEXT_WINDOW_TOKENS);
    let answer_room = described
        .and_then(|model| model.max_output_tokens)
        .unwrap_or(window / 4)
        .min(window / 4);
    window - answer_room
}

/// What trimming a thread's history did, as the `warning` frame says it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContextTrim {
    /// Earlier exchanges left out (oldest first).
    pub dropped_exchanges: usize,
    /// Earlier exchanges kept.
    pub kept_exchanges: usize,
    /// Tokens reckoned for the request as sent.
    pub estimated_tokens: u64,
    /// The prompt tokens the model takes (`prompt_budget`).
    pub budget_tokens: u64,
}

/// Which of `history` a request keeps: the newest exchanges whose tokens
/// fit beside `fixed_tokens` (what is always sent) within `budget_tokens`.
/// Returns the index of the first exchange kept, and the trim when anything
/// was left out.
pub fn fit_history(
    history: &[ChatExchange],
    fixed_tokens: u64,
    budget_tokens: u64,
) -> (usize, Option<ContextTrim>) {
    let mut used = fixed_tokens;
    let mut first_kept = history.len();
    for (index, exchange) in history.iter().enumerate().rev() {
        let cost = estimated_tokens(&exchange.user) + estimated_tokens(&exchange.assistant);
        if used + cost > budget_tokens {
            break;
        }
        used += cost;
        first_kept = index;
    }
    let trim = (first_kept > 0).then_some(ContextTrim {
        dropped_exchanges: first_kept,
        kept_exchanges: history.len() - first_kept,
        estimated_tokens: used,
        budget_tokens,
    });
    (first_kept, trim)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exchange(words: usize) -> ChatExchange {
        ChatExchange {
            run_id: format!("run-{words}"),
            at_millis: 0,
            user: "abcd".repeat(words),
            assistant: "efgh".repeat(words),
            agent: None,
            drafts: Vec::new(),
            interrupted: false,
        }
    }

    #[test]
    fn the_newest_exchanges_that_fit_are_kept_whole() {
        // 20 tokens each (10 + 10).
        let history: Vec<_> = (0..10).map(|_| exchange(10)).collect();
        let (first, trim) = fit_history(&history, 100, 165);
        assert_eq!(first, 7, "three of 20 tokens fit beside 100");
        let trim = trim.unwrap();
        assert_eq!((trim.dropped_exchanges, trim.kept_exchanges), (7, 3));
        assert_eq!(trim.estimated_tokens, 160);
        assert_eq!(fit_history(&history, 0, 1_000), (0, None), "all fit");
        assert_eq!(
            fit_history(&history, 2_000, 1_000).0,
            10,
            "nothing fits beside an oversized message: none kept"
        );
    }

    #[test]
    fn the_budget_leaves_room_for_the_answer() {
        let catalog = ModelCatalog::default();
        assert_eq!(
            prompt_budget(&catalog, Some("not-in-the-catalog")),
            DEFAULT_CONTEXT_WINDOW_TOKENS * 3 / 4
        );
        assert_eq!(estimated_tokens("abcde"), 2);
    }
}
