//! `baton draft`: the developer sandbox's envelope builder in the
//! terminal. Each message (a `--message`, or a paragraph typed or piped on
//! standard input, ended by an empty line) gets the builder's reply on
//! stderr; once a message confirms a draft that passes, the envelope is
//! written to `--out` (or printed on stdout) and the command ends. The
//! draft is checked as `baton run` would submit it (the run service's
//! preview over the registry); no model is called and nothing is stored.

use std::io::BufRead;
use std::path::PathBuf;

use baton_bootstrap::stores::{LeftOverSteps, StoreChoice};
use baton_runtime::RuntimeError;
use baton_sandbox::{DraftMessage, DraftProblem, DraftRequest, DraftRole, DraftTurn};
use serde_json::Value;

use crate::failure::{CommandError, Ended, Outcome, failed, invalid};
use crate::setup::{configuration, embedded_services, load_registry};

/// What `baton draft` was asked.
pub struct DraftOptions {
    /// The caller's messages, in order; none: read standard input.
    pub messages: Vec<String>,
    /// Where the finished envelope goes (stdout when absent).
    pub out: Option<PathBuf>,
    /// Print each turn as a JSON line on stdout (the builder's answer as
    /// the API gives it) instead of its reply on stderr.
    pub json: bool,
    pub registry: Option<PathBuf>,
}

pub async fn draft(options: DraftOptions) -> Outcome {
    let configuration = configuration()?;
    let registry = load_registry(options.registry.clone(), &configuration)?;
    let (services, _queue) = embedded_services(
        registry.clone(),
        &configuration,
        &StoreChoice::Memory,
        LeftOverSteps::None,
    )
    .await?;
    let check = |envelope: &Value| {
        services
            .runs
            .preview(envelope)
            .map_err(|error| match error {
                RuntimeError::InvalidInput { path, message } => DraftProblem::new(path, message),
                other => DraftProblem::new("$", other.to_string()),
            })
    };
    let mut request = DraftRequest::default();
    let mut turn = take_turn(&registry, &request, &check, options.json)?;
    let mut said = options.messages.into_iter();
    let mut typed = std::io::stdin().lock();
    let reads_stdin = said.len() == 0;
    loop {
        let message = if reads_stdin {
            match read_paragraph(&mut typed)? {
                Some(message) => message,
                None => break,
            }
        } else {
            match said.next() {
                Some(message) => message,
                None => break,
            }
        };
        request.messages.push(DraftMessage {
            role: DraftRole::User,
            content: message,
        });
        turn = take_turn(&registry, &request, &check, options.json)?;
        request.messages.push(DraftMessage {
            role: DraftRole::Assistant,
            content: turn.reply.clone(),
        });
        if turn.ready {
            break;
        }
    }
    if !turn.ready {
        return Err(invalid(format!(
            "the conversation ended before the draft was ready (stage `{}`): {}",
            serde_json::to_value(turn.stage)
                .ok()
                .and_then(|stage| stage.as_str().map(str::to_string))
                .unwrap_or_default(),
            turn.reply
        )));
    }
    let envelope = serde_json::to_string_pretty(&turn.envelope.unwrap_or(Value::Null))
        .map_err(|error| failed(format!("the envelope does not serialise: {error}")))?;
    match options.out {
        Some(path) => {
            std::fs::write(&path, format!("{envelope}\n"))
                .map_err(|error| invalid(format!("cannot write {}: {error}", path.display())))?;
            eprintln!("baton: the envelope is in {}", path.display());
        }
        None if options.json => {}
        None => println!("{envelope}"),
    }
    Ok(Ended::Completed)
}

/// One turn of the builder, shown: its reply on stderr, or its whole
/// answer as a JSON line on stdout.
fn take_turn(
    registry: &baton_core::catalog::registry::Registry,
    request: &DraftRequest,
    check: &dyn baton_sandbox::EnvelopeCheck,
    json: bool,
) -> Result<DraftTurn, CommandError> {
    let turn = baton_sandbox::draft_turn(registry, request, check).map_err(invalid)?;
    if json {
        let line = serde_json::to_string(&turn)
            .map_err(|error| failed(format!("the turn does not serialise: {error}")))?;
        println!("{line}");
    } else {
        eprintln!("builder: {}", turn.reply);
        for problem in &turn.problems {
            eprintln!("  {problem}");
        }
        if let Some(picture) = turn.plan_mermaid.as_deref().filter(|_| !turn.ready) {
            eprintln!("{picture}");
        }
    }
    Ok(turn)
}

/// The next message on standard input: lines up to an empty one (or the
/// end); None at the end with nothing read.
fn read_paragraph(input: &mut impl BufRead) -> Result<Option<String>, CommandError> {
    let mut lines: Vec<String> = Vec::new();
    loop {
        let mut line = String::new();
        let read = input
            .read_line(&mut line)
            .map_err(|error| failed(format!("cannot read standard input: {error}")))?;
        let line = line.trim_end_matches(['\n', '\r']).to_string();
        if read == 0 || (line.trim().is_empty() && !lines.is_empty()) {
            break;
        }
        if !line.trim().is_empty() {
            lines.push(line);
        }
    }
    Ok((!lines.is_empty()).then(|| lines.join("\n")))
}
