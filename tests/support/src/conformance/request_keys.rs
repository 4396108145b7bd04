//! What every `RequestKeys` adapter must do: a key is claimed by one
//! request at a time; while it is in flight, another claim finds it
//! unanswered; once answered, every claim finds the answer (whatever its
//! fingerprint, so the caller can tell a reuse); a released claim can be
//! taken again; a stale unanswered claim (its caller died) is taken over,
//! an answered one never; an expired record is gone; an answer over a
//! claim that is not the caller's is refused; tenants stay apart.

use std::sync::Arc;

use baton_runtime::ports::{ClaimTimes, RequestKeyClaim, RequestKeys};
use serde_json::json;

use super::check;

const NOW: u64 = 1_767_225_600_000;
const DAY: u64 = 24 * 3600 * 1000;

fn at(now: u64) -> ClaimTimes {
    ClaimTimes {
        now,
        stale_before: now - 60_000,
        expires_at: now + DAY,
    }
}

/// Runs the suite against `keys`; `unique` keeps runs of it apart.
pub async fn request_keys_conformance(
    keys: Arc<dyn RequestKeys>,
    unique: &str,
) -> Result<(), String> {
    let (tenant, other) = (format!("rqk-a-{unique}"), format!("rqk-b-{unique}"));
    let failed = |error: baton_runtime::error::StoreError| error.to_string();
    let key = "chat:k1";

    let first = keys
        .claim_request_key(&tenant, key, "fp-1", at(NOW))
        .await
        .map_err(failed)?;
    check(first == RequestKeyClaim::Claimed, "a new key is claimed")?;
    let again = keys
        .claim_request_key(&tenant, key, "fp-1", at(NOW + 1_000))
        .await
        .map_err(failed)?;
    check(
        matches!(&again, RequestKeyClaim::Kept(kept) if kept.answer.is_none() && kept.fingerprint == "fp-1"),
        "a key in flight is found unanswered by a second claim",
    )?;
    let elsewhere = keys
        .claim_request_key(&other, key, "fp-1", at(NOW))
        .await
        .map_err(failed)?;
    check(
        elsewhere == RequestKeyClaim::Claimed,
        "another tenant's key of the same name is its own",
    )?;
    check(
        keys.answer_request_key(&tenant, key, "fp-other", &json!({"runId": "x"}))
            .await
            .is_err(),
        "an answer over another request's claim is refused",
    )?;
    let answer = json!({"runId": "run-1", "threadId": "thr-1"});
    keys.answer_request_key(&tenant, key, "fp-1", &answer)
        .await
        .map_err(failed)?;
    for fingerprint in ["fp-1", "fp-2"] {
        let kept = keys
            .claim_request_key(&tenant, key, fingerprint, at(NOW + 2_000))
            .await
            .map_err(failed)?;
        check(
            matches!(&kept, RequestKeyClaim::Kept(kept) if kept.answer.as_ref() == Some(&answer) && kept.fingerprint == "fp-1"),
            "an answered key gives its answer and the first request's fingerprint",
        )?;
    }
    let late = keys
        .claim_request_key(&tenant, key, "fp-1", at(NOW + 3_600_000))
        .await
        .map_err(failed)?;
    check(
        matches!(late, RequestKeyClaim::Kept(_)),
        "an answered key is never taken over, however old",
    )?;
    keys.release_request_key(&tenant, key, "fp-1")
        .await
        .map_err(failed)?;
    check(
        matches!(
            keys.claim_request_key(&tenant, key, "fp-1", at(NOW + 4_000))
                .await
                .map_err(failed)?,
            RequestKeyClaim::Kept(_)
        ),
        "a release keeps an answered key",
    )?;

    // A request that failed gives its claim back; a retry takes it.
    let failing = "fork:k2";
    keys.claim_request_key(&tenant, failing, "fp-3", at(NOW))
        .await
        .map_err(failed)?;
    keys.release_request_key(&tenant, failing, "fp-3")
        .await
        .map_err(failed)?;
    check(
        keys.claim_request_key(&tenant, failing, "fp-3", at(NOW + 1_000))
            .await
            .map_err(failed)?
            == RequestKeyClaim::Claimed,
        "a released key is claimed again",
    )?;
    // Its caller died: the claim goes stale and is taken over.
    check(
        keys.claim_request_key(&tenant, failing, "fp-3", at(NOW + 120_000))
            .await
            .map_err(failed)?
            == RequestKeyClaim::Claimed,
        "a stale unanswered claim is taken over",
    )?;
    // An expired record is gone.
    check(
        keys.claim_request_key(&other, key, "fp-9", at(NOW + 2 * DAY))
            .await
            .map_err(failed)?
            == RequestKeyClaim::Claimed,
        "an expired key is claimed anew",
    )?;
    Ok(())
}
