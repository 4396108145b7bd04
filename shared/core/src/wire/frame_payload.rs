//! A frame's payload, kept as the JSON text it is written as.
//!
//! Frames are written far more often than they are read field by field:
//! every frame goes into a run's log as text, most are never looked into
//! again but streamed as text. So a payload is rendered once, straight from
//! its typed struct to compact JSON, and copied as text into the log, the
//! SSE stream and the stores; a frame read back keeps its payload as the
//! slice of text it was (no `serde_json::Value` tree built to be written out
//! again).
//!
//! A reader that looks into a payload gets a `serde_json::Value`, parsed
//! from the text the first time it is asked for (`value`, or through `Deref`
//! as `payload["field"]`) and kept with it.
//!
//! Invariant: `rendered` is one well-formed JSON value, and `parsed`, once
//! set, is that value; an edit (`edit`) re-renders the text and keeps the
//! edited value.

use std::ops::Deref;
use std::sync::OnceLock;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// One frame's payload: its JSON text and, once read, its parsed value.
pub struct FramePayload {
    rendered: Box<RawValue>,
    /// Boxed: most payloads are never parsed, and a frame stays small.
    parsed: OnceLock<Box<Value>>,
}

impl FramePayload {
    /// Renders a typed payload. Serializing the frame types (plain structs
    /// with string keys) cannot fail; if one ever did, the payload is
    /// `null` rather than a frame lost.
    pub fn render<T: Serialize + ?Sized>(payload: &T) -> Self {
        let rendered = serde_json::value::to_raw_value(payload).unwrap_or_else(|_| null_text());
        FramePayload {
            rendered,
            parsed: OnceLock::new(),
        }
    }

    /// A payload from a JSON value (rendered now, the value kept).
    pub fn from_value(value: Value) -> Self {
        let rendered = serde_json::value::to_raw_value(&value).unwrap_or_else(|_| null_text());
        FramePayload {
            rendered,
            parsed: OnceLock::from(Box::new(value)),
        }
    }

    /// A payload from JSON text kept elsewhere (a store's record): checked
    /// to be JSON, kept as it is.
    pub fn from_json_text(text: String) -> Result<Self, serde_json::Error> {
        Ok(FramePayload {
            rendered: RawValue::from_string(text)?,
            parsed: OnceLock::new(),
        })
    }

    /// The payload's compact JSON text.
    pub fn json(&self) -> &str {
        self.rendered.get()
    }

    /// The payload as a JSON value (parsed from its text on first use).
    pub fn value(&self) -> &Value {
        self.parsed.get_or_init(|| {
            Box::new(serde_json::from_str(self.rendered.get()).unwrap_or(Value::Null))
        })
    }

    /// The payload as a JSON value, owned.
    pub fn into_value(self) -> Value {
        match self.parsed.into_inner() {
            Some(value) => *value,
            None => serde_json::from_str(self.rendered.get()).unwrap_or(Value::Null),
        }
    }

    /// Changes the payload through its JSON value, then renders it again.
    pub fn edit(&mut self, change: impl FnOnce(&mut Value)) {
        let mut value = std::mem::replace(self, FramePayload::from_value(Value::Null)).into_value();
        change(&mut value);
        *self = FramePayload::from_value(value);
    }
}

fn null_text() -> Box<RawValue> {
    RawValue::from_string("null".to_string()).unwrap_or_default()
}

impl Deref for FramePayload {
    type Target = Value;
    fn deref(&self) -> &Value {
        self.value()
    }
}

impl From<Value> for FramePayload {
    fn from(value: Value) -> Self {
        FramePayload::from_value(value)
    }
}

impl Clone for FramePayload {
    fn clone(&self) -> Self {
        FramePayload {
            rendered: self.rendered.clone(),
            parsed: self.parsed.clone(),
        }
    }
}

impl std::fmt::Debug for FramePayload {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.rendered.get())
    }
}

/// Two payloads are equal when they are the same JSON value (the same text,
/// or texts that parse to equal values).
impl PartialEq for FramePayload {
    fn eq(&self, other: &Self) -> bool {
        self.json() == other.json() || self.value() == other.value()
    }
}

impl PartialEq<Value> for FramePayload {
    fn eq(&self, other: &Value) -> bool {
        self.value() == other
    }
}

impl Serialize for FramePayload {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.rendered.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for FramePayload {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(FramePayload {
            rendered: Box::<RawValue>::deserialize(deserializer)?,
            parsed: OnceLock::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Example {
        node_count: u32,
        label: &'static str,
    }

    #[test]
    fn a_typed_payload_is_rendered_once_as_compact_json_and_read_as_a_value() {
        let payload = FramePayload::render(&Example {
            node_count: 3,
            label: "a \"quoted\" label",
        });
        assert_eq!(
            payload.json(),
            r#"{"nodeCount":3,"label":"a \"quoted\" label"}"#
        );
        assert_eq!(payload["nodeCount"], 3);
        assert_eq!(payload.get("label"), Some(&json!("a \"quoted\" label")));
    }

    #[test]
    fn a_frame_written_and_read_back_keeps_its_payload_text_as_it_was() {
        #[derive(Serialize, Deserialize)]
        struct Frame {
            id: u64,
            payload: FramePayload,
        }
        let written = serde_json::to_string(&Frame {
            id: 1,
            payload: FramePayload::from_value(json!({"b": 1, "a": [true, null]})),
        })
        .unwrap();
        assert_eq!(written, r#"{"id":1,"payload":{"b":1,"a":[true,null]}}"#);
        let read: Frame = serde_json::from_str(&written).unwrap();
        assert_eq!(read.payload.json(), r#"{"b":1,"a":[true,null]}"#);
        // Read through a JSON value as well (a store that decodes via `Value`).
        let through_value: Frame =
            serde_json::from_value(serde_json::from_str(&written).unwrap()).unwrap();
        assert_eq!(through_value.payload, read.payload);
        assert_eq!(
            serde_json::to_value(&read.payload).unwrap(),
            json!({"b": 1, "a": [true, null]})
        );
    }

    #[test]
    fn payloads_are_equal_as_json_values_whatever_their_spacing() {
        let compact: FramePayload = serde_json::from_str(r#"{"a":1}"#).unwrap();
        let spaced: FramePayload = serde_json::from_str(r#"{ "a" : 1 }"#).unwrap();
        assert_eq!(compact, spaced);
        assert_ne!(compact, FramePayload::from_value(json!({"a": 2})));
        assert_eq!(compact, json!({"a": 1}));
    }

    #[test]
    fn an_edit_changes_the_text_and_the_value_together() {
        let mut payload = FramePayload::render(&json!({"text": "secret", "keep": 1}));
        payload.edit(|value| value["text"] = json!("[redacted]"));
        assert_eq!(payload.json(), r#"{"text":"[redacted]","keep":1}"#);
        assert_eq!(payload["text"], "[redacted]");
        assert_eq!(
            payload.clone().into_value(),
            json!({"text": "[redacted]", "keep": 1})
        );
    }
}
