//! The secret store of a process on a developer's machine (`baton serve`,
//! `baton run`): a reference's name (the SSM parameter's, the Secrets
//! Manager secret's, or a bare name) is looked up
//! 1. in the environment, as `BATON_SECRET_` followed by the name in
//!    capitals with every other character than a letter or digit as `_`
//!    (`{"ssm": "/team/search-key"}` is `BATON_SECRET__TEAM_SEARCH_KEY`);
//! 2. in `secrets.json` under the data directory: an object from names to
//!    strings, or to objects whose fields a reference's `key` picks.
//!
//! A Secrets Manager reference with a `key` takes that field of the JSON
//! object the value holds. The file is read at each call (the
//! [`CachedSecrets`](crate::ports::CachedSecrets) around this store keeps
//! values briefly); its errors name the file and the reference, never a
//! value.

use std::path::PathBuf;

use async_trait::async_trait;
use baton_core::basics::credentials::SecretReference;
use serde_json::Value;

use crate::ports::{EnvironmentLookup, SecretError, SecretStore, SecretValue};

/// The file under the data directory that holds local secrets.
pub const LOCAL_SECRETS_FILE: &str = "secrets.json";

/// Secrets from the environment, then `secrets.json`.
pub struct LocalSecrets {
    environment: EnvironmentLookup,
    file: Option<PathBuf>,
}

impl LocalSecrets {
    /// `file`: the data directory's `secrets.json` (none for an in-memory
    /// process).
    pub fn new(environment: EnvironmentLookup, file: Option<PathBuf>) -> Self {
        LocalSecrets { environment, file }
    }

    /// The environment variable that holds the secret named `name`.
    pub fn variable_for(name: &str) -> String {
        let mut variable = String::from("BATON_SECRET_");
        variable.extend(name.chars().map(|character| {
            if character.is_ascii_alphanumeric() {
                character.to_ascii_uppercase()
            } else {
                '_'
            }
        }));
        variable
    }

    fn read_file(&self, reference: &SecretReference, name: &str) -> Result<Value, SecretError> {
        let variable = Self::variable_for(name);
        let Some(file) = &self.file else {
            return Err(SecretError::new(
                reference,
                format!("not found: set {variable}"),
                false,
            ));
        };
        let not_found = || {
            SecretError::new(
                reference,
                format!("not found: set {variable} or add it to {}", file.display()),
                false,
            )
        };
        let text = match std::fs::read_to_string(file) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Err(not_found()),
            Err(error) => {
                return Err(SecretError::new(
                    reference,
                    format!("{} cannot be read: {error}", file.display()),
                    true,
                ));
            }
        };
        let document: Value = serde_json::from_str(&text).map_err(|error| {
            // serde_json's message names a line and column, never the text.
            SecretError::new(
                reference,
                format!("{} is not JSON: {error}", file.display()),
                false,
            )
        })?;
        document.get(name).cloned().ok_or_else(not_found)
    }
}

fn secret_of(value: Value, reference: &SecretReference) -> Result<SecretValue, SecretError> {
    let key = match reference {
        SecretReference::SecretsManager(secret) => secret.key.as_deref(),
        _ => None,
    };
    let chosen = match (key, value) {
        (None, Value::String(text)) => return Ok(SecretValue::new(text)),
        (None, _) => {
            return Err(SecretError::new(
                reference,
                "the value is not a string (name a `key` of it)",
                false,
            ));
        }
        (Some(key), Value::String(text)) => serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|object| object.get(key).cloned()),
        (Some(key), object) => object.get(key).cloned(),
    };
    match chosen {
        Some(Value::String(text)) => Ok(SecretValue::new(text)),
        Some(Value::Number(number)) => Ok(SecretValue::new(number.to_string())),
        _ => Err(SecretError::new(
            reference,
            "the secret holds no such key (its value is a JSON object with that field as a string)",
            false,
        )),
    }
}

/// The name a reference is looked up by.
pub fn reference_name(reference: &SecretReference) -> &str {
    match reference {
        SecretReference::Named(name) => name,
        SecretReference::Ssm(parameter) => &parameter.ssm,
        SecretReference::SecretsManager(secret) => &secret.secrets_manager,
    }
}

#[async_trait]
impl SecretStore for LocalSecrets {
    async fn reveal(&self, reference: &SecretReference) -> Result<SecretValue, SecretError> {
        let name = reference_name(reference);
        let value = match (self.environment)(&Self::variable_for(name)) {
            Some(text) => Value::String(text),
            None => self.read_file(reference, name)?,
        };
        secret_of(value, reference)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn reference(value: serde_json::Value) -> SecretReference {
        serde_json::from_value(value).unwrap()
    }

    #[tokio::test]
    async fn the_environment_then_the_file_answer_and_a_key_picks_a_field() {
        let directory = std::env::temp_dir().join(format!("baton-secrets-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let file = directory.join(LOCAL_SECRETS_FILE);
        std::fs::write(
            &file,
            r#"{"service-token": "from-file", "prod/search": {"apiKey": "field-value"}}"#,
        )
        .unwrap();
        let secrets = LocalSecrets::new(
            Arc::new(|name: &str| {
                (name == "BATON_SECRET__TEAM_SEARCH_KEY").then(|| "from-environment".to_string())
            }),
            Some(file.clone()),
        );
        let read = |value| {
            let secrets = &secrets;
            async move { secrets.reveal(&reference(value)).await }
        };
        assert_eq!(
            read(serde_json::json!({"ssm": "/team/search-key"}))
                .await
                .unwrap()
                .expose(),
            "from-environment"
        );
        assert_eq!(
            read(serde_json::json!("service-token"))
                .await
                .unwrap()
                .expose(),
            "from-file"
        );
        assert_eq!(
            read(serde_json::json!({"secretsManager": "prod/search", "key": "apiKey"}))
                .await
                .unwrap()
                .expose(),
            "field-value"
        );
        let missing = read(serde_json::json!({"ssm": "/absent"}))
            .await
            .unwrap_err();
        assert_eq!(
            missing.reason,
            format!(
                "not found: set BATON_SECRET__ABSENT or add it to {}",
                file.display()
            )
        );
        let whole_object = read(serde_json::json!({"secretsManager": "prod/search"}))
            .await
            .unwrap_err();
        assert!(!whole_object.to_string().contains("field-value"));
        std::fs::remove_dir_all(directory).unwrap();
    }
}
