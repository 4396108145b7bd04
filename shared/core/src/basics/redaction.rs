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

/// `text` with every occurrence of a known secret value replaced by
/// [`REDACTED`] (values shorter than 4 characters are left: they would
/// match ordinary text).
pub fn scrub_text(text: &str, secret_values: &[&str]) -> String {
    let mut scrubbed = text.to_string();
    for value in secret_values.iter().filter(|value| value.len() >= 4) {
        if scrubbed.contains(*value) {
            scrubbed = scrubbed.replace(*value, REDACTED);
        }
    }
    scrubbed
}

/// Replaces every occurrence of a known secret value in `value`'s strings
/// and keys (a tool that echoes the credential it was sent gives back
/// `[redacted]`, never the credential).
pub fn scrub_values(value: &mut Value, secret_values: &[&str]) {
    if secret_values.is_empty() {
        return;
    }
    match value {
        Value::String(text) => *text = scrub_text(text, secret_values),
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| scrub_values(item, secret_values)),
        Value::Object(fields) => {
            let taken = std::mem::take(fields);
            for (key, mut field) in taken {
                scrub_values(&mut field, secret_values);
                fields.insert(scrub_text(&key, secret_values), field);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_secret_values_are_scrubbed_from_strings_and_keys() {
        let mut echoed = serde_json::json!({
            "headers": {"authorization": "Bearer s3cr3t-value"},
            "s3cr3t-value": ["x s3cr3t-value y", 7],
        });
        scrub_values(&mut echoed, &["s3cr3t-value"]);
        assert_eq!(
            echoed,
            serde_json::json!({
                "headers": {"authorization": "Bearer [redacted]"},
                "[redacted]": ["x [redacted] y", 7],
            })
        );
    }
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
