//! Printing event frames in the four formats.

use std::io::Write;

use baton_core::event::{EventFrame, EventType};
use baton_core::hooks::HookRenderer;
use baton_core::run::RunStatus;
use serde_json::Value;

use crate::OutputFormat;

pub struct FramePrinter {
    format: OutputFormat,
    inside_delta_line: bool,
    hooks: HookRenderer,
    last_frame: Option<(u64, String)>,
}

impl FramePrinter {
    pub fn new(format: OutputFormat) -> Self {
        FramePrinter {
            format,
            inside_delta_line: false,
            hooks: HookRenderer::default(),
            last_frame: None,
        }
    }

    pub fn print_frames(&mut self, frames: &[EventFrame]) {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        for frame in frames {
            let _ = match self.format {
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
            .as_deref()
            .map(|message| format!(" {message}"))
            .unwrap_or_default();
        // A child run's frame, relayed in its parent's stream.
        let relayed = if frame.forwarded {
            format!("   ↳ {} ", frame.run_id)
        } else {
            String::new()
        };
        writeln!(
            out,
            "{relayed}{:>4} {}{}{}",
            frame.id,
            frame.event_type.as_str(),
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
                                "{} {} → {}",
                                node["nodeId"].as_str().unwrap_or_default(),
                                node["capabilityId"].as_str().unwrap_or_default(),
                                node["provides"]
                            )
                        })
                        .collect::<Vec<_>>()
                        .join("\n")
                }),
            EventType::PlanRejected
            | EventType::ValidationError
            | EventType::Error
            | EventType::NodeError => frame
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
            EventType::NodeStart => frame
                .payload
                .as_ref()
                .and_then(|payload| payload.get("capabilityId"))
                .map(|capability| {
                    format!("capability {}", capability.as_str().unwrap_or_default())
                }),
            _ => None,
        };
        if let Some(detail) = detail {
            for line in detail.lines() {
                writeln!(out, "      {line}")?;
            }
        }
        Ok(())
    }

    pub fn finish(&mut self, status: RunStatus, output: Option<&Value>) {
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
        let _ = writeln!(out, "\nrun {}", status.as_str());
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
