//! Attribute values, keys and transaction pieces of the DynamoDB run store.

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use baton_runtime::error::StoreError;

/// A DynamoDB item: attribute name → value.
pub(crate) type Item = std::collections::HashMap<String, AttributeValue>;

pub(crate) fn unavailable(error: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(error.to_string())
}

pub(crate) fn run_pk(tenant_id: &str, run_id: &str) -> String {
    format!("T#{tenant_id}#R#{run_id}")
}

pub(crate) fn event_sk(sequence: u64) -> String {
    format!("EV#{sequence:020}")
}

pub(crate) fn s(text: impl Into<String>) -> AttributeValue {
    AttributeValue::S(text.into())
}

pub(crate) fn n(number: u64) -> AttributeValue {
    AttributeValue::N(number.to_string())
}

pub(crate) fn read_number(item: &Item, name: &str) -> Result<u64, StoreError> {
    item.get(name)
        .and_then(|value| value.as_n().ok())
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| StoreError::Corrupt(format!("attribute `{name}` missing or not a number")))
}

pub(crate) fn read_text<'a>(item: &'a Item, name: &str) -> Result<&'a str, StoreError> {
    item.get(name)
        .and_then(|value| value.as_s().ok())
        .map(String::as_str)
        .ok_or_else(|| StoreError::Corrupt(format!("attribute `{name}` missing or not a string")))
}

/// What a cancelled transaction said about each item, in request order.
pub(crate) fn cancellation_codes(error: &SdkError<TransactWriteItemsError>) -> Option<Vec<String>> {
    match error {
        SdkError::ServiceError(service) => match service.err() {
            TransactWriteItemsError::TransactionCanceledException(cancelled) => Some(
                cancelled
                    .cancellation_reasons()
                    .iter()
                    .map(|reason| reason.code().unwrap_or("None").to_string())
                    .collect(),
            ),
            _ => None,
        },
        _ => None,
    }
}

pub(crate) fn put(
    table: &str,
    item: Item,
    condition: Option<&str>,
) -> Result<TransactWriteItem, StoreError> {
    let mut builder = Put::builder().table_name(table).set_item(Some(item));
    if let Some(condition) = condition {
        builder = builder.condition_expression(condition);
    }
    Ok(TransactWriteItem::builder()
        .put(builder.build().map_err(unavailable)?)
        .build())
}
