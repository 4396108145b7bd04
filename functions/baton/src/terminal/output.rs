//! Printing event frames in the four formats (and `--output-only`). The
//! pretty view adds each node's time, tokens and cost, the run's totals,
//! colours and a progress line while a model works, the last two only on
//! a terminal.

use std::io::{IsTerminal, Write};

use baton_core::state::run::RunStatus;
use baton_core::wire::event::{EventFrame, EventType};
use baton_core::wire::hooks::HookRenderer;
use serde_json::Value;

use crate::terminal::OutputFormat;
use crate::terminal::progress::{Palette, Spinner, Style, duration_text, style_of};

pub struct FramePrinter {
    format: OutputFormat,
    inside_delta_line: bool,
    hooks: HookRenderer,
    last_frame: Option<(u64, String)>,
    palette: Palette,
    spinner: Option<Spinner>,
    /// The run's last `metrics` (its totals), for the closing line.
    run_totals: Option<Value>,
}

impl FramePrinter {
    /// `colours`: the caller's wish (false with `NO_COLOR`); honoured only
    /// when stdout is a terminal. The progress line needs stderr to be one.
    pub fn new(format: OutputFormat, colours: bool) -> Self {
        let pretty = format == OutputFormat::Pretty;
        FramePrinter {
            format,
            inside_delta_line: false,
            hooks: HookRenderer::default(),
            last_frame: None,
            palette: Palette {
                enabled: pretty && colours && std::io::stdout().is_terminal(),
            },
            spinner: (pretty && std::io::stderr().is_terminal()).then(Spinner::start),
            run_totals: None,
        }
    }

    fn follow_progress(&mut self, frame: &EventFrame) {
        if frame.event_type == EventType::Metrics && frame.node_id.is_none() {
            self.run_totals = frame.payload_value();
        }
        let Some(spinner) = &self.spinner else {
            return;
        };
        spinner.clear();
        let executor = frame
            .payload
            .as_ref()
            .and_then(|payload| payload.get("executorType"))
            .and_then(Value::as_str);
        if frame.event_type == EventType::NodeStart && executor != Some("human") {
            let capability = frame
                .payload
                .as_ref()
                .and_then(|payload| payload.get("capabilityId"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            spinner.show(format!(
                "{} {capability} is working",
                frame.node_id.as_deref().unwrap_or_default()
            ));
        }
    }

    pub fn print_frames(&mut self, frames: &[EventFrame]) {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        for frame in frames {
            if self.format == OutputFormat::Pretty {
                self.follow_progress(frame);
            }
            let _ = match self.format {
                OutputFormat::Output => {
                    if frame.event_type == EventType::Metrics && frame.node_id.is_none() {
                        self.run_totals = frame.payload_value();
                    }
                    Ok(())
                }
                OutputFormat::Ndjson => {
                    writeln!(out, "{}", serde_json::to_string(frame).unwrap_or_default())
                }
                OutputFormat::Sse => write!(out, "{}", frame.to_sse()),
                OutputFormat::Pretty => self.write_pretty(&mut out, frame),
                OutputFormat::Hooks => self.hooks.render(frame).iter().try_for_each(|event| {
                    writeln!(out, "{}", event.to_line(frame.id, &frame.run_id))
                }),
            };
            self.last_frame = Some((frame.id, frame.run_id.clone()));
        }
        let _ = out.flush();
    }

    fn write_pretty(&mut self, out: &mut impl Write, frame: &EventFrame) -> std::io::Result<()> {
        if frame.event_type == EventType::Delta {
            if !self.inside_delta_line {
                write!(out, "      │ ")?;
                self.inside_delta_line = true;
            }
            return write!(
                out,
                "{}",
                frame
                    .message
                    .as_deref()
                    .unwrap_or_default()
                    .replace('\n', "\n      │ ")
            );
        }
        if self.inside_delta_line {
            writeln!(out)?;
            self.inside_delta_line = false;
        }
        let node = frame
            .node_id
            .as_deref()
            .map(|node| format!(" [{node}]"))
            .unwrap_or_default();
        let message = frame
            .message
            .clone()
            .or_else(|| inline_summary(frame))
            .map(|message| format!(" {message}"))
            .unwrap_or_default();
        // A child run's frame, relayed in its parent's stream.
        let relayed = if frame.forwarded {
            format!("   ↳ {} ", frame.run_id)
        } else {
            String::new()
        };
        let name = frame.event_type.as_str();
        writeln!(
            out,
            "{relayed}{:>4} {}{}{}",
            frame.id,
            self.palette.paint(name, style_of(name)),
            node,
            message
        )?;
        let detail = match frame.event_type {
            EventType::PlanGenerated => frame
                .payload
                .as_ref()
                .and_then(|payload| payload.get("nodes"))
                .map(|nodes| {
                    nodes
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|node| {
                            format!(
                                "{} {} → {}{}",
                                node["nodeId"].as_str().unwrap_or_default(),
                                node["capabilityId"].as_str().unwrap_or_default(),
                                node["provides"],
                                node["model"]
                                    .as_str()
                                    .map(|model| format!(" (model {model})"))
                                    .unwrap_or_default()
                            )
                        })
                        .collect::<Vec<_>>()
                        .join("\n")
                }),
            EventType::PlanRejected
            | EventType::ValidationError
            | EventType::Error
            | EventType::NodeError
            | EventType::NodeSkipped => frame
                .payload
                .as_ref()
                .map(|payload| serde_json::to_string_pretty(payload).unwrap_or_default()),
            EventType::ToolCall | EventType::ToolResult | EventType::AgentState => {
                frame.payload.as_ref().map(|payload| {
                    let mut shown = payload.to_string();
                    if shown.len() > 300 {
                        let cut = (0..=300)
                            .rev()
                            .find(|at| shown.is_char_boundary(*at))
                            .unwrap_or(0);
                        shown.truncate(cut);
                        shown.push('…');
                    }
                    shown
                })
            }
            EventType::NodeComplete => frame.payload.as_deref().map(node_figures),
            EventType::Metrics if frame.node_id.is_none() => frame
                .payload
                .as_ref()
                .map(|payload| format!("run totals: {}", totals_text(payload))),
            EventType::NodeStart => frame.payload.as_ref().and_then(|payload| {
                let capability = payload.get("capabilityId")?.as_str().unwrap_or_default();
                Some(match payload.get("model").and_then(Value::as_str) {
                    Some(model) => format!("capability {capability}, model {model}"),
                    None => format!("capability {capability}"),
                })
            }),
            _ => None,
        };
        if let Some(detail) = detail {
            for line in detail.lines() {
                writeln!(out, "      {}", self.palette.paint(line, Style::Quiet))?;
            }
        }
        Ok(())
    }

    pub fn finish(&mut self, status: RunStatus, output: Option<&Value>) {
        if let Some(spinner) = self.spinner.take() {
            drop(spinner);
        }
        if self.format == OutputFormat::Output {
            // Only the validated output on stdout; how it ended is the exit code.
            if let Some(output) = output {
                println!(
                    "{}",
                    serde_json::to_string_pretty(output).unwrap_or_default()
                );
            }
            return;
        }
        if self.format == OutputFormat::Hooks {
            // A run waiting for a person ends its hook stream too.
            if let (Some(event), Some((id, run_id))) =
                (self.hooks.finish_unended(), self.last_frame.as_ref())
            {
                println!("{}", event.to_line(*id, run_id));
            }
            return;
        }
        if self.format != OutputFormat::Pretty {
            return;
        }
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        if self.inside_delta_line {
            let _ = writeln!(out);
        }
        let style = match status {
            RunStatus::Completed => Style::Good,
            status if status.is_terminal() => Style::Bad,
            _ => Style::Notice,
        };
        let totals = self
            .run_totals
            .as_ref()
            .map(|totals| format!(" · {}", totals_text(totals)))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "\nrun {}{totals}",
            self.palette.paint(status.as_str(), style)
        );
        if let Some(output) = output {
            let _ = writeln!(
                out,
                "validated output (satisfies outputContract.schema):\n{}",
                serde_json::to_string_pretty(output).unwrap_or_default()
            );
        }
        let _ = out.flush();
    }
}

/// `1.23 s · 772 tokens (720 in, 52 out) · $0.000139 · gpt-4o-mini`.
fn node_figures(payload: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(millis) = payload.get("durationMs").and_then(Value::as_u64) {
        parts.push(duration_text(millis));
    }
    parts.push(tokens_text(payload.get("usage")));
    if let Some(cost) = payload.get("costUsd").and_then(Value::as_f64) {
        parts.push(format!("${cost:.6}"));
    }
    if let Some(model) = payload.get("model").and_then(Value::as_str) {
        parts.push(model.to_string());
    }
    parts.join(" · ")
}

fn tokens_text(usage: Option<&Value>) -> String {
    let number = |key: &str| {
        usage
            .and_then(|usage| usage.get(key))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let cached = number("cached");
    let cached = if cached > 0 {
        format!(", {cached} cached")
    } else {
        String::new()
    };
    format!(
        "{} tokens ({} in, {} out{cached})",
        number("total"),
        number("prompt"),
        number("completion")
    )
}

/// A run's `metrics`: time, tokens, cost.
fn totals_text(payload: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(millis) = payload.get("durationMs").and_then(Value::as_u64) {
        parts.push(duration_text(millis));
    }
    parts.push(tokens_text(payload.get("tokens")));
    match payload.get("costUsd").and_then(Value::as_f64) {
        Some(cost) => parts.push(format!("${cost:.6}")),
        None => parts.push("cost unknown".to_string()),
    }
    parts.join(" · ")
}

/// What a frame without a message says on its own line: the phase entered,
/// the handoff's parties (so no line is a bare event name).
fn inline_summary(frame: &EventFrame) -> Option<String> {
    let payload = frame.payload.as_ref()?;
    let text = |key: &str| payload.get(key).and_then(Value::as_str);
    match frame.event_type {
        EventType::Phase => text("phase").map(|phase| format!("→ {phase}")),
        EventType::Handoff => Some(format!(
            "{} {} → {}",
            text("status")?,
            text("from")?,
            text("to")?
        )),
        _ => None,
    }
}
