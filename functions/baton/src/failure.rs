//! How a command ends, and the one place that turns its end into an exit
//! code and, for an error, one message on stderr.
//!
//! Exit codes: 0 completed (a run's output is contract-valid); 1 an
//! evaluation regressed or missed its threshold; 2 invalid input or
//! configuration (the message names the file, JSON path or variable); 3 the
//! run failed, its plan was rejected, or the command could not finish; 4
//! the run is parked for a person.

use std::fmt;

/// How a command that did its work ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Done: the run completed, the listing printed, the check passed.
    Completed,
    /// An evaluation missed its pass-rate threshold or regressed.
    Regression,
    /// The run failed, its plan was rejected, or a check found a fault.
    RunFailed,
    /// The run waits for a person (a task, an approval, an answer).
    AwaitingPerson,
}

/// Why a command could not do its work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandError {
    /// Invalid input or configuration; the message names what is wrong.
    Invalid(String),
    /// The command started but could not finish (the async runtime, a
    /// crashed worker, a run the queue left unsettled).
    Failed(String),
}

impl fmt::Display for CommandError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Invalid(message) | Self::Failed(message) => formatter.write_str(message),
        }
    }
}

/// What every command returns.
pub type Outcome = Result<Ended, CommandError>;

/// An invalid input or configuration, named by `message`.
pub fn invalid(message: impl fmt::Display) -> CommandError {
    CommandError::Invalid(message.to_string())
}

/// A command that could not finish, for the reason in `message`.
pub fn failed(message: impl fmt::Display) -> CommandError {
    CommandError::Failed(message.to_string())
}

/// The exit code of `outcome`; an error is printed here, once, as
/// `baton: MESSAGE`.
pub fn exit_code(outcome: Outcome) -> u8 {
    match outcome {
        Ok(Ended::Completed) => 0,
        Ok(Ended::Regression) => 1,
        Ok(Ended::RunFailed) => 3,
        Ok(Ended::AwaitingPerson) => 4,
        Err(error) => {
            eprintln!("baton: {error}");
            match error {
                CommandError::Invalid(_) => 2,
                CommandError::Failed(_) => 3,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_end_has_its_documented_exit_code() {
        let cases = [
            (Ok(Ended::Completed), 0),
            (Ok(Ended::Regression), 1),
            (Err(invalid("envelope.json: $.objective: missing")), 2),
            (Ok(Ended::RunFailed), 3),
            (Err(failed("the worker crashed")), 3),
            (Ok(Ended::AwaitingPerson), 4),
        ];
        for (outcome, code) in cases {
            assert_eq!(exit_code(outcome.clone()), code, "{outcome:?}");
        }
    }
}
