//! Attribute values, keys and transaction pieces of the DynamoDB run store.

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use baton_runtime::error::StoreError;

/// DynamoDB's limit on one item.
pub(crate) const DYNAMODB_ITEM_LIMIT_BYTES: usize = 400 * 1024;

/// A DynamoDB item: attribute name → value.
pub(crate) type Item = std::collections::HashMap<String, AttributeValue>;

pub(crate) fn unavailable(error: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(error.to_string())
}

/// A failed SDK call through the crate's one mapping
/// (`sdk_errors::call_failure`): retryable as `Unavailable`, permanent as
/// `Refused`. An item refused for its size is `StoreError::TooLarge` (not
/// retryable: asking again cannot make it fit).
pub(crate) fn sdk_failure<E, R>(error: SdkError<E, R>) -> StoreError
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    let failure = crate::sdk_errors::call_failure("DynamoDB", &error);
    if failure.code == "ValidationException"
        && failure
            .message
            .as_deref()
            .is_some_and(|message| message.to_ascii_lowercase().contains("size"))
    {
        return StoreError::TooLarge(format!(
            "DynamoDB refused an item over its {} KB limit",
            DYNAMODB_ITEM_LIMIT_BYTES / 1024
        ));
    }
    if failure.retryable {
        StoreError::Unavailable(failure.text)
    } else {
        StoreError::Refused(failure.text)
    }
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
