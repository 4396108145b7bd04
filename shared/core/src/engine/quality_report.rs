//! What the run's output is measured against, read off its state: the
//! terms it must include, the terms an output misses, how deep the revision
//! went, the draft delivered, and the quality report with its acceptance
//! report. Readers only: finishing a run and the quality gate both use them.

use serde_json::Value;

use crate::records::governance::DraftRecord;
use crate::state::delivered_quality::{QualityReport, QualitySource};
use crate::state::run::RunState;

/// `constraints.mustInclude`: terms the delivered output must contain.
pub(super) fn must_include(state: &RunState) -> Vec<String> {
    match state.envelope.constraints.other.get("mustInclude") {
        Some(Value::String(term)) => vec![term.clone()],
        Some(Value::Array(terms)) => terms
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}

/// The `terms` no string of `outputs` contains (case-insensitive).
pub(super) fn missing_terms<'a>(
    terms: &'a [String],
    outputs: impl IntoIterator<Item = &'a Value>,
) -> Vec<&'a str> {
    let text: String = outputs
        .into_iter()
        .map(|output| output.to_string().to_lowercase())
        .collect::<Vec<_>>()
        .join("\n");
    terms
        .iter()
        .filter(|term| !text.contains(&term.to_lowercase()))
        .map(String::as_str)
        .collect()
}

pub(super) fn execution_depth(state: &RunState) -> u32 {
    state
        .envelope
        .constraints
        .execution_depth
        .unwrap_or(1)
        .max(1)
}

/// The draft delivered: the last when it passed, else the best-scoring
/// (the first of equals), as `deliver_best_draft` chose.
pub(super) fn delivered_draft(state: &RunState, threshold: f64) -> Option<&DraftRecord> {
    let drafts = &state.governance.drafts;
    let last = drafts.last()?;
    if last.score >= threshold {
        return Some(last);
    }
    best_draft_index(drafts).map(|index| &drafts[index])
}

/// The best-scoring draft (the first of equals).
pub(super) fn best_draft_index(drafts: &[DraftRecord]) -> Option<usize> {
    drafts
        .iter()
        .enumerate()
        .max_by(|(a_index, a), (b_index, b)| a.score.total_cmp(&b.score).then(b_index.cmp(a_index)))
        .map(|(index, _)| index)
}

/// The `complete` payload's quality and acceptance report: the delivered
/// draft's when a reviewer scored any, else the constraints' weighted score
/// on the output (`observed`), with no acceptance report.
pub(super) fn report(state: &RunState, observed: f64) -> (QualityReport, Option<Value>) {
    let threshold = state.envelope.constraints.quality_threshold;
    let drafts = &state.governance.drafts;
    let delivered = threshold.and_then(|threshold| delivered_draft(state, threshold));
    let (score, source, acceptance_report) = match delivered {
        Some(draft) => (
            draft.score,
            QualitySource::Reviewer,
            draft.acceptance_report.clone(),
        ),
        None => (observed, QualitySource::Constraints, None),
    };
    let quality = QualityReport {
        score,
        source,
        threshold,
        passed: threshold.is_none_or(|threshold| score >= threshold),
        drafts: drafts.len(),
        execution_depth: execution_depth(state),
        draft_scores: drafts.iter().map(|draft| draft.score).collect(),
    };
    (quality, acceptance_report)
}
