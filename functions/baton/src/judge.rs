//! `baton judge verify`: recomputes a judge panel's transcript hash chain
//! from an evaluation output (or a bare transcript) and names the first
//! broken link.

use std::path::Path;

use baton_judge::transcript::EvaluationTranscript;
use serde_json::Value;

use crate::commands::{EXIT_COMPLETED, EXIT_RUN_FAILED, invalid};

/// Exit 0 when the chain holds, 3 naming the first broken link, 2 when the
/// file is not a transcript.
pub fn verify(path: &Path) -> u8 {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) => return invalid(format!("cannot read {}: {error}", path.display())),
    };
    let value: Value = match serde_json::from_str(&text) {
        Ok(value) => value,
        Err(error) => return invalid(format!("{}: not valid JSON: {error}", path.display())),
    };
    // An evaluation output carries it under `transcript`; a file may be the transcript itself.
    let transcript_value = value.get("transcript").cloned().unwrap_or(value);
    let transcript: EvaluationTranscript = match serde_json::from_value(transcript_value) {
        Ok(transcript) => transcript,
        Err(error) => {
            return invalid(format!(
                "{}: not an evaluation transcript ($.transcript): {error}",
                path.display()
            ));
        }
    };
    match transcript.verify() {
        Ok(count) => {
            println!(
                "transcript {} verified: {count} messages, every hash link holds",
                transcript.topic_id
            );
            EXIT_COMPLETED
        }
        Err(broken) => {
            eprintln!("baton: the transcript is broken at {broken}");
            EXIT_RUN_FAILED
        }
    }
}
