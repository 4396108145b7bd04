//! Which keys hold secrets, and their values replaced. Applied wherever a
//! value leaves the server (`GET /runs/{id}`) and to the envelope's context
//! before any model call: a caller's `apiKey` never reaches a model, a log
//! or a client.

use serde_json::{Map, Value};

/// What a secret value is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Words that make a key secret wherever they appear in its name (compared
/// without case, `_` or `-`): `crmCredentials`, `clientSecret`, `x-api-key`.
const SECRET_KEY_WORDS: &[&str] = &[
    "secret",
    "password",
    "passwd",
    "passphrase",
    "apikey",
    "credential",
    "authorization",
    "privatekey",
    "cookie",
];

/// Whether `key` names a secret: it contains one of [`SECRET_KEY_WORDS`], or
/// it names a token (`token`, `accessToken`, `refresh_token`: ends in
/// `token`). Token *counts* stay visible: `promptTokens` and `maxTokens`
/// end in `tokens`, `tokenizer` does not end in `token`.
pub fn is_secret_key(key: &str) -> bool {
    let normalized: String = key
        .chars()
        .filter(|character| *character != '_' && *character != '-')
        .flat_map(char::to_lowercase)
        .collect();
    normalized.ends_with("token")
        || SECRET_KEY_WORDS
            .iter()
            .any(|word| normalized.contains(word))
}

/// Replaces the values of secret keys anywhere in `value`.
pub fn redact(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, inner)| {
                    let shown = if is_secret_key(key) {
                        Value::String(REDACTED.into())
                    } else {
                        redact(inner)
                    };
                    (key.clone(), shown)
                })
                .collect::<Map<String, Value>>(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(redact).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_hidden_and_usage_is_not() {
        let shown = redact(&json!({
            "apiKey": "sk-1", "api_key": "sk-2", "Authorization": "Bearer x", "password": "p",
            "nested": [{"client-secret": "s", "accessToken": "t"}],
            "usage": {"promptTokens": 12, "completionTokens": 3},
            "maxTokens": 500, "tokenizer": "bpe"
        }));
        for pointer in [
            "/apiKey",
            "/api_key",
            "/Authorization",
            "/password",
            "/nested/0/client-secret",
            "/nested/0/accessToken",
        ] {
            assert_eq!(
                shown.pointer(pointer),
                Some(&json!("[redacted]")),
                "{pointer}"
            );
        }
        assert_eq!(shown["usage"]["promptTokens"], 12);
        assert_eq!(shown["maxTokens"], 500);
        assert_eq!(shown["tokenizer"], "bpe");
    }
}
