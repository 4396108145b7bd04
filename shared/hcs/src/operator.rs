//! The operator: the account that pays for and signs every transaction,
//! its Ed25519 key, and the ids in their text forms (`0.0.1234`,
//! `0.0.1234@1730051111.000000042`).

use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};

use crate::messages::{AccountId, SignatureMap, SignaturePair, Timestamp, TopicId, TransactionId};

/// The DER prefix of an Ed25519 private key in PKCS#8 form, as the
/// service's tools print it (`302e…0420` then the 32-byte seed).
const DER_PRIVATE_KEY_PREFIX: &str = "302e020100300506032b657004220420";

/// Why a setting of the ledger cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting}: {reason}")]
pub struct SettingRefused {
    pub setting: String,
    pub reason: String,
}

impl SettingRefused {
    pub fn new(setting: &str, reason: impl Into<String>) -> Self {
        SettingRefused {
            setting: setting.to_string(),
            reason: reason.into(),
        }
    }
}

/// `shard.realm.num` read as an account id; `setting` names it in errors.
pub fn account_from_text(text: &str, setting: &str) -> Result<AccountId, SettingRefused> {
    let parts: Vec<&str> = text.trim().split('.').collect();
    let numbers: Option<Vec<i64>> = parts.iter().map(|part| part.parse().ok()).collect();
    match numbers.as_deref() {
        Some([shard, realm, number]) if *shard >= 0 && *realm >= 0 && *number > 0 => {
            Ok(AccountId {
                shard_num: *shard,
                realm_num: *realm,
                account_num: *number,
            })
        }
        _ => Err(SettingRefused::new(
            setting,
            format!("`{text}` is not an account id of the form shard.realm.number (e.g. 0.0.1234)"),
        )),
    }
}

pub fn account_text(account: &AccountId) -> String {
    format!(
        "{}.{}.{}",
        account.shard_num, account.realm_num, account.account_num
    )
}

pub fn topic_text(topic: &TopicId) -> String {
    format!(
        "{}.{}.{}",
        topic.shard_num, topic.realm_num, topic.topic_num
    )
}

/// `payer@seconds.nanos`, nanos in nine digits.
pub fn transaction_text(id: &TransactionId) -> String {
    let start = id.transaction_valid_start.unwrap_or_default();
    let payer = id.account_id.unwrap_or_default();
    format!(
        "{}@{}.{:09}",
        account_text(&payer),
        start.seconds,
        start.nanos
    )
}

/// The paying, signing account.
pub struct Operator {
    pub account: AccountId,
    key: Ed25519KeyPair,
}

impl std::fmt::Debug for Operator {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Operator")
            .field("account", &account_text(&self.account))
            .field("key", &"[secret]")
            .finish()
    }
}

/// The 32-byte Ed25519 seed in `key_text`: 64 hex digits, or the DER form.
fn seed_from_text(key_text: &str, setting: &str) -> Result<Vec<u8>, SettingRefused> {
    let trimmed = key_text
        .trim()
        .trim_start_matches("0x")
        .to_ascii_lowercase();
    let hex_digits = trimmed
        .strip_prefix(DER_PRIVATE_KEY_PREFIX)
        .unwrap_or(&trimmed);
    let seed = hex::decode(hex_digits).map_err(|_| {
        SettingRefused::new(
            setting,
            "the key is not hexadecimal (an Ed25519 private key: 64 hex digits, or its DER form starting 302e)",
        )
    })?;
    if seed.len() != 32 {
        return Err(SettingRefused::new(
            setting,
            format!(
                "the key has {} bytes; an Ed25519 private key has 32 (ECDSA keys are not supported)",
                seed.len()
            ),
        ));
    }
    Ok(seed)
}

impl Operator {
    /// The operator `account` with the Ed25519 private key `key_text`.
    pub fn new(account: AccountId, key_text: &str, setting: &str) -> Result<Self, SettingRefused> {
        let seed = seed_from_text(key_text, setting)?;
        let key = Ed25519KeyPair::from_seed_unchecked(&seed)
            .map_err(|_| SettingRefused::new(setting, "the key is not a valid Ed25519 seed"))?;
        Ok(Operator { account, key })
    }

    pub fn public_key(&self) -> Vec<u8> {
        self.key.public_key().as_ref().to_vec()
    }

    /// The signature map of `body_bytes`: one pair, the whole public key
    /// as its prefix.
    pub fn sign(&self, body_bytes: &[u8]) -> SignatureMap {
        SignatureMap {
            sig_pair: vec![SignaturePair {
                pub_key_prefix: self.public_key(),
                ed25519: self.key.sign(body_bytes).as_ref().to_vec(),
            }],
        }
    }

    /// A transaction id paid by the operator, valid from `valid_start`.
    pub fn transaction_id(&self, valid_start: Timestamp) -> TransactionId {
        TransactionId {
            transaction_valid_start: Some(valid_start),
            account_id: Some(self.account),
        }
    }
}

/// The public key of the Ed25519 private key `key_text` (the stand-in node
/// registers an operator this way).
pub fn public_key_of(key_text: &str, setting: &str) -> Result<Vec<u8>, SettingRefused> {
    let seed = seed_from_text(key_text, setting)?;
    let key = Ed25519KeyPair::from_seed_unchecked(&seed)
        .map_err(|_| SettingRefused::new(setting, "the key is not a valid Ed25519 seed"))?;
    Ok(key.public_key().as_ref().to_vec())
}
