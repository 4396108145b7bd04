//! Context budgets: a model request fits its model's context window. A
//! chat thread's history is trimmed oldest first, whole exchanges at a time
//! (a question is never kept without its answer); an agent session's turns
//! lose their oldest tool rounds (a call never without its result, the
//! newest round kept); the system instruction, the tools and the first
//! message are always kept. The run says so with a `warning`
//! `context_trimmed` carrying the counts.
//!
//! Tokens are estimated, not counted: a tokenizer is the provider's and the
//! model's, so Baton reckons [`CHARS_PER_TOKEN`] characters per token, which
//! over-counts English prose (about 4.5 with OpenAI's and Anthropic's
//! tokenizers) and so errs on the side of fitting.

use crate::catalog::model_catalog::ModelCatalog;
use crate::records::chat::ChatExchange;
use crate::records::conversation::{SessionTurn, ToolSession};

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

pub use crate::wire::frames::ContextTrim;

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

/// Tokens reckoned for one turn of a session.
fn turn_tokens(turn: &SessionTurn) -> u64 {
    match turn {
        SessionTurn::User { content } => estimated_tokens(content),
        SessionTurn::Assistant {
            content,
            tool_calls,
        } => {
            estimated_tokens(content)
                + tool_calls
                    .iter()
                    .map(|call| estimated_tokens(&call.name) + estimated_tokens(&call.arguments))
                    .sum::<u64>()
        }
        SessionTurn::Tool { content, .. } => estimated_tokens(content),
    }
}

/// Fits an agent session's turns within `budget_tokens` beside
/// `fixed_tokens` (the system instruction, the first message, the tools):
/// the oldest tool rounds (a model turn that asked for tools, with the
/// results of its calls) are left out, whole, until the rest fits; the
/// newest round and every other turn are kept. `None` when nothing was
/// left out (it fitted, or no round can go).
pub fn fit_session(
    session: &mut ToolSession,
    fixed_tokens: u64,
    budget_tokens: u64,
) -> Option<ContextTrim> {
    let mut total = fixed_tokens + session.turns.iter().map(turn_tokens).sum::<u64>();
    let rounds_at_start = tool_rounds(&session.turns).len();
    let mut dropped = 0;
    while total > budget_tokens {
        let rounds = tool_rounds(&session.turns);
        // The newest round stays: the model answers it.
        let Some(&(start, end)) = rounds.first().filter(|_| rounds.len() > 1) else {
            break;
        };
        total -= session.turns[start..end]
            .iter()
            .map(turn_tokens)
            .sum::<u64>();
        session.turns.drain(start..end);
        dropped += 1;
    }
    (dropped > 0).then_some(ContextTrim {
        dropped_exchanges: dropped,
        kept_exchanges: rounds_at_start - dropped,
        estimated_tokens: total,
        budget_tokens,
    })
}

/// The tool rounds of `turns`, oldest first: each the range of a model
/// turn that asked for tools and the results that answer its calls.
fn tool_rounds(turns: &[SessionTurn]) -> Vec<(usize, usize)> {
    let mut rounds = Vec::new();
    let mut index = 0;
    while index < turns.len() {
        if let SessionTurn::Assistant { tool_calls, .. } = &turns[index]
            && !tool_calls.is_empty()
        {
            let mut end = index + 1;
            while let Some(SessionTurn::Tool { call_id, .. }) = turns.get(end) {
                if !tool_calls.iter().any(|call| &call.id == call_id) {
                    break;
                }
                end += 1;
            }
            rounds.push((index, end));
            index = end;
        } else {
            index += 1;
        }
    }
    rounds
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
            summary: None,
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

    #[test]
    fn the_oldest_tool_rounds_go_whole_and_the_newest_stays() {
        use crate::records::conversation::ToolCallRequest;
        let round = |id: &str| {
            vec![
                SessionTurn::Assistant {
                    content: String::new(),
                    tool_calls: vec![ToolCallRequest {
                        id: id.into(),
                        name: "lookup".into(),
                        arguments: "{}".into(),
                    }],
                },
                SessionTurn::Tool {
                    call_id: id.into(),
                    content: "r".repeat(400),
                },
            ]
        };
        let mut session = ToolSession {
            turns: [round("a"), round("b"), round("c")].concat(),
            ..ToolSession::default()
        };
        // Each round is about 103 tokens.
        let trim = fit_session(&mut session, 0, 250).unwrap();
        assert_eq!((trim.dropped_exchanges, trim.kept_exchanges), (1, 2));
        assert_eq!(session.turns.len(), 4);
        assert!(matches!(&session.turns[1], SessionTurn::Tool { call_id, .. } if call_id == "b"));
        let mut tight = ToolSession {
            turns: [round("a"), round("b")].concat(),
            ..ToolSession::default()
        };
        let trim = fit_session(&mut tight, 0, 10).unwrap();
        assert_eq!(
            trim.dropped_exchanges, 1,
            "the newest round stays even over budget"
        );
        assert_eq!(tight.turns.len(), 2);
        assert!(
            fit_session(&mut tight, 0, 10).is_none(),
            "nothing more can go"
        );
    }
}
