//! A chat thread as the threads list shows it (`GET /api/v1/threads`), and
//! the list's query and page. The list is ordered by last activity, newest
//! first; a page's cursor is the ordering key of its last thread
//! (`{lastAtMillis as 13 digits}.{threadId}`: fixed width, so it sorts as
//! text the way it sorts as time), and the next page holds the threads
//! strictly before it. A thread answered again between two pages moves to
//! the front: it may then show on both pages (as in any list ordered by
//! activity), never on neither.

use serde::{Deserialize, Serialize};

use crate::records::chat::ChatExchange;

/// Longest message text a listing carries (characters).
pub const LISTED_MESSAGE_CHARS: usize = 200;

/// Most threads a page may hold.
pub const MAX_THREADS_PER_PAGE: usize = 100;

/// One thread in the list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadListing {
    pub thread_id: String,
    /// When its earliest exchange was answered (Unix ms).
    pub started_at_millis: u64,
    /// When its latest exchange was answered (Unix ms).
    pub last_at_millis: u64,
    /// The person's first message, cut to [`LISTED_MESSAGE_CHARS`]: the
    /// thread's title.
    pub first_message: String,
    /// The person's latest message, cut the same way.
    pub last_message: String,
}

/// `text` cut to [`LISTED_MESSAGE_CHARS`] characters.
pub fn listed_message(text: &str) -> String {
    text.chars().take(LISTED_MESSAGE_CHARS).collect()
}

impl ThreadListing {
    /// The listing of a thread from its exchanges (any order); `None` for
    /// a thread without one.
    pub fn of(thread_id: &str, exchanges: &[ChatExchange]) -> Option<Self> {
        let order = |exchange: &&ChatExchange| (exchange.at_millis, exchange.run_id.clone());
        let first = exchanges.iter().min_by_key(order)?;
        let last = exchanges.iter().max_by_key(order)?;
        Some(ThreadListing {
            thread_id: thread_id.to_string(),
            started_at_millis: first.at_millis,
            last_at_millis: last.at_millis,
            first_message: listed_message(&first.user),
            last_message: listed_message(&last.user),
        })
    }

    /// The key the list is ordered by (descending) and a cursor names.
    pub fn ordering_key(&self) -> String {
        thread_ordering_key(self.last_at_millis, &self.thread_id)
    }
}

/// `{lastAtMillis:013}.{threadId}`.
pub fn thread_ordering_key(last_at_millis: u64, thread_id: &str) -> String {
    format!("{last_at_millis:013}.{thread_id}")
}

/// Which threads, how many, from where.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ThreadListQuery {
    /// 1 to [`MAX_THREADS_PER_PAGE`].
    pub limit: usize,
    /// The previous page's `nextCursor` (an ordering key): threads strictly
    /// before it.
    pub cursor: Option<String>,
}

impl ThreadListQuery {
    /// Whether `cursor` is one this list hands out.
    pub fn is_cursor(cursor: &str) -> bool {
        cursor.split_once('.').is_some_and(|(millis, thread_id)| {
            millis.len() == 13
                && millis.bytes().all(|byte| byte.is_ascii_digit())
                && !thread_id.is_empty()
        })
    }

    /// Whether `listing` belongs in this query's pages.
    pub fn admits(&self, listing: &ThreadListing) -> bool {
        self.cursor
            .as_deref()
            .is_none_or(|cursor| listing.ordering_key().as_str() < cursor)
    }
}

/// One page of the list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadListPage {
    pub threads: Vec<ThreadListing>,
    /// Present when older threads remain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

impl ThreadListPage {
    /// The page of `limit` from `candidates` (admitted, any order, at most
    /// one more than the limit is enough to know whether more remain).
    pub fn newest_first(mut candidates: Vec<ThreadListing>, limit: usize) -> Self {
        candidates.sort_by_key(|listing| std::cmp::Reverse(listing.ordering_key()));
        let more = candidates.len() > limit;
        candidates.truncate(limit);
        let next_cursor = if more {
            candidates.last().map(ThreadListing::ordering_key)
        } else {
            None
        };
        ThreadListPage {
            threads: candidates,
            next_cursor,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exchange(run_id: &str, at_millis: u64, user: &str) -> ChatExchange {
        ChatExchange {
            run_id: run_id.into(),
            at_millis,
            user: user.into(),
            assistant: String::new(),
            agent: None,
            drafts: Vec::new(),
            interrupted: false,
            summary: None,
        }
    }

    #[test]
    fn a_listing_takes_its_title_from_the_earliest_exchange_and_its_time_from_the_latest() {
        let listing = ThreadListing::of(
            "t1",
            &[
                exchange("r2", 2_000, "then"),
                exchange("r1", 1_000, &"x".repeat(500)),
            ],
        )
        .unwrap();
        assert_eq!(listing.started_at_millis, 1_000);
        assert_eq!(listing.last_at_millis, 2_000);
        assert_eq!(listing.first_message.chars().count(), LISTED_MESSAGE_CHARS);
        assert_eq!(listing.last_message, "then");
        assert_eq!(listing.ordering_key(), "0000000002000.t1");
        assert!(ThreadListing::of("t1", &[]).is_none());
    }

    #[test]
    fn pages_run_newest_first_and_a_cursor_leads_to_the_rest() {
        let listings: Vec<ThreadListing> = (1..=5)
            .map(|index| {
                ThreadListing::of(&format!("t{index}"), &[exchange("r", index * 10, "hi")]).unwrap()
            })
            .collect();
        let first = ThreadListPage::newest_first(listings.clone(), 2);
        let ids: Vec<&str> = first.threads.iter().map(|t| t.thread_id.as_str()).collect();
        assert_eq!(ids, ["t5", "t4"]);
        let cursor = first.next_cursor.clone().unwrap();
        assert!(ThreadListQuery::is_cursor(&cursor));
        assert!(!ThreadListQuery::is_cursor("12.t1"));
        let query = ThreadListQuery {
            limit: 2,
            cursor: Some(cursor),
        };
        let rest: Vec<ThreadListing> = listings.into_iter().filter(|l| query.admits(l)).collect();
        let second = ThreadListPage::newest_first(rest, 10);
        let ids: Vec<&str> = second
            .threads
            .iter()
            .map(|t| t.thread_id.as_str())
            .collect();
        assert_eq!(ids, ["t3", "t2", "t1"]);
        assert!(second.next_cursor.is_none());
    }
}
