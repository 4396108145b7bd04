//! The ledger's settings, from the process's variables. Off unless
//! `BATON_HCS_NODE_URL` is set; then the operator's account and a
//! reference to its key are required (the key itself is a secret: a name
//! in the secret store, `{"ssm": …}` or `{"secretsManager": …}`).

use std::time::Duration;

use baton_core::basics::credentials::SecretReference;

use crate::messages::AccountId;
use crate::operator::{SettingRefused, account_from_text};

pub const NODE_URL: &str = "BATON_HCS_NODE_URL";
pub const NODE_ACCOUNT: &str = "BATON_HCS_NODE_ACCOUNT";
pub const OPERATOR_ACCOUNT: &str = "BATON_HCS_OPERATOR_ACCOUNT";
pub const OPERATOR_KEY: &str = "BATON_HCS_OPERATOR_KEY";
pub const EXPLORER_URL: &str = "BATON_HCS_EXPLORER_URL";
pub const RECEIPT_TIMEOUT: &str = "BATON_HCS_RECEIPT_TIMEOUT_SECONDS";
pub const MAX_FEE: &str = "BATON_HCS_MAX_FEE_TINYBARS";

/// The explorer linked when none is set: the service's test network.
pub const DEFAULT_EXPLORER_URL: &str = "https://hashscan.io/testnet";
/// The account of the first node of every network.
pub const DEFAULT_NODE_ACCOUNT: &str = "0.0.3";
/// The most a transaction may cost, in tinybars (2 ℏ).
pub const DEFAULT_MAX_FEE_TINYBARS: u64 = 200_000_000;
pub const DEFAULT_RECEIPT_TIMEOUT: Duration = Duration::from_secs(30);

/// Where transcripts are published, and who pays.
#[derive(Debug, Clone, PartialEq)]
pub struct HcsSettings {
    /// `http://host:port` of a consensus node's gRPC API (plaintext, the
    /// nodes' port 50211).
    pub node_url: String,
    pub node_account: AccountId,
    pub operator_account: AccountId,
    pub operator_key: SecretReference,
    /// The explorer the viewer links to; `None` links nothing.
    pub explorer_url: Option<String>,
    pub receipt_timeout: Duration,
    pub max_fee_tinybars: u64,
}

impl HcsSettings {
    /// The settings in the variables `read` gives; `None` when the ledger
    /// is off (no node URL).
    pub fn from_variables(
        read: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, SettingRefused> {
        let given = |name: &str| read(name).filter(|value| !value.trim().is_empty());
        let Some(node_url) = given(NODE_URL) else {
            return Ok(None);
        };
        if !node_url.starts_with("http://") {
            return Err(SettingRefused::new(
                NODE_URL,
                format!(
                    "`{node_url}` is not an http:// URL (the nodes' plaintext gRPC port, e.g. http://0.testnet.hedera.com:50211; TLS is not built in)"
                ),
            ));
        }
        let node_account = account_from_text(
            &given(NODE_ACCOUNT).unwrap_or_else(|| DEFAULT_NODE_ACCOUNT.to_string()),
            NODE_ACCOUNT,
        )?;
        let operator_account = account_from_text(
            &given(OPERATOR_ACCOUNT).ok_or_else(|| {
                SettingRefused::new(OPERATOR_ACCOUNT, format!("required when {NODE_URL} is set"))
            })?,
            OPERATOR_ACCOUNT,
        )?;
        let key_text = given(OPERATOR_KEY).ok_or_else(|| {
            SettingRefused::new(
                OPERATOR_KEY,
                format!("required when {NODE_URL} is set: a secret reference, never the key"),
            )
        })?;
        let operator_key = reference_from_text(&key_text)?;
        let explorer_url = match given(EXPLORER_URL) {
            Some(url) if url == "none" => None,
            Some(url) => Some(url.trim_end_matches('/').to_string()),
            None => Some(DEFAULT_EXPLORER_URL.to_string()),
        };
        let receipt_timeout = match given(RECEIPT_TIMEOUT) {
            None => DEFAULT_RECEIPT_TIMEOUT,
            Some(text) => match text.trim().parse::<u64>() {
                Ok(seconds) if (1..=600).contains(&seconds) => Duration::from_secs(seconds),
                _ => {
                    return Err(SettingRefused::new(
                        RECEIPT_TIMEOUT,
                        format!("`{text}` is not a number of seconds from 1 to 600"),
                    ));
                }
            },
        };
        let max_fee_tinybars = match given(MAX_FEE) {
            None => DEFAULT_MAX_FEE_TINYBARS,
            Some(text) => text.trim().parse::<u64>().map_err(|_| {
                SettingRefused::new(MAX_FEE, format!("`{text}` is not a number of tinybars"))
            })?,
        };
        Ok(Some(HcsSettings {
            node_url,
            node_account,
            operator_account,
            operator_key,
            explorer_url,
            receipt_timeout,
            max_fee_tinybars,
        }))
    }
}

/// A secret reference as a variable holds it: JSON (`{"ssm": "/path"}`,
/// `{"secretsManager": "name"}`) or a bare name.
fn reference_from_text(text: &str) -> Result<SecretReference, SettingRefused> {
    let trimmed = text.trim();
    let hex_digits = trimmed.trim_start_matches("0x");
    if hex_digits.len() >= 64 && hex_digits.chars().all(|digit| digit.is_ascii_hexdigit()) {
        return Err(SettingRefused::new(
            OPERATOR_KEY,
            "this looks like the key itself: give a reference to it (a secret's name, {\"ssm\": \"/path\"} or {\"secretsManager\": \"name\"})",
        ));
    }
    let reference = if trimmed.starts_with('{') {
        serde_json::from_str::<SecretReference>(trimmed).map_err(|error| {
            SettingRefused::new(OPERATOR_KEY, format!("not a secret reference: {error}"))
        })?
    } else {
        SecretReference::Named(trimmed.to_string())
    };
    match reference.problem() {
        Some(problem) => Err(SettingRefused::new(OPERATOR_KEY, problem)),
        None => Ok(reference),
    }
}
