//! `baton eval compare BASELINE CANDIDATE`: two results files of `baton
//! eval` paired by example id (`baton_evaluation::compare`). Prints each
//! example that changed and the aggregate differences, writes the
//! self-contained HTML report, exits 1 naming each regression (a pass-rate
//! drop, a judge-score drop beyond its noise, a cost rise: `--fail-on`
//! sets the thresholds), 0 when there is none, 2 on an unreadable file.

use std::path::PathBuf;

use baton_evaluation::compare::{Change, FailOn, compare as compare_results};
use baton_evaluation::report::render;
use baton_evaluation::results::{ExampleResult, parse_results};

use crate::failure::{CommandError, Ended, Outcome, invalid};

#[derive(clap::Args)]
pub struct CompareArguments {
    /// The baseline's results file.
    pub baseline: PathBuf,
    /// The candidate's results file.
    pub candidate: PathBuf,
    /// Thresholds past which a change is a regression:
    /// `pass-rate-drop=0,score-drop=0.5,cost-rise=0.25` (the defaults; any subset).
    #[arg(long, default_value = "")]
    pub fail_on: String,
    /// Where the HTML report goes.
    #[arg(long, default_value = "eval-report.html")]
    pub report: PathBuf,
    /// The viewer the report links runs to (`baton serve`'s address), for
    /// runs kept by the embedded default.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub viewer: String,
}

fn read(path: &PathBuf) -> Result<Vec<ExampleResult>, CommandError> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| invalid(format!("{}: {error}", path.display())))?;
    parse_results(&text).map_err(|error| invalid(format!("{}: {error}", path.display())))
}

fn score(value: Option<f64>) -> String {
    value.map_or_else(|| "–".into(), |score| format!("{score:.2}"))
}

/// Runs `baton eval compare`.
pub fn compare(arguments: CompareArguments) -> Outcome {
    let fail_on = match FailOn::parse(&arguments.fail_on) {
        Ok(fail_on) => fail_on,
        Err(error) => return Err(invalid(format!("--fail-on: {error}"))),
    };
    let (baseline, candidate) = (read(&arguments.baseline)?, read(&arguments.candidate)?);
    let comparison = compare_results(&baseline, &candidate, fail_on);
    for example in &comparison.examples {
        let (before, after) = (example.baseline_score(), example.candidate_score());
        let scores = if before.is_some() || after.is_some() {
            format!(", judge {} → {}", score(before), score(after))
        } else {
            String::new()
        };
        match example.change {
            Change::Broke => println!(
                "broke        {}: {}{scores}",
                example.id,
                example
                    .candidate
                    .as_ref()
                    .map(|after| after.failures().join("; "))
                    .unwrap_or_default()
            ),
            Change::Fixed => println!("fixed        {}{scores}", example.id),
            Change::Missing => println!("missing      {} (not in the candidate)", example.id),
            Change::New => println!("new          {} (not in the baseline)", example.id),
            Change::Same if !scores.is_empty() => println!("same         {}{scores}", example.id),
            Change::Same => {}
        }
    }
    let (before, after) = (&comparison.baseline, &comparison.candidate);
    println!(
        "pass rate    {}/{} → {}/{}",
        before.passed, before.total, after.passed, after.total
    );
    if let Some(change) = &comparison.score {
        println!(
            "judge score  {:+.2} (95% CI {:+.2} to {:+.2}, paired bootstrap over {}){}",
            change.difference.mean,
            change.difference.low,
            change.difference.high,
            change.difference.count,
            change
                .sign_test
                .map(|test| format!(
                    "; sign test {} better, {} worse, p = {:.3}",
                    test.better, test.worse, test.p_value
                ))
                .unwrap_or_default()
        );
    }
    println!(
        "cost         ${:.6} → ${:.6}{}",
        before.cost_usd_total,
        after.cost_usd_total,
        comparison
            .cost_rise
            .map(|rise| format!(" ({:+.1}% on the paired examples)", rise * 100.0))
            .unwrap_or_default()
    );
    let page = render(
        &comparison,
        &arguments.baseline.display().to_string(),
        &arguments.candidate.display().to_string(),
        &arguments.viewer,
    );
    if let Err(error) = std::fs::write(&arguments.report, page) {
        return Err(invalid(format!("{}: {error}", arguments.report.display())));
    }
    println!("report       {}", arguments.report.display());
    if comparison.regressions.is_empty() {
        println!("verdict      no regression");
        Ok(Ended::Completed)
    } else {
        for regression in &comparison.regressions {
            println!("REGRESSION   {regression}");
        }
        Ok(Ended::Regression)
    }
}
