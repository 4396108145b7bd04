//! The pretty view's terminal niceties: colours (only when stdout is a
//! terminal and `NO_COLOR` is not set) and a progress line on stderr while
//! a node waits for its model (only when stderr is a terminal).

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// ANSI styles for event types.
#[derive(Debug, Clone, Copy)]
pub struct Palette {
    pub enabled: bool,
}

impl Palette {
    pub fn paint(self, text: &str, style: Style) -> String {
        if !self.enabled {
            return text.to_string();
        }
        let code = match style {
            Style::Good => "32",
            Style::Bad => "31",
            Style::Notice => "33",
            Style::Start => "36",
            Style::Quiet => "2",
            Style::Plain => return text.to_string(),
        };
        format!("\x1b[{code}m{text}\x1b[0m")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Good,
    Bad,
    Notice,
    Start,
    Quiet,
    Plain,
}

/// The style of an event type's name.
pub fn style_of(event_type: &str) -> Style {
    match event_type {
        "complete" | "node_complete" | "hitl_resolved" => Style::Good,
        "error" | "node_error" | "validation_error" | "plan_rejected" => Style::Bad,
        "warning" | "hitl_request" | "policy_triggered" => Style::Notice,
        "node_start" | "plan_generated" | "plan_updated" => Style::Start,
        "metrics" | "phase" | "handoff" | "agent_state" | "session" | "ontology_loaded"
        | "last_turn_context" => Style::Quiet,
        _ => Style::Plain,
    }
}

const GLYPHS: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// A line on stderr showing what the run waits for and for how long,
/// redrawn every 120 ms while something is shown.
pub struct Spinner {
    shown: Arc<Mutex<Option<(String, Instant)>>>,
    ticker: tokio::task::JoinHandle<()>,
}

impl Spinner {
    pub fn start() -> Self {
        let shown: Arc<Mutex<Option<(String, Instant)>>> = Arc::new(Mutex::new(None));
        let drawn = shown.clone();
        let ticker = tokio::spawn(async move {
            let mut tick = 0usize;
            loop {
                tokio::time::sleep(Duration::from_millis(120)).await;
                let line = drawn.lock().ok().and_then(|shown| {
                    shown.as_ref().map(|(label, since)| {
                        format!(
                            "\r\x1b[2K{} {label} {:.1} s",
                            GLYPHS[tick % GLYPHS.len()],
                            since.elapsed().as_secs_f64()
                        )
                    })
                });
                if let Some(line) = line {
                    let mut err = std::io::stderr().lock();
                    let _ = write!(err, "{line}");
                    let _ = err.flush();
                }
                tick += 1;
            }
        });
        Spinner { shown, ticker }
    }

    /// Shows `label` from now on.
    pub fn show(&self, label: String) {
        if let Ok(mut shown) = self.shown.lock() {
            *shown = Some((label, Instant::now()));
        }
    }

    /// Stops showing anything and erases the line.
    pub fn clear(&self) {
        let was_shown = self
            .shown
            .lock()
            .map(|mut shown| shown.take().is_some())
            .unwrap_or(false);
        if was_shown {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.clear();
        self.ticker.abort();
    }
}

/// `1.23 s` or `850 ms`.
pub fn duration_text(millis: u64) -> String {
    if millis >= 1000 {
        format!("{:.2} s", millis as f64 / 1000.0)
    } else {
        format!("{millis} ms")
    }
}
