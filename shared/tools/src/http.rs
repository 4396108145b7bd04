//! The `http` executor.

use std::time::Duration;

use baton_core::catalog::tools::{HttpToolExecutor, url_placeholders};
use baton_outbound::{GuardedClient, OutboundPolicy, OutboundRefusal};
use baton_runtime::ports::ResolvedHeaders;
use reqwest::Method;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value, json};

use crate::{ToolCall, ToolOutcome, ToolRunner};

/// Longest error body quoted back to the model.
const QUOTED_ERROR_BYTES: usize = 500;

fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Why an HTTP tool call could not be built. A header's value is never
/// quoted: it may be a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RequestProblem {
    #[error("argument `{0}` is needed for the URL")]
    MissingUrlArgument(String),
    #[error("`{0}` is not a header name")]
    HeaderName(String),
    #[error("header `{0}`: the value is not a valid header value")]
    HeaderValue(String),
}

/// The URL with its placeholders filled, and the arguments left over.
fn fill_url(
    template: &str,
    arguments: &Value,
) -> Result<(String, Map<String, Value>), RequestProblem> {
    let mut rest = arguments.as_object().cloned().unwrap_or_default();
    let mut url = template.to_string();
    for name in url_placeholders(template) {
        let value = rest
            .remove(&name)
            .ok_or_else(|| RequestProblem::MissingUrlArgument(name.clone()))?;
        let encoded: String =
            url::form_urlencoded::byte_serialize(scalar_text(&value).as_bytes()).collect();
        url = url.replace(&format!("{{{name}}}"), &encoded.replace('+', "%20"));
    }
    Ok((url, rest))
}

/// The tool's headers (their values read now), `Accept` and the call's
/// `Idempotency-Key`, and the secret values read (what the answer is
/// scrubbed of).
async fn headers(
    runner: &ToolRunner,
    executor: &HttpToolExecutor,
    call: &ToolCall,
) -> Result<(HeaderMap, ResolvedHeaders), ToolOutcome> {
    let resolved = runner.resolve(&executor.headers).await?;
    let mut map =
        header_map(&resolved).map_err(|problem| ToolOutcome::failed(problem.to_string()))?;
    map.insert(ACCEPT, HeaderValue::from_static("application/json"));
    if let Ok(key) = HeaderValue::from_str(&call.idempotency_key) {
        map.insert(HeaderName::from_static("idempotency-key"), key);
    }
    Ok((map, resolved))
}

/// Resolved headers as a header map, every value marked sensitive (kept
/// out of reqwest's and hyper's debug output).
pub(crate) fn header_map(resolved: &ResolvedHeaders) -> Result<HeaderMap, RequestProblem> {
    let mut map = HeaderMap::new();
    for (name, value) in &resolved.headers {
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| RequestProblem::HeaderName(name.clone()))?;
        // The value is never quoted in an error: it may be a secret.
        let mut value =
            HeaderValue::from_str(value).map_err(|_| RequestProblem::HeaderValue(name.clone()))?;
        value.set_sensitive(true);
        map.insert(header, value);
    }
    Ok(map)
}

pub(crate) async fn call(
    runner: &ToolRunner,
    executor: &HttpToolExecutor,
    call: &ToolCall,
) -> ToolOutcome {
    let (url, rest) = match fill_url(&executor.url, &call.arguments) {
        Ok(filled) => filled,
        Err(problem) => return ToolOutcome::failed(problem.to_string()),
    };
    let (mut headers, resolved) = match headers(runner, executor, call).await {
        Ok(headers) => headers,
        Err(outcome) => return outcome,
    };
    // The tool's span (the step's `gen_ai.execute_tool`), when exported:
    // the tool's server continues the run's trace.
    if let Some(traceparent) = baton_runtime::observe::run_traces::current_traceparent()
        && let Ok(value) = HeaderValue::from_str(&traceparent)
    {
        headers.insert(HeaderName::from_static("traceparent"), value);
    }
    let method = match Method::from_bytes(executor.method.as_bytes()) {
        Ok(method) => method,
        Err(_) => return ToolOutcome::failed(format!("`{}` is not a method", executor.method)),
    };
    let (url, body) = if matches!(method, Method::GET | Method::DELETE) {
        let mut parsed = match url::Url::parse(&url) {
            Ok(parsed) => parsed,
            Err(error) => return ToolOutcome::failed(format!("the URL is not valid: {error}")),
        };
        {
            // By name, so the same call is the same URL.
            let mut pairs: Vec<(&String, &Value)> = rest.iter().collect();
            pairs.sort_by(|left, right| left.0.cmp(right.0));
            let mut query = parsed.query_pairs_mut();
            for (name, value) in pairs {
                query.append_pair(name, &scalar_text(value));
            }
        }
        (parsed.to_string(), None)
    } else {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        (url, Some(Value::Object(rest).to_string().into_bytes()))
    };
    let policy = OutboundPolicy {
        max_response_bytes: executor.max_response_bytes,
        timeout: Duration::from_millis(executor.timeout_ms),
        ..OutboundPolicy::default()
    }
    .with_http_allowed_hosts(&runner.http_allowed_hosts);
    let client = GuardedClient::new(policy, runner.resolver.clone());
    let outcome = send(&client, method, &url, headers, body).await;
    crate::scrubbed(outcome, &resolved.secret_values())
}

async fn send(
    client: &GuardedClient,
    method: Method,
    url: &str,
    headers: HeaderMap,
    body: Option<Vec<u8>>,
) -> ToolOutcome {
    match client.send(method, url, headers, body).await {
        Err(refusal) => {
            let retryable = matches!(
                refusal,
                OutboundRefusal::Timeout(_) | OutboundRefusal::Transport(_)
            );
            ToolOutcome::Failed {
                message: refusal.to_string(),
                retryable,
            }
        }
        Ok(response) => {
            let text = String::from_utf8_lossy(&response.body).to_string();
            if response.status.is_success() {
                let result = serde_json::from_str::<Value>(&text)
                    .unwrap_or_else(|_| json!({ "text": text }));
                return ToolOutcome::Succeeded(result);
            }
            let quoted: String = text.chars().take(QUOTED_ERROR_BYTES).collect();
            ToolOutcome::Failed {
                message: format!("HTTP {}: {quoted}", response.status.as_u16()),
                retryable: response.status.is_server_error() || response.status.as_u16() == 429,
            }
        }
    }
}
