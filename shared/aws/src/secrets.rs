//! Secrets by reference read with the function's role (feature `secrets`):
//! `{"ssm": NAME}` is SSM's `GetParameter` with decryption,
//! `{"secretsManager": ID, "key": …}` and a bare name are Secrets Manager's
//! `GetSecretValue` (with `key`, one field of the JSON object the secret
//! holds).
//!
//! The two calls are signed with SigV4 (`aws-sigv4`, the SDK's own signer)
//! and sent as their JSON 1.1 protocol requests. The SDK's service crates
//! would do the same, but each adds its generated client to the step
//! function, which has little room left under the 20 MiB budget
//! (`infra/check-deploy.sh`); these two requests and their answers are a
//! few fields each.
//!
//! Invariants: an error names the reference, the service's error type and
//! its HTTP status, never a response body that could hold a value; a value
//! is returned as a `SecretValue` and never logged; throttling, a 5xx or a
//! broken connection is retryable, anything else (no such secret, no
//! permission, no such key) is not.

use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use aws_credential_types::provider::ProvideCredentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use baton_core::basics::credentials::SecretReference;
use baton_runtime::ports::{SecretError, SecretStore, SecretValue};
use serde_json::{Value, json};

use crate::AwsConnection;

/// How long one read may take.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// SSM and Secrets Manager, with the connection's endpoint, region and
/// credentials.
pub struct AwsSecrets {
    connection: AwsConnection,
    client: reqwest::Client,
}

impl AwsSecrets {
    pub fn new(connection: &AwsConnection) -> Self {
        AwsSecrets {
            connection: connection.clone(),
            client: reqwest::Client::builder()
                .timeout(READ_TIMEOUT)
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap_or_default(),
        }
    }

    /// One JSON 1.1 call of `service` (`ssm`, `secretsmanager`), signed.
    async fn call(
        &self,
        reference: &SecretReference,
        service: &str,
        target: &str,
        body: Value,
    ) -> Result<Value, SecretError> {
        let configuration = self.connection.configuration();
        let region = configuration
            .region()
            .map(|region| region.to_string())
            .ok_or_else(|| SecretError::new(reference, "no AWS region is configured", false))?;
        let endpoint = match configuration.endpoint_url() {
            Some(url) => url.trim_end_matches('/').to_string(),
            None => format!("https://{service}.{region}.amazonaws.com"),
        };
        let credentials = configuration
            .credentials_provider()
            .ok_or_else(|| SecretError::new(reference, "no AWS credentials are configured", false))?
            .provide_credentials()
            .await
            .map_err(|error| {
                SecretError::new(reference, format!("AWS credentials: {error}"), true)
            })?;
        let identity = credentials.into();
        let body = body.to_string();
        let url = format!("{endpoint}/");
        let host = reqwest::Url::parse(&url)
            .ok()
            .and_then(|parsed| {
                parsed.host_str().map(|host| match parsed.port() {
                    Some(port) => format!("{host}:{port}"),
                    None => host.to_string(),
                })
            })
            .ok_or_else(|| {
                SecretError::new(reference, format!("`{endpoint}` is not a URL"), false)
            })?;
        let headers = [
            ("host", host.as_str()),
            ("content-type", "application/x-amz-json-1.1"),
            ("x-amz-target", target),
        ];
        let signing_parameters = v4::SigningParams::builder()
            .identity(&identity)
            .region(&region)
            .name(service)
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|error| SecretError::new(reference, format!("signing: {error}"), false))?
            .into();
        let signable = SignableRequest::new(
            "POST",
            url.as_str(),
            headers.iter().copied(),
            SignableBody::Bytes(body.as_bytes()),
        )
        .map_err(|error| SecretError::new(reference, format!("signing: {error}"), false))?;
        let (instructions, _signature) = sign(signable, &signing_parameters)
            .map_err(|error| SecretError::new(reference, format!("signing: {error}"), false))?
            .into_parts();
        let mut request = self.client.post(&url).body(body);
        for (name, value) in headers.iter().copied().chain(instructions.headers()) {
            if name != "host" {
                request = request.header(name, value);
            }
        }
        let response = request.send().await.map_err(|error| {
            SecretError::new(
                reference,
                format!("{service} could not be reached: {error}"),
                true,
            )
        })?;
        let status = response.status();
        let answer: Value = response.json().await.unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(answer);
        }
        // `__type` is `namespace#ErrorName` (or the bare name); the message
        // is not quoted: it is the service's, and could repeat the request.
        let error_type = answer["__type"]
            .as_str()
            .map(|kind| kind.rsplit('#').next().unwrap_or(kind).to_string())
            .unwrap_or_else(|| "an error".to_string());
        let retryable = status.is_server_error()
            || status.as_u16() == 429
            || error_type.contains("Throttl")
            || error_type == "InternalServerError";
        Err(SecretError::new(
            reference,
            format!("{service} answered HTTP {} ({error_type})", status.as_u16()),
            retryable,
        ))
    }

    async fn parameter(
        &self,
        reference: &SecretReference,
        name: &str,
    ) -> Result<String, SecretError> {
        let answer = self
            .call(
                reference,
                "ssm",
                "AmazonSSM.GetParameter",
                json!({"Name": name, "WithDecryption": true}),
            )
            .await?;
        answer["Parameter"]["Value"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| SecretError::new(reference, "SSM answered without a value", false))
    }

    async fn secret_string(
        &self,
        reference: &SecretReference,
        id: &str,
    ) -> Result<String, SecretError> {
        let answer = self
            .call(
                reference,
                "secretsmanager",
                "secretsmanager.GetSecretValue",
                json!({"SecretId": id}),
            )
            .await?;
        answer["SecretString"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| {
                SecretError::new(
                    reference,
                    "the secret holds no string (a binary secret cannot be a header)",
                    false,
                )
            })
    }
}

/// The field `key` of the JSON object `text` holds.
fn field_of(reference: &SecretReference, text: &str, key: &str) -> Result<String, SecretError> {
    let field = serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|object| object.get(key).cloned());
    match field {
        Some(Value::String(value)) => Ok(value),
        Some(Value::Number(number)) => Ok(number.to_string()),
        _ => Err(SecretError::new(
            reference,
            "the secret holds no such key (its value is a JSON object with that field as a string)",
            false,
        )),
    }
}

#[async_trait]
impl SecretStore for AwsSecrets {
    async fn reveal(&self, reference: &SecretReference) -> Result<SecretValue, SecretError> {
        let value = match reference {
            SecretReference::Ssm(parameter) => self.parameter(reference, &parameter.ssm).await?,
            SecretReference::Named(name) => self.secret_string(reference, name).await?,
            SecretReference::SecretsManager(secret) => {
                let text = self
                    .secret_string(reference, &secret.secrets_manager)
                    .await?;
                match &secret.key {
                    Some(key) => field_of(reference, &text, key)?,
                    None => text,
                }
            }
        };
        Ok(SecretValue::new(value))
    }
}
