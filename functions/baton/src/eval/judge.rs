//! `baton judge REQUEST`: runs a judge panel in process (judges asked
//! concurrently, each through its own catalog model or the configured
//! default) and prints its evaluation.
//! `baton judge verify`: recomputes a panel's transcript hash chain from an
//! evaluation output (or a bare transcript) and names the first broken link.

use std::path::Path;
use std::sync::Arc;

use baton_judge::request::PanelRequest;
use baton_judge::transcript::EvaluationTranscript;
use baton_runtime::clock::SystemClock;
use baton_runtime::models::panels::PanelRunner;
use serde_json::Value;

use crate::failure::{Ended, Outcome, failed, invalid};
use crate::terminal::OutputFormat;

/// Exit 0 with the evaluation, 3 when no consensus could be formed, 2 for
/// a request that is not one (naming the JSON path).
pub async fn run(path: &Path, format: OutputFormat) -> Outcome {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) => return Err(invalid(format!("cannot read {}: {error}", path.display()))),
    };
    let value: Value = match serde_json::from_str(&text) {
        Ok(value) => value,
        Err(error) => {
            return Err(invalid(format!(
                "{}: not valid JSON: {error}",
                path.display()
            )));
        }
    };
    let request = match PanelRequest::parse(&value) {
        Ok(request) => request,
        Err(error) => return Err(invalid(format!("{}: {error}", path.display()))),
    };
    let configuration = crate::setup::configuration()?;
    let registry = crate::setup::load_registry(None, &configuration)?;
    // Each judge asks its own catalog model: a name the catalog lacks is
    // refused before any is asked.
    if let Err((at, message)) =
        baton_core::planning::model_choice::check_judge_models(registry.models(), &request)
    {
        return Err(invalid(format!("{}: {at}: {message}", path.display())));
    }
    let llm = match crate::setup::model_choice::routed_model_for_cli(
        &registry,
        &baton_bootstrap::process_environment,
        // A judge panel is models only: no remote agent, no secret.
        Arc::new(baton_runtime::ports::NoSecrets),
    ) {
        Ok(llm) => llm,
        Err(error) => return Err(invalid(error)),
    };
    let runner =
        PanelRunner::new(llm, Arc::new(SystemClock)).with_catalog(registry.models().clone());
    let topic_id = format!("panel_{}", request.request.id);
    let correlation_id = request.request.id.clone();
    // A machine format's progress lines are frames of the event-frame
    // schema: the panel's topic is their run, the request id their
    // correlation id, numbered from 1; the judges' panel is their node.
    let started = std::time::Instant::now();
    let mut sequence = 0;
    let mut progress_frame = |progress: &baton_judge::panel::EvaluationProgress| {
        sequence += 1;
        let payload = baton_core::wire::frames::ProgressPayload::from(progress);
        let stamp = baton_core::wire::frames::FrameStamp::new(
            baton_runtime::ports::Clock::now(&SystemClock),
            0,
        );
        baton_core::wire::frames::progress(&stamp, "panel", &payload).into_frame(
            sequence,
            &topic_id,
            &correlation_id,
        )
    };
    let evaluated = runner
        .run(request, &topic_id, |progress| match format {
            OutputFormat::Pretty => eprintln!(
                "[{}] round {}/{}: {} of {} judges scored, variance {:.3}",
                progress.status,
                progress.current_round,
                progress.total_rounds,
                progress.scores_received,
                progress.total_agents,
                progress.variance
            ),
            OutputFormat::Ndjson | OutputFormat::Hooks | OutputFormat::Output => println!(
                "{}",
                serde_json::to_string(&progress_frame(progress)).unwrap_or_default()
            ),
            OutputFormat::Sse => print!("{}", progress_frame(progress).to_sse()),
        })
        .await;
    match evaluated {
        Ok(output) => {
            for warning in &output.warnings {
                eprintln!("baton: warning: {warning}");
            }
            // The last frame is the panel's `complete`, its output the
            // evaluation (as a served evaluation's run ends).
            let complete = baton_core::wire::frames::complete(
                &baton_core::wire::frames::FrameStamp::new(
                    baton_runtime::ports::Clock::now(&SystemClock),
                    0,
                ),
                &baton_core::wire::frames::CompletePayload {
                    output: serde_json::to_value(&output).unwrap_or_default(),
                    status: baton_core::state::run::RunStatus::Completed,
                    satisfaction_score: None,
                    observed_satisfaction: 1.0,
                    duration_ms: Some(
                        u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                    ),
                    quality: Some(baton_core::wire::frames::QualityReport {
                        score: 1.0,
                        source: baton_core::wire::frames::QualitySource::Constraints,
                        threshold: None,
                        passed: true,
                        drafts: 0,
                        execution_depth: 1,
                        draft_scores: Vec::new(),
                    }),
                    acceptance_report: None,
                },
            )
            .into_frame(sequence + 1, &topic_id, &correlation_id);
            match format {
                OutputFormat::Pretty => println!(
                    "{}",
                    serde_json::to_string_pretty(&output).unwrap_or_default()
                ),
                OutputFormat::Ndjson | OutputFormat::Hooks | OutputFormat::Output => {
                    println!("{}", serde_json::to_string(&complete).unwrap_or_default())
                }
                OutputFormat::Sse => print!("{}", complete.to_sse()),
            }
            Ok(Ended::Completed)
        }
        Err(reason) => Err(failed(format!("the panel reached no consensus: {reason}"))),
    }
}

/// Exit 0 when the chain holds, 3 naming the first broken link, 2 when the
/// file is not a transcript.
pub fn verify(path: &Path) -> Outcome {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) => return Err(invalid(format!("cannot read {}: {error}", path.display()))),
    };
    let value: Value = match serde_json::from_str(&text) {
        Ok(value) => value,
        Err(error) => {
            return Err(invalid(format!(
                "{}: not valid JSON: {error}",
                path.display()
            )));
        }
    };
    // An evaluation output carries it under `transcript`; a file may be the transcript itself.
    let transcript_value = value.get("transcript").cloned().unwrap_or(value);
    let transcript: EvaluationTranscript = match serde_json::from_value(transcript_value) {
        Ok(transcript) => transcript,
        Err(error) => {
            return Err(invalid(format!(
                "{}: not an evaluation transcript ($.transcript): {error}",
                path.display()
            )));
        }
    };
    match transcript.verify() {
        Ok(count) => {
            println!(
                "transcript {} verified: {count} messages, every hash link holds",
                transcript.topic_id
            );
            Ok(Ended::Completed)
        }
        Err(broken) => Err(failed(format!("the transcript is broken at {broken}"))),
    }
}
