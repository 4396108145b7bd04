//! The one error enum of `baton-core`.

use thiserror::Error;

/// Everything that can go wrong inside the core. None of these is retryable:
/// the core is deterministic, so the same input fails the same way again.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum CoreError {
    /// The caller's task envelope is malformed; `path` names the offending JSON path.
    #[error("invalid envelope at {path}: {message}")]
    InvalidEnvelope { path: String, message: String },
    /// A registry document (facet or capability) is malformed.
    #[error("invalid registry document {source_name} at {path}: {message}")]
    InvalidRegistry {
        source_name: String,
        path: String,
        message: String,
    },
    /// A JSON Schema failed to compile.
    #[error("schema does not compile at {path}: {message}")]
    SchemaDoesNotCompile { path: String, message: String },
    /// A step referred to something the run does not have (a stale or corrupt message).
    #[error("step does not apply to this run: {0}")]
    StepDoesNotApply(String),
}

impl CoreError {
    /// Core errors are deterministic: retrying the same input cannot succeed.
    pub fn is_retryable(&self) -> bool {
        false
    }

    /// The JSON path (or registry path) the error names, when it names one.
    pub fn path(&self) -> Option<&str> {
        match self {
            CoreError::InvalidEnvelope { path, .. }
            | CoreError::InvalidRegistry { path, .. }
            | CoreError::SchemaDoesNotCompile { path, .. } => Some(path),
            CoreError::StepDoesNotApply(_) => None,
        }
    }
}

/// `error` with its causes, `outer: inner: innermost` (a cause already in
/// the text is not repeated): "error sending request" alone hides the
/// "connection refused" underneath.
pub fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Why something asked of the engine is refused, in words its reader acts
/// on: a model reads it as its tool call's result, a person as a node's or a
/// message's failure. Not a fault of Baton's: the asker can change what it
/// asked, so it is never retried as is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

impl From<String> for Refusal {
    fn from(reason: String) -> Self {
        Refusal(reason)
    }
}

impl From<&str> for Refusal {
    fn from(reason: &str) -> Self {
        Refusal(reason.to_string())
    }
}

impl From<Refusal> for String {
    fn from(refusal: Refusal) -> Self {
        refusal.0
    }
}
