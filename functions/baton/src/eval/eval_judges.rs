//! The judge panel of `baton eval`: the panel request file named by
//! `--judges` or the dataset's `judges`, asked about each example's output
//! in process (`PanelRunner`, each judge through its catalog model or the
//! configured default). Each panel's whole output, with its hash-chained
//! transcript, is kept in a file beside the results, as `baton judge
//! verify` reads it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use baton_core::registry::Registry;
use baton_evaluation::checks::judge_request_for;
use baton_evaluation::results::JudgeOutcome;
use baton_judge::request::PanelRequest;
use baton_runtime::clock::SystemClock;
use baton_runtime::models::panels::PanelRunner;
use serde_json::Value;

/// A panel ready to judge examples.
pub struct EvalJudges {
    template: Value,
    runner: PanelRunner,
    transcripts: PathBuf,
}

/// The folder the transcripts of results file `results` go to:
/// `eval-results.jsonl` → `eval-results.transcripts/`.
pub fn transcripts_folder(results: &Path) -> PathBuf {
    let stem = results.file_stem().map_or_else(
        || "eval-results".into(),
        |stem| stem.to_string_lossy().to_string(),
    );
    results.with_file_name(format!("{stem}.transcripts"))
}

/// An example id as a file name: letters, digits, `.`, `_` and `-` kept,
/// anything else `_`.
fn file_name_of(example_id: &str) -> String {
    example_id
        .chars()
        .map(|character| {
            if character.is_ascii_alphanumeric() || matches!(character, '.' | '_' | '-') {
                character
            } else {
                '_'
            }
        })
        .collect()
}

impl EvalJudges {
    /// Reads and checks the panel file (a panel request: its judges, criteria
    /// and configuration; its `content` is replaced per example), refusing
    /// it naming the file and the JSON path.
    pub fn load(path: &Path, registry: &Registry, results: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| format!("{}: {error}", path.display()))?;
        let template: Value = serde_json::from_str(&text)
            .map_err(|error| format!("{}: not valid JSON: {error}", path.display()))?;
        Self::from_template(template, registry, transcripts_folder(results))
            .map_err(|(at, message)| format!("{}: {at}: {message}", path.display()))
    }

    /// The same from the panel request itself; a refusal names its JSON
    /// path. Transcripts go to `transcripts`.
    pub fn from_template(
        template: Value,
        registry: &Registry,
        transcripts: PathBuf,
    ) -> Result<Self, (String, String)> {
        let probe = judge_request_for(&template, "probe", "", &Value::Null, None)
            .map_err(|error| ("$.request".to_string(), error))?;
        let request = PanelRequest::parse(&probe).map_err(|error| (error.path, error.message))?;
        baton_core::model_choice::check_judge_models(registry.models(), &request)?;
        let llm = crate::setup::model_choice::routed_model_for_cli(
            registry,
            &baton_bootstrap::process_environment,
            // A judge panel is models only: no remote agent, no secret.
            Arc::new(baton_runtime::ports::NoSecrets),
        )
        .map_err(|error| ("$".to_string(), error.to_string()))?;
        let runner =
            PanelRunner::new(llm, Arc::new(SystemClock)).with_catalog(registry.models().clone());
        std::fs::create_dir_all(&transcripts).map_err(|error| {
            (
                "$".to_string(),
                format!("{}: {error}", transcripts.display()),
            )
        })?;
        Ok(Self {
            template,
            runner,
            transcripts,
        })
    }

    /// Asks the panel about one example's output; keeps its output (and
    /// transcript) in `{transcripts}/{example id}.json`.
    pub async fn judge(
        &self,
        example_id: &str,
        objective: &str,
        output: &Value,
        reference: Option<&Value>,
    ) -> Result<JudgeOutcome, String> {
        let request_value =
            judge_request_for(&self.template, example_id, objective, output, reference)?;
        let request = PanelRequest::parse(&request_value).map_err(|error| error.to_string())?;
        let panel = self
            .runner
            .run(request, &format!("eval_{example_id}"), |_| {})
            .await
            .map_err(|reason| format!("the judge panel reached no consensus: {reason}"))?;
        let file = self
            .transcripts
            .join(format!("{}.json", file_name_of(example_id)));
        let text = serde_json::to_string_pretty(&panel).map_err(|error| error.to_string())?;
        std::fs::write(&file, text).map_err(|error| format!("{}: {error}", file.display()))?;
        Ok(JudgeOutcome {
            score: panel.consensus.final_score,
            confidence: panel.consensus.confidence,
            variance: panel.consensus.variance,
            transcript_file: Some(file.display().to_string()),
            transcript_head: panel
                .transcript
                .messages()
                .last()
                .map(|(_, _, message)| message.hash.clone()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transcripts_sit_beside_the_results_under_safe_names() {
        assert_eq!(
            transcripts_folder(Path::new("out/eval-results.jsonl")),
            PathBuf::from("out/eval-results.transcripts")
        );
        assert_eq!(file_name_of("as-shipped/2 ü"), "as-shipped_2__");
    }
}
