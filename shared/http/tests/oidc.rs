//! Sign-in with an identity provider, over real sockets: a JWKS served in
//! the test (an axum server standing in for the issuer, counting its
//! fetches), the API served by axum, reqwest as the client. Keys are made
//! here with aws-lc-rs and tokens signed with `jsonwebtoken`.
//!
//! A token from the issuer is accepted and carries its user, groups and
//! scopes; the same token with the wrong audience, expired, `alg: none`,
//! signed by another key, or HMAC-signed with the public key is a 401
//! naming why. The JWKS is fetched once for many requests, not again for
//! an unknown `kid` within the refresh floor, and again after it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use axum::routing::get;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use baton_http::auth::oidc::{OidcSettings, OidcVerifier, REFRESH_FLOOR};
use baton_http::{HttpSettings, TokenAuthenticator};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

const ISSUER: &str = "https://id.acme.example";
const AUDIENCE: &str = "baton-api";

/// An EC P-256 signing key and its public JWK.
struct SigningKey {
    kid: String,
    pkcs8: Vec<u8>,
    public_point: Vec<u8>,
}

impl SigningKey {
    fn generate(kid: &str) -> Self {
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
                .unwrap();
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap();
        SigningKey {
            kid: kid.to_string(),
            pkcs8: pkcs8.as_ref().to_vec(),
            public_point: pair.public_key().as_ref().to_vec(),
        }
    }

    fn jwk(&self) -> Value {
        // Uncompressed point: 0x04 || x (32 bytes) || y (32 bytes).
        json!({
            "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": self.kid,
            "x": URL_SAFE_NO_PAD.encode(&self.public_point[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&self.public_point[33..65]),
        })
    }

    fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &EncodingKey::from_ec_der(&self.pkcs8)).unwrap()
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn claims() -> Value {
    json!({
        "iss": ISSUER, "aud": AUDIENCE, "sub": "ana@acme.example", "tenant": "acme",
        "groups": ["directors"], "scope": "openid runs:read runs:write",
        "iat": now(), "exp": now() + 600,
    })
}

/// The issuer's JWKS endpoint: serves `keys`, counts fetches.
struct Issuer {
    jwks_url: String,
    keys: Arc<std::sync::Mutex<Vec<Value>>>,
    fetches: Arc<AtomicUsize>,
}

async fn start_issuer(keys: Vec<Value>) -> Issuer {
    let keys = Arc::new(std::sync::Mutex::new(keys));
    let fetches = Arc::new(AtomicUsize::new(0));
    let app = {
        let keys = keys.clone();
        let fetches = fetches.clone();
        axum::Router::new().route(
            "/jwks.json",
            get(move || {
                let keys = keys.clone();
                let fetches = fetches.clone();
                async move {
                    fetches.fetch_add(1, Ordering::SeqCst);
                    axum::Json(json!({"keys": *keys.lock().unwrap()}))
                }
            }),
        )
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let jwks_url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Issuer {
        jwks_url,
        keys,
        fetches,
    }
}

/// The API with the issuer's JWTs accepted; its base URL.
async fn start_api(issuer: &Issuer) -> String {
    let settings = OidcSettings {
        jwks_url: Some(issuer.jwks_url.clone()),
        // The test's JWKS is on 127.0.0.1 over http: allow-listed, as a
        // deployment would allow a local issuer.
        http_allowed_hosts: "127.0.0.1".into(),
        ..OidcSettings::new(ISSUER, AUDIENCE)
    };
    let authenticator = TokenAuthenticator::from_configuration("")
        .unwrap()
        .with_oidc(OidcVerifier::new(settings));
    let app = support::api_without_a_model(authenticator, HttpSettings::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/api/v1/flex", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

async fn list_runs(base: &str, token: &str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .get(format!("{base}/runs"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

fn refused_because(answer: &(u16, Value), reason: &str) {
    assert_eq!(answer.0, 401, "{}", answer.1);
    assert_eq!(answer.1["error"]["code"], "unauthorized", "{}", answer.1);
    assert_eq!(
        answer.1["error"]["details"]["reason"], reason,
        "{}",
        answer.1
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_issuers_tokens_are_accepted_and_forgeries_refused() {
    let key = SigningKey::generate("key-1");
    let issuer = start_issuer(vec![key.jwk()]).await;
    let base = start_api(&issuer).await;

    // Accepted: the user and scopes come from the token.
    let token = key.sign(&claims());
    let (status, body) = list_runs(&base, &token).await;
    assert_eq!(status, 200, "{body}");
    let created = reqwest::Client::new()
        .post(format!("{base}/runs"))
        .bearer_auth(&token)
        .header("X-Baton-User", "someone-else@acme.example")
        .json(&baton_test_support::plain_example_envelope(
            "positioning-recommendation.json",
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 202);
    let run_id = created.json::<Value>().await.unwrap()["runId"]
        .as_str()
        .unwrap()
        .to_string();
    let snapshot: Value = reqwest::Client::new()
        .get(format!("{base}/runs/{run_id}"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        snapshot["run"]["submittedBy"], "ana@acme.example",
        "the user comes from the token, not from X-Baton-User: {snapshot}"
    );
    // The token holds runs:read and runs:write, not approvals:decide.
    let resolve = reqwest::Client::new()
        .post(format!("{base}/hitl/resolve"))
        .bearer_auth(&token)
        .json(&json!({"runId": run_id, "requestId": "r", "decision": "approve"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resolve.status(), 403);
    let refused: Value = resolve.json().await.unwrap();
    assert_eq!(refused["error"]["details"]["scope"], "approvals:decide");

    // The wrong audience.
    let mut other_audience = claims();
    other_audience["aud"] = json!("another-api");
    refused_because(
        &list_runs(&base, &key.sign(&other_audience)).await,
        "wrong_audience",
    );
    // Another issuer.
    let mut other_issuer = claims();
    other_issuer["iss"] = json!("https://id.elsewhere.example");
    refused_because(
        &list_runs(&base, &key.sign(&other_issuer)).await,
        "wrong_issuer",
    );
    // Expired beyond the 60 s leeway.
    let mut expired = claims();
    expired["exp"] = json!(now() - 3600);
    refused_because(&list_runs(&base, &key.sign(&expired)).await, "expired");
    // Not yet valid.
    let mut early = claims();
    early["nbf"] = json!(now() + 3600);
    refused_because(&list_runs(&base, &key.sign(&early)).await, "not_yet_valid");
    // `alg: none`, no signature.
    let unsigned = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(json!({"alg": "none", "typ": "JWT", "kid": "key-1"}).to_string()),
        URL_SAFE_NO_PAD.encode(claims().to_string())
    );
    let answer = list_runs(&base, &unsigned).await;
    assert_eq!(answer.0, 401, "{}", answer.1);
    assert_eq!(answer.1["error"]["details"]["reason"], "algorithm_refused");
    // Signed by another key under the same key id.
    let forger = SigningKey::generate("key-1");
    refused_because(
        &list_runs(&base, &forger.sign(&claims())).await,
        "bad_signature",
    );
    // HMAC with the public key as the secret (the algorithm-confusion attack).
    let mut hmac_header = Header::new(Algorithm::HS256);
    hmac_header.kid = Some("key-1".into());
    let confused = jsonwebtoken::encode(
        &hmac_header,
        &claims(),
        &EncodingKey::from_secret(key.jwk().to_string().as_bytes()),
    )
    .unwrap();
    refused_because(&list_runs(&base, &confused).await, "algorithm_refused");
    // No tenant claim and no fixed tenant.
    let mut tenantless = claims();
    tenantless.as_object_mut().unwrap().remove("tenant");
    refused_because(
        &list_runs(&base, &key.sign(&tenantless)).await,
        "missing_claim",
    );
    // Not a JWT and not a static token.
    refused_because(&list_runs(&base, "not-a-token").await, "unknown_token");

    // All of that read the JWKS once: an unknown kid was never asked for.
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rotated_key_is_fetched_on_its_first_use_after_the_refresh_floor() {
    let old_key = SigningKey::generate("2026-old");
    let issuer = start_issuer(vec![old_key.jwk()]).await;
    let base = start_api(&issuer).await;
    assert_eq!(list_runs(&base, &old_key.sign(&claims())).await.0, 200);
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), 1);

    // The issuer rotates: a new key is published.
    let new_key = SigningKey::generate("2026-new");
    issuer.keys.lock().unwrap().push(new_key.jwk());
    // Within the refresh floor the unknown kid does not fetch again (a flood
    // of made-up kids cannot make Baton hammer the issuer).
    refused_because(
        &list_runs(&base, &new_key.sign(&claims())).await,
        "unknown_key",
    );
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), 1);
    // After it, the first token under the new kid fetches the keys again.
    tokio::time::sleep(REFRESH_FLOOR + Duration::from_millis(500)).await;
    let (status, body) = list_runs(&base, &new_key.sign(&claims())).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), 2);
    // Both keys verify now, with no further fetch.
    assert_eq!(list_runs(&base, &old_key.sign(&claims())).await.0, 200);
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), 2);
}
