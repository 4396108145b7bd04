//! Where a process reads secrets by reference (`{"secret": …}` headers of
//! tools, MCP servers and remote agents): SSM and Secrets Manager with the
//! process's AWS credentials, or the local store (`BATON_SECRET_<NAME>`
//! variables, `secrets.json` under the data directory), chosen by
//! `BATON_SECRETS` or the process's default, and kept briefly
//! (`BATON_SECRET_CACHE_SECONDS`).

use std::sync::Arc;

use baton_runtime::memory::{LOCAL_SECRETS_FILE, LocalSecrets};
use baton_runtime::ports::{CachedSecrets, SecretStore};

use crate::Configuration;
use crate::config::SecretSourceChoice;

/// The secret store of a process whose own default is `default` (`Aws` on
/// DynamoDB, `Local` on the embedded stores); `BATON_SECRETS` overrides it.
pub async fn secret_store(
    configuration: &Configuration,
    default: SecretSourceChoice,
) -> Arc<dyn SecretStore> {
    let keep_for = configuration.secrets.cache;
    match configuration.secrets.source.unwrap_or(default) {
        SecretSourceChoice::Aws => {
            let connection = baton_aws::AwsConnection::from_environment().await;
            Arc::new(CachedSecrets::new(
                baton_aws::AwsSecrets::new(&connection),
                keep_for,
            ))
        }
        SecretSourceChoice::Local => Arc::new(CachedSecrets::new(
            LocalSecrets::new(
                Arc::new(crate::config::process_environment),
                configuration
                    .data_home
                    .as_ref()
                    .map(|home| home.join("baton").join(LOCAL_SECRETS_FILE)),
            ),
            keep_for,
        )),
    }
}
