//! The variables of secrets by reference: where `{"secret": …}` headers
//! are read (`BATON_SECRETS`) and how long a value is kept
//! (`BATON_SECRET_CACHE_SECONDS`). The local store's own variables
//! (`BATON_SECRET_<NAME>`) are read when a call needs one, through the
//! process environment (`baton_runtime::memory::LocalSecrets`).

use std::time::Duration;

use super::{VariableReader, non_empty, positive_whole_number};
use crate::StartupError;

/// Where referenced secrets are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretSourceChoice {
    /// SSM Parameter Store and Secrets Manager, with the process's AWS
    /// credentials (the Lambda functions' role).
    Aws,
    /// `BATON_SECRET_<NAME>` variables and `secrets.json` under the data
    /// directory.
    Local,
}

/// `BATON_SECRETS` and `BATON_SECRET_CACHE_SECONDS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretsConfiguration {
    /// `BATON_SECRETS`: `aws` or `local`; unset, the store's own (`aws` on
    /// DynamoDB, `local` on the embedded stores).
    pub source: Option<SecretSourceChoice>,
    /// `BATON_SECRET_CACHE_SECONDS` (default 300): how long a read value is
    /// kept before it is read again.
    pub cache: Duration,
}

impl SecretsConfiguration {
    pub(super) fn from_variables(read: VariableReader<'_>) -> Result<Self, StartupError> {
        let source = match non_empty(read, "BATON_SECRETS").as_deref() {
            None => None,
            Some("aws") => Some(SecretSourceChoice::Aws),
            Some("local") => Some(SecretSourceChoice::Local),
            Some(other) => {
                return Err(StartupError(format!(
                    "BATON_SECRETS is `{other}`: `aws` (SSM and Secrets Manager) or `local` (BATON_SECRET_* variables and secrets.json under the data directory)"
                )));
            }
        };
        let cache = Duration::from_secs(positive_whole_number(
            read,
            "BATON_SECRET_CACHE_SECONDS",
            baton_runtime::ports::SECRET_CACHE_TIME.as_secs() as usize,
        )? as u64);
        Ok(SecretsConfiguration { source, cache })
    }
}
