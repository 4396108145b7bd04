//! `baton eval`'s progress: a bar (`indicatif`) on stderr when it is a
//! terminal, showing examples done, passed and failed so far and the time
//! left; one line per finished example either way (printed above the bar,
//! or alone when stderr is a file or a pipe, as in CI logs).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use baton_evaluation::results::ExampleResult;
use indicatif::{ProgressBar, ProgressStyle};

/// Shared by the examples' tasks.
#[derive(Clone)]
pub struct EvalProgress {
    bar: ProgressBar,
    total: usize,
    finished: Arc<AtomicUsize>,
    failed: Arc<AtomicUsize>,
}

impl EvalProgress {
    pub fn new(total: usize) -> Self {
        let bar = ProgressBar::new(total as u64);
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} examples ({msg}) ETA {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        Self {
            bar,
            total,
            finished: Arc::default(),
            failed: Arc::default(),
        }
    }

    pub fn started(&self, example_id: &str) {
        self.bar.set_message(format!("running {example_id}"));
    }

    /// Counts the example and prints its line.
    pub fn finished(&self, result: &ExampleResult) {
        let done = self.finished.fetch_add(1, Ordering::SeqCst) + 1;
        let failed = if result.passed {
            self.failed.load(Ordering::SeqCst)
        } else {
            self.failed.fetch_add(1, Ordering::SeqCst) + 1
        };
        let score = result
            .judge
            .as_ref()
            .map(|judge| format!(", judge {:.2}", judge.score))
            .unwrap_or_default();
        let line = format!(
            "[{done}/{}] {}: {} ({}, {} ms{score})",
            self.total,
            result.id,
            if result.passed { "pass" } else { "FAIL" },
            result.status.as_deref().unwrap_or("not run"),
            result.duration_ms
        );
        // Above the bar on a terminal; a plain line when the bar is hidden.
        self.bar.suspend(|| eprintln!("{line}"));
        self.bar
            .set_message(format!("{} passed, {failed} failed", done - failed));
        self.bar.inc(1);
    }

    pub fn done(&self) {
        self.bar.finish_and_clear();
    }
}
