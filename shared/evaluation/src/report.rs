//! The comparison as one self-contained HTML page: no script, no fetched
//! file; styles inline, histograms as inline SVG. Every text from a results
//! file is escaped.

use crate::compare::{Change, Comparison, ExampleChange};
use crate::results::ExampleResult;
use crate::summary::Summary;

/// Escapes text for HTML content and attribute values.
pub fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            other => escaped.push(other),
        }
    }
    escaped
}

/// The page. Runs link to `{viewer}/#run/{runId}`, unless the results
/// line names the API that ran it.
pub fn render(
    comparison: &Comparison,
    baseline_name: &str,
    candidate_name: &str,
    viewer: &str,
) -> String {
    let verdict = if comparison.regressions.is_empty() {
        "<p class=\"verdict ok\" id=\"verdict\">No regression.</p>".to_string()
    } else {
        format!(
            "<div class=\"verdict bad\" id=\"verdict\"><p>Regressions:</p><ul>{}</ul></div>",
            comparison
                .regressions
                .iter()
                .map(|regression| format!("<li>{}</li>", escape(regression)))
                .collect::<String>()
        )
    };
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<title>Baton evaluation: {candidate} against {baseline}</title>\
<style>{STYLE}</style></head><body>\
<h1>Evaluation: <code>{candidate}</code> against <code>{baseline}</code></h1>\
{verdict}\
<h2>Aggregates</h2>{aggregates}\
<h2>Judge scores</h2><div class=\"histograms\">{before_histogram}{after_histogram}</div>\
<h2>Examples</h2>{table}\
</body></html>\n",
        baseline = escape(baseline_name),
        candidate = escape(candidate_name),
        aggregates = aggregates(comparison),
        before_histogram = histogram("baseline", baseline_name, &side_scores(comparison, true)),
        after_histogram = histogram("candidate", candidate_name, &side_scores(comparison, false)),
        table = examples_table(comparison, viewer),
    )
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}\
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}\
th{background:#f3f3f3}.verdict{padding:.5em 1em;border-radius:4px}.ok{background:#e7f6e7}.bad{background:#fde8e8}\
.broke{background:#fde8e8}.fixed{background:#e7f6e7}.missing{background:#fff3cd}\
.histograms{display:flex;gap:2em;flex-wrap:wrap}figure{margin:0}figcaption{font-weight:600}";

fn side_scores(comparison: &Comparison, baseline: bool) -> Vec<f64> {
    comparison
        .examples
        .iter()
        .filter_map(|example| {
            if baseline {
                example.baseline_score()
            } else {
                example.candidate_score()
            }
        })
        .collect()
}

fn figure(value: Option<f64>, digits: usize) -> String {
    value.map_or_else(|| "–".to_string(), |value| format!("{value:.digits$}"))
}

fn score_cell(summary: &Summary) -> String {
    summary.judge_score.map_or_else(
        || "–".to_string(),
        |score| format!("{:.2} ({:.2} to {:.2})", score.mean, score.low, score.high),
    )
}

fn aggregates(comparison: &Comparison) -> String {
    let (before, after) = (&comparison.baseline, &comparison.candidate);
    let score_change = comparison.score.as_ref().map_or_else(
        || "–".to_string(),
        |score| {
            format!(
                "{:+.2} (95% CI {:+.2} to {:+.2}; sign test p = {})",
                score.difference.mean,
                score.difference.low,
                score.difference.high,
                score
                    .sign_test
                    .map_or_else(|| "–".to_string(), |test| format!("{:.3}", test.p_value))
            )
        },
    );
    let rows = [
        (
            "pass rate",
            format!("{}/{}", before.passed, before.total),
            format!("{}/{}", after.passed, after.total),
            format!(
                "{:+.0} points",
                (after.pass_rate - before.pass_rate) * 100.0
            ),
        ),
        (
            "judge score, mean (95% CI)",
            score_cell(before),
            score_cell(after),
            score_change,
        ),
        (
            "cost, total",
            format!("${:.6}", before.cost_usd_total),
            format!("${:.6}", after.cost_usd_total),
            figure(comparison.cost_rise.map(|rise| rise * 100.0), 1) + " %",
        ),
        (
            "duration p50 / p95 (ms)",
            format!(
                "{} / {}",
                figure(before.duration_ms_p50, 0),
                figure(before.duration_ms_p95, 0)
            ),
            format!(
                "{} / {}",
                figure(after.duration_ms_p50, 0),
                figure(after.duration_ms_p95, 0)
            ),
            String::new(),
        ),
    ];
    let body: String = rows
        .iter()
        .map(|(name, before, after, change)| {
            format!(
                "<tr><th>{name}</th><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(before),
                escape(after),
                escape(change)
            )
        })
        .collect();
    format!(
        "<table id=\"aggregates\"><tr><th></th><th>baseline</th><th>candidate</th><th>change</th></tr>{body}</table>"
    )
}

/// A histogram of scores in ten bins (0–1, …, 9–10) as inline SVG.
fn histogram(side: &str, name: &str, scores: &[f64]) -> String {
    let mut bins = [0usize; 10];
    for score in scores {
        bins[(score.floor().clamp(0.0, 9.0)) as usize] += 1;
    }
    let tallest = bins.iter().copied().max().unwrap_or(0).max(1);
    let (width, height, bar) = (320.0, 140.0, 28.0);
    let bars: String = bins
        .iter()
        .enumerate()
        .map(|(bin, count)| {
            let tall = (*count as f64 / tallest as f64) * (height - 30.0);
            let x = 10.0 + bin as f64 * (bar + 2.0);
            format!(
                "<rect class=\"bar\" data-bin=\"{bin}\" data-count=\"{count}\" x=\"{x}\" y=\"{}\" width=\"{bar}\" height=\"{tall}\" fill=\"#4a7bd0\"><title>{bin}–{}: {count}</title></rect>\
<text x=\"{}\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\">{bin}</text>",
                height - 18.0 - tall,
                bin + 1,
                x + bar / 2.0,
                height - 5.0
            )
        })
        .collect();
    let caption = if scores.is_empty() {
        format!("{}: no judge scores", escape(name))
    } else {
        format!("{}: {} scores", escape(name), scores.len())
    };
    format!(
        "<figure id=\"histogram-{side}\"><figcaption>{side}, {caption}</figcaption>\
<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" role=\"img\" aria-label=\"{side} judge scores\">{bars}</svg></figure>"
    )
}

fn run_link(side: &Option<ExampleResult>, viewer: &str) -> String {
    let Some(result) = side else {
        return "–".to_string();
    };
    let Some(run_id) = &result.run_id else {
        return "not run".to_string();
    };
    let base = result.api.as_deref().unwrap_or(viewer);
    format!(
        "<a href=\"{}/#run/{}\">{}</a>",
        escape(base.trim_end_matches('/')),
        escape(run_id),
        escape(run_id)
    )
}

fn passed_cell(side: &Option<ExampleResult>) -> &'static str {
    match side {
        Some(result) if result.passed => "pass",
        Some(_) => "FAIL",
        None => "–",
    }
}

fn example_row(example: &ExampleChange, viewer: &str) -> String {
    let (class, change) = match example.change {
        Change::Broke => ("broke", "broke"),
        Change::Fixed => ("fixed", "fixed"),
        Change::Same => ("same", ""),
        Change::Missing => ("missing", "missing in candidate"),
        Change::New => ("new", "new in candidate"),
    };
    let failures = example
        .candidate
        .as_ref()
        .map(|after| after.failures().join("; "))
        .unwrap_or_default();
    let cost =
        |side: &Option<ExampleResult>| figure(side.as_ref().and_then(|result| result.cost_usd), 6);
    format!(
        "<tr class=\"{class}\" data-example=\"{id}\"><td>{id}</td><td>{}</td><td>{}</td><td>{change}</td>\
<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        passed_cell(&example.baseline),
        passed_cell(&example.candidate),
        figure(example.baseline_score(), 2),
        figure(example.candidate_score(), 2),
        cost(&example.baseline),
        cost(&example.candidate),
        escape(&failures),
        run_link(&example.baseline, viewer),
        run_link(&example.candidate, viewer),
        id = escape(&example.id),
    )
}

fn examples_table(comparison: &Comparison, viewer: &str) -> String {
    let rows: String = comparison
        .examples
        .iter()
        .map(|example| example_row(example, viewer))
        .collect();
    format!(
        "<table id=\"examples\"><tr><th>example</th><th>baseline</th><th>candidate</th><th>change</th>\
<th>score before</th><th>score after</th><th>cost before</th><th>cost after</th>\
<th>candidate's failed checks</th><th>baseline run</th><th>candidate run</th></tr>{rows}</table>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{FailOn, compare};
    use crate::results::completed_example;

    fn result(id: &str, passed: bool, score: f64) -> ExampleResult {
        completed_example(id, passed, Some(score), None, "<b>x</b>")
    }

    #[test]
    fn the_page_holds_the_verdict_the_rows_the_bars_and_escapes_text() {
        let baseline = [result("a<1>", true, 7.5), result("b", true, 8.2)];
        let mut candidate = [result("a<1>", false, 7.4), result("b", true, 8.0)];
        candidate[1].api = Some("https://baton.example/".into());
        let comparison = compare(&baseline, &candidate, FailOn::default());
        let page = render(
            &comparison,
            "base.jsonl",
            "cand.jsonl",
            "http://127.0.0.1:8080",
        );
        assert!(page.starts_with("<!doctype html>"));
        assert!(page.contains("id=\"verdict\"><p>Regressions:"));
        assert!(
            page.contains("data-example=\"a&lt;1&gt;\""),
            "ids are escaped"
        );
        assert!(page.contains("&lt;b&gt;x&lt;/b&gt;") && !page.contains("<b>x</b>"));
        assert!(page.contains("href=\"http://127.0.0.1:8080/#run/run_a&lt;1&gt;\""));
        assert!(page.contains("href=\"https://baton.example/#run/run_b\""));
        // Baseline: one score in bin 7, one in bin 8.
        assert!(page.contains("data-bin=\"7\" data-count=\"1\""));
        assert_eq!(page.matches("class=\"bar\"").count(), 20, "ten bins a side");
        assert!(!page.contains("<script"), "self-contained, no script");
    }
}
