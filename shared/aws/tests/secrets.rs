//! Secrets by reference read from SSM and Secrets Manager on moto, through
//! `AwsSecrets`' own SigV4-signed requests: a `SecureString` parameter, a
//! secret by ARN with a `key`, a secret by bare name; a missing parameter,
//! a missing key and an unknown secret each fail naming the reference and
//! the service's error, never a value, and are not retryable. The secrets
//! are created the way an operator would (`moto_server::put_secret`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use baton_aws::{AwsConnection, AwsSecrets};
use baton_core::basics::credentials::SecretReference;
use baton_runtime::ports::SecretStore;
use moto_server::{MotoServer, put_secret, put_secure_parameter, unique_name};
use serde_json::json;

fn reference(value: serde_json::Value) -> SecretReference {
    serde_json::from_value(value).unwrap()
}

#[tokio::test]
async fn parameters_and_secrets_are_read_by_reference_and_failures_name_only_the_reference() {
    let moto = MotoServer::start().unwrap();
    let parameter = format!("/{}/token", unique_name("baton-test"));
    put_secure_parameter(&moto.endpoint, &parameter, "parameter-value-1")
        .await
        .unwrap();
    let secret_name = unique_name("baton-test/service");
    let arn = put_secret(
        &moto.endpoint,
        &secret_name,
        r#"{"token": "secret-value-2", "user": "svc"}"#,
    )
    .await
    .unwrap();
    let plain_name = unique_name("baton-test-plain");
    put_secret(&moto.endpoint, &plain_name, "plain-value-3")
        .await
        .unwrap();
    let secrets = AwsSecrets::new(&AwsConnection::to_emulator(&moto.endpoint).await);

    let read = |value| {
        let secrets = &secrets;
        async move { secrets.reveal(&reference(value)).await }
    };
    assert_eq!(
        read(json!({"ssm": parameter})).await.unwrap().expose(),
        "parameter-value-1"
    );
    assert_eq!(
        read(json!({"secretsManager": arn, "key": "token"}))
            .await
            .unwrap()
            .expose(),
        "secret-value-2"
    );
    assert_eq!(
        read(json!(plain_name)).await.unwrap().expose(),
        "plain-value-3"
    );
    assert_eq!(
        read(json!({"secretsManager": plain_name}))
            .await
            .unwrap()
            .expose(),
        "plain-value-3"
    );

    let missing_parameter = read(json!({"ssm": "/baton-test/absent"}))
        .await
        .unwrap_err();
    assert_eq!(
        missing_parameter.to_string(),
        "SSM parameter `/baton-test/absent`: ssm answered HTTP 400 (ParameterNotFound)"
    );
    assert!(!missing_parameter.retryable);
    let missing_key = read(json!({"secretsManager": arn, "key": "password"}))
        .await
        .unwrap_err();
    assert!(missing_key.reason.contains("no such key"), "{missing_key}");
    assert!(!missing_key.to_string().contains("secret-value-2"));
    let unknown = read(json!({"secretsManager": "baton-test/never-created"}))
        .await
        .unwrap_err();
    assert!(
        unknown.reason.contains("ResourceNotFoundException"),
        "{unknown}"
    );
    assert!(!unknown.retryable);
}

#[tokio::test]
async fn an_unreachable_service_is_a_retryable_failure() {
    // A port nothing listens on: the read fails as a transport error.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let secrets =
        AwsSecrets::new(&AwsConnection::to_emulator(&format!("http://127.0.0.1:{port}")).await);
    let error = secrets
        .reveal(&reference(json!({"ssm": "/any"})))
        .await
        .unwrap_err();
    assert!(error.retryable, "{error}");
    assert!(error.reason.contains("could not be reached"), "{error}");
}
