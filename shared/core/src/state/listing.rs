//! A run as the runs list shows it (`GET /api/v1/flex/runs`), and the
//! list's query and page. Stores keep or derive a listing per run; the
//! list is newest first, and a page's cursor is the ordering key of its
//! last run (`{createdAt as 13-digit Unix ms}.{runId}`: fixed width, so it
//! sorts as text the way it sorts as time), so the next page starts after
//! it even when newer runs arrive meanwhile.

use serde::{Deserialize, Serialize};

use crate::state::run::{RunState, RunStatus};

/// Longest objective a listing carries (characters).
pub const LISTED_OBJECTIVE_CHARS: usize = 200;

/// Most runs a page may hold.
pub const MAX_RUNS_PER_PAGE: usize = 100;

/// One run in the list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunListing {
    pub run_id: String,
    pub status: RunStatus,
    /// The objective, cut to [`LISTED_OBJECTIVE_CHARS`].
    pub objective: String,
    pub created_at: String,
    /// A child run: the run whose agent started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<String>,
    /// A fork: the run it was forked from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from_run_id: Option<String>,
    /// The run's thread (usage by thread sums over it; empty for runs
    /// listed before listings carried it).
    #[serde(default)]
    pub thread_id: String,
    /// The user the submitting request named (`X-Baton-User`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitted_by: Option<String>,
    /// The run's workflow name (`workflowName`, else the output schema's
    /// `title`, else `baton`; empty for runs listed before listings
    /// carried it).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub workflow_name: String,
    /// What the run's model calls used, once it is settled (ended, or
    /// waiting for a person): the listing is not rewritten at every step,
    /// so a run at work shows none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ListedUsage>,
}

/// A settled run's model usage in the list: its totals and their split by
/// what the calls were for (`planning`, `execution`, `review`, `judge`,
/// `summary`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListedUsage {
    pub total_tokens: u64,
    /// Absent when no call was priced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Total tokens by operation.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub tokens_by_operation: std::collections::BTreeMap<String, u64>,
    /// Who and what the usage is attributed to (empty in listings stored
    /// before usage carried its attribution: the upgrade corpus found a
    /// DynamoDB runs list that failed on them).
    #[serde(default)]
    pub attribution: crate::basics::usage::UsageAttribution,
}

/// `state`'s usage attribution, for calls made for `operation` (`None`:
/// the run's totals).
pub fn usage_attribution(
    state: &RunState,
    operation: Option<crate::state::run::UsageOperation>,
) -> crate::basics::usage::UsageAttribution {
    let metadata_text = |key: &str| {
        state
            .envelope
            .metadata
            .as_ref()
            .and_then(|metadata| metadata.get(key))
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
    };
    crate::basics::usage::UsageAttribution {
        operation_type: operation.map(|operation| std::borrow::Cow::Borrowed(operation.as_str())),
        execution_mode: metadata_text("executionMode"),
        user_id: state.submitted_by.clone(),
        session_id: Some(state.thread_id.clone()),
        context_type: state
            .chat
            .as_ref()
            .and_then(|chat| chat.context_type.clone())
            .or_else(|| metadata_text("contextType")),
    }
}

impl ListedUsage {
    fn of(state: &RunState) -> Self {
        ListedUsage {
            attribution: usage_attribution(state, None),
            total_tokens: state.total_usage().total(),
            cost_usd: state
                .total_cost_usd()
                .map(crate::catalog::model_catalog::round_cost),
            tokens_by_operation: state
                .usage_by_operation
                .iter()
                .map(|(operation, spend)| (operation.as_str().to_string(), spend.usage.total()))
                .collect(),
        }
    }
}

impl RunListing {
    pub fn of(state: &RunState) -> Self {
        RunListing {
            run_id: state.run_id.clone(),
            status: state.status(),
            objective: state
                .envelope
                .objective
                .chars()
                .take(LISTED_OBJECTIVE_CHARS)
                .collect(),
            created_at: state.created_at.rfc3339(),
            parent_run_id: state.parent.as_ref().map(|parent| parent.run_id.clone()),
            forked_from_run_id: state
                .forked_from
                .as_ref()
                .map(|origin| origin.run_id.clone()),
            thread_id: state.thread_id.clone(),
            submitted_by: state.submitted_by.clone(),
            workflow_name: state.envelope.workflow_name().to_string(),
            usage: state.status().is_settled().then(|| ListedUsage::of(state)),
        }
    }

    /// The key the list is ordered by (descending) and a cursor names.
    pub fn ordering_key(&self) -> String {
        ordering_key(&self.created_at, &self.run_id)
    }
}

/// `{createdAt as 13-digit Unix ms}.{runId}`.
pub fn ordering_key(created_at: &str, run_id: &str) -> String {
    let created_millis = crate::basics::instant::Instant::parse_rfc3339(created_at)
        .map(|instant| instant.unix_millis())
        .unwrap_or(0);
    format!("{created_millis:013}.{run_id}")
}

/// Where a page ends: the last run's creation time (Unix ms) and id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListCursor {
    pub created_millis: u64,
    pub run_id: String,
}

impl ListCursor {
    /// None when `text` is not a cursor this list hands out.
    pub fn parse(text: &str) -> Option<Self> {
        let (millis, run_id) = text.split_once('.')?;
        if millis.len() != 13 || run_id.is_empty() {
            return None;
        }
        Some(ListCursor {
            created_millis: millis.parse().ok()?,
            run_id: run_id.to_string(),
        })
    }

    /// The ordering key it stands for (and its text form).
    pub fn key(&self) -> String {
        format!("{:013}.{}", self.created_millis, self.run_id)
    }
}

/// Which runs, how many, from where.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunListQuery {
    pub status: Option<RunStatus>,
    /// 1 to [`MAX_RUNS_PER_PAGE`].
    pub limit: usize,
    /// The previous page's `nextCursor`: runs strictly older than it.
    pub cursor: Option<ListCursor>,
    /// Only the forks of this run (`POST /runs/{id}/fork`).
    pub forked_from: Option<String>,
}

impl RunListQuery {
    /// Whether `listing` belongs in this query's pages (status and cursor).
    pub fn admits(&self, listing: &RunListing) -> bool {
        self.status.is_none_or(|status| listing.status == status)
            && self
                .forked_from
                .as_ref()
                .is_none_or(|source| listing.forked_from_run_id.as_ref() == Some(source))
            && self
                .cursor
                .as_ref()
                .is_none_or(|cursor| listing.ordering_key() < cursor.key())
    }
}

/// One page of the list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunListPage {
    pub runs: Vec<RunListing>,
    /// Present when older runs remain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

impl RunListPage {
    /// The page of `query.limit` from `candidates` (already newest first
    /// and admitted, at most one more than the limit).
    pub fn from_newest_first(mut candidates: Vec<RunListing>, limit: usize) -> Self {
        let more = candidates.len() > limit;
        candidates.truncate(limit);
        let next_cursor = if more {
            candidates.last().map(RunListing::ordering_key)
        } else {
            None
        };
        RunListPage {
            runs: candidates,
            next_cursor,
        }
    }
}
