//! Credentials named by reference, never written down: a header of an HTTP
//! tool, of an MCP server or of a remote agent takes its value from a
//! literal, a named environment variable, or a secret the deployment keeps
//! ([`SecretReference`]): an SSM parameter (`{"ssm": NAME}`), a Secrets
//! Manager secret (`{"secretsManager": ARN or name, "key": …}`), or a bare
//! name in the process's local secret store (`baton serve`: the
//! environment or a file under the data directory).
//!
//! Invariant: a reference displays its names only; the value it stands for
//! exists only in the call that uses it.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a header's value comes from. Secret values never appear in the
/// registry: they are read from the environment or the secret store when
/// the call is made, and never written to frames or logs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged, deny_unknown_fields)]
pub enum HeaderValueSource {
    Literal(String),
    /// `{"env": "VARIABLE"}`, optionally with a `prefix` (e.g. `Bearer `).
    Environment {
        env: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prefix: Option<String>,
    },
    /// `{"secret": reference}`: an SSM parameter, a Secrets Manager secret
    /// or a name in the local secret store, optionally with a `prefix`.
    Secret {
        secret: SecretReference,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prefix: Option<String>,
    },
}

/// Headers whose values come from [`HeaderValueSource`]s.
pub type HeaderSources = BTreeMap<String, HeaderValueSource>;

/// A secret the deployment keeps, named, never quoted.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum SecretReference {
    /// A name in the process's local secret store (`baton serve`: the
    /// variable `BATON_SECRET_<NAME>` or `secrets.json` under the data
    /// directory); on AWS, the Secrets Manager secret of that name.
    Named(String),
    Ssm(SsmParameter),
    SecretsManager(SecretsManagerSecret),
}

/// `{"ssm": "/path/name"}`: an SSM Parameter Store parameter, read with
/// decryption (a `SecureString` is decrypted by the function's role).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SsmParameter {
    pub ssm: String,
}

/// `{"secretsManager": "arn or name", "key": "field"}`: a Secrets Manager
/// secret's string, or with `key` one field of the JSON object it holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretsManagerSecret {
    pub secrets_manager: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// Header names whose values are credentials: never literal in the registry.
const SECRET_HEADERS: [&str; 5] = [
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "api-key",
    "cookie",
];

/// Checks `headers` (at JSON path `path`): a credential header is never a
/// literal, and every secret reference names something.
pub fn check_header_sources(headers: &HeaderSources, path: &str) -> Result<(), (String, String)> {
    for (name, source) in headers {
        let at = format!("{path}.{name}");
        match source {
            HeaderValueSource::Literal(_)
                if SECRET_HEADERS.contains(&name.to_ascii_lowercase().as_str()) =>
            {
                return Err((
                    at,
                    "a credential is never written in the registry: use {\"env\": …} or {\"secret\": …}"
                        .into(),
                ));
            }
            HeaderValueSource::Secret { secret, .. } => {
                if let Some(problem) = secret.problem() {
                    return Err((format!("{at}.secret"), problem.into()));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

impl SecretReference {
    /// The reference's problem, when it names nothing.
    pub fn problem(&self) -> Option<&'static str> {
        let empty = match self {
            SecretReference::Named(name) => name.trim().is_empty(),
            SecretReference::Ssm(parameter) => parameter.ssm.trim().is_empty(),
            SecretReference::SecretsManager(secret) => {
                secret.secrets_manager.trim().is_empty()
                    || secret.key.as_deref().is_some_and(|key| key.is_empty())
            }
        };
        empty.then_some("a secret reference names a parameter, a secret or a key: it is empty")
    }
}

impl fmt::Display for SecretReference {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretReference::Named(name) => write!(formatter, "secret `{name}`"),
            SecretReference::Ssm(parameter) => {
                write!(formatter, "SSM parameter `{}`", parameter.ssm)
            }
            SecretReference::SecretsManager(secret) => {
                write!(
                    formatter,
                    "Secrets Manager secret `{}`",
                    secret.secrets_manager
                )?;
                match &secret.key {
                    Some(key) => write!(formatter, " (key `{key}`)"),
                    None => Ok(()),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_three_references_parse_and_display_their_names_only() {
        let named: HeaderValueSource =
            serde_json::from_value(json!({"secret": "service-token", "prefix": "Bearer "}))
                .unwrap();
        let ssm: HeaderValueSource =
            serde_json::from_value(json!({"secret": {"ssm": "/baton/token"}})).unwrap();
        let manager: HeaderValueSource = serde_json::from_value(
            json!({"secret": {"secretsManager": "arn:aws:secretsmanager:us-east-1:1:secret:s", "key": "token"}}),
        )
        .unwrap();
        let references: Vec<String> = [named, ssm, manager]
            .into_iter()
            .map(|source| match source {
                HeaderValueSource::Secret { secret, .. } => secret.to_string(),
                other => panic!("not a secret: {other:?}"),
            })
            .collect();
        assert_eq!(
            references,
            [
                "secret `service-token`",
                "SSM parameter `/baton/token`",
                "Secrets Manager secret `arn:aws:secretsmanager:us-east-1:1:secret:s` (key `token`)",
            ]
        );
    }

    #[test]
    fn an_unknown_reference_shape_is_refused() {
        let refused =
            serde_json::from_value::<HeaderValueSource>(json!({"secret": {"vault": "x"}}));
        assert!(refused.is_err());
        let empty: SecretReference = serde_json::from_value(json!({"ssm": " "})).unwrap();
        assert!(empty.problem().is_some());
    }
}
