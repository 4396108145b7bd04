//! A run's W3C trace context: the trace every span of the run belongs to,
//! the id of its root span (written once, when the run ends, by whichever
//! process ends it), the caller's span the root hangs under, and whether the
//! trace is sampled.
//!
//! The run's ids are chosen when it is created (from the caller's
//! `traceparent` when there is one) and kept in its state, so every step,
//! on any worker or Lambda invocation, continues the same trace: a step
//! message carries `traceparent` (the run's root span as the parent) and
//! every frame carries `traceId` (and `spanId`, the span that wrote it, when
//! traces are exported).
//!
//! Parsing and formatting a `traceparent` header (W3C Trace Context, level
//! 1: `version-traceid-parentid-flags`) is written here rather than taken
//! from `opentelemetry`: the core crate stays free of telemetry SDKs, and
//! the format is four fixed-width hex fields.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A 16-byte trace id (32 lowercase hex digits on the wire; never zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TraceId(pub u128);

/// An 8-byte span id (16 lowercase hex digits on the wire; never zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpanId(pub u64);

/// `value`'s low `N / 2` bytes as `N` lowercase hex digits (every frame
/// carries a trace id: `{:032x}` through the formatting machinery costs
/// several times this).
fn hex_digits<const N: usize>(value: u128) -> [u8; N] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = [b'0'; N];
    let mut rest = value;
    for slot in out.iter_mut().rev() {
        *slot = DIGITS[(rest & 0xf) as usize];
        rest >>= 4;
    }
    out
}

fn write_ascii(formatter: &mut fmt::Formatter<'_>, digits: &[u8]) -> fmt::Result {
    // Hex digits are ASCII, so always UTF-8.
    formatter.write_str(std::str::from_utf8(digits).map_err(|_| fmt::Error)?)
}

impl fmt::Display for TraceId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_ascii(formatter, &hex_digits::<32>(self.0))
    }
}

impl fmt::Display for SpanId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_ascii(formatter, &hex_digits::<16>(u128::from(self.0)))
    }
}

/// The value of exactly `digits` lowercase hex digits (`digits` ≤ 32), in
/// one pass over the text.
fn lowercase_hex_value(text: &str, digits: usize) -> Option<u128> {
    if text.len() != digits {
        return None;
    }
    text.bytes().try_fold(0u128, |value, byte| {
        let digit = match byte {
            b'0'..=b'9' => byte - b'0',
            b'a'..=b'f' => byte - b'a' + 10,
            _ => return None,
        };
        Some(value << 4 | u128::from(digit))
    })
}

fn lowercase_hex(text: &str, digits: usize) -> bool {
    lowercase_hex_value(text, digits).is_some()
}

impl TraceId {
    /// Parses 32 lowercase hex digits, not all zero.
    pub fn parse(text: &str) -> Option<Self> {
        lowercase_hex_value(text, 32)
            .filter(|id| *id != 0)
            .map(TraceId)
    }
}

impl SpanId {
    /// Parses 16 lowercase hex digits, not all zero.
    pub fn parse(text: &str) -> Option<Self> {
        lowercase_hex_value(text, 16)
            .and_then(|id| u64::try_from(id).ok())
            .filter(|id| *id != 0)
            .map(SpanId)
    }
}

macro_rules! hex_serde {
    ($id:ident, $width:literal, $digits:literal, $pattern:literal, $what:literal) => {
        impl Serialize for $id {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let digits = hex_digits::<$width>(u128::from(self.0));
                match std::str::from_utf8(&digits) {
                    Ok(text) => serializer.serialize_str(text),
                    Err(_) => serializer.collect_str(self),
                }
            }
        }

        impl<'de> Deserialize<'de> for $id {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                $id::parse(&text).ok_or_else(|| {
                    serde::de::Error::custom(concat!(
                        "a ",
                        $what,
                        " is ",
                        $digits,
                        " lowercase hex digits, not all zero"
                    ))
                })
            }
        }

        impl schemars::JsonSchema for $id {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($id).into()
            }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({
                    "type": "string",
                    "pattern": $pattern,
                    "description": concat!("A W3C ", $what, " (", $digits, " lowercase hex digits).")
                })
            }
        }
    };
}

hex_serde!(TraceId, 32, "32", "^[0-9a-f]{32}$", "trace id");
hex_serde!(SpanId, 16, "16", "^[0-9a-f]{16}$", "span id");

/// A parsed `traceparent` header: the trace, the parent span, sampling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    pub sampled: bool,
}

/// Why a `traceparent` was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceParentError(pub &'static str);

impl fmt::Display for TraceParentError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.0)
    }
}

impl TraceParent {
    /// Parses a W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`). A future
    /// version's header is read by its first four fields, as the
    /// specification asks; version `ff` and malformed fields are refused.
    pub fn parse(header: &str) -> Result<Self, TraceParentError> {
        let header = header.trim();
        let mut fields = header.splitn(5, '-');
        let (Some(version), Some(trace_id), Some(span_id), Some(flags)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(TraceParentError(
                "a traceparent is version-traceid-parentid-flags",
            ));
        };
        let rest = fields.next().unwrap_or_default();
        if !lowercase_hex(version, 2) || version == "ff" {
            return Err(TraceParentError(
                "the traceparent version is two lowercase hex digits other than ff",
            ));
        }
        if version == "00" && (!rest.is_empty() || header.len() != 55) {
            return Err(TraceParentError(
                "a version 00 traceparent is exactly 55 characters",
            ));
        }
        let trace_id = TraceId::parse(trace_id).ok_or(TraceParentError(
            "the traceparent's trace id is 32 lowercase hex digits, not all zero",
        ))?;
        let span_id = SpanId::parse(span_id).ok_or(TraceParentError(
            "the traceparent's parent id is 16 lowercase hex digits, not all zero",
        ))?;
        let flags = lowercase_hex_value(flags, 2).ok_or(TraceParentError(
            "the traceparent's flags are two lowercase hex digits",
        ))?;
        Ok(TraceParent {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
        })
    }

    /// The header value (version 00).
    pub fn header_value(&self) -> String {
        let mut header = Vec::with_capacity(55);
        header.extend_from_slice(b"00-");
        header.extend_from_slice(&hex_digits::<32>(self.trace_id.0));
        header.push(b'-');
        header.extend_from_slice(&hex_digits::<16>(u128::from(self.span_id.0)));
        header.extend_from_slice(if self.sampled { b"-01" } else { b"-00" });
        // Hex digits and dashes: ASCII, so always UTF-8.
        String::from_utf8(header).unwrap_or_default()
    }
}

/// The trace of one run, kept in its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunTrace {
    pub trace_id: TraceId,
    /// The run's root span: every step span is its child.
    pub root_span_id: SpanId,
    /// The caller's span the root hangs under (its `traceparent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller_span_id: Option<SpanId>,
    /// Whether the trace is sampled (the caller's flag; true otherwise).
    pub sampled: bool,
}

impl RunTrace {
    /// A run's trace: the caller's trace when it sent one, otherwise
    /// `fresh_trace_id`; its root span is `fresh_root_span_id`. Zero ids
    /// (which W3C forbids) are replaced by 1.
    pub fn new(caller: Option<TraceParent>, fresh_trace_id: u128, fresh_root_span_id: u64) -> Self {
        let root_span_id = SpanId(fresh_root_span_id.max(1));
        match caller {
            Some(caller) => RunTrace {
                trace_id: caller.trace_id,
                root_span_id,
                caller_span_id: Some(caller.span_id),
                sampled: caller.sampled,
            },
            None => RunTrace {
                trace_id: TraceId(fresh_trace_id.max(1)),
                root_span_id,
                caller_span_id: None,
                sampled: true,
            },
        }
    }

    /// The `traceparent` a step of this run continues from: the run's root
    /// span as the parent.
    pub fn step_traceparent(&self) -> String {
        TraceParent {
            trace_id: self.trace_id,
            span_id: self.root_span_id,
            sampled: self.sampled,
        }
        .header_value()
    }

    /// The trace of a run started by a step of this one (an agent's child
    /// plan): the same trace, its root under `parent_span` (the step's span,
    /// or this run's root when no span is exported).
    pub fn child(&self, parent_span: Option<SpanId>, fresh_root_span_id: u64) -> Self {
        RunTrace {
            trace_id: self.trace_id,
            root_span_id: SpanId(fresh_root_span_id.max(1)),
            caller_span_id: Some(parent_span.unwrap_or(self.root_span_id)),
            sampled: self.sampled,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_round_trips() {
        let parsed = TraceParent::parse(VALID).unwrap_or_else(|error| unreachable!("{error}"));
        assert_eq!(parsed.trace_id.0, 0x4bf92f3577b34da6a3ce929d0e0e4736);
        assert_eq!(parsed.span_id.0, 0x00f067aa0ba902b7);
        assert!(parsed.sampled);
        assert_eq!(parsed.header_value(), VALID);
    }

    #[test]
    fn malformed_traceparents_are_refused_with_the_field_named() {
        let cases = [
            ("", "version-traceid"),
            (
                "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "version",
            ),
            (
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                "trace id",
            ),
            (
                "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
                "trace id",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                "parent id",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
                "55 characters",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-zz",
                "flags",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
                "55",
            ),
        ];
        for (header, named) in cases {
            let error = TraceParent::parse(header).err().map(|error| error.0);
            assert!(
                error.is_some_and(|error| error.contains(named)),
                "{header:?} gave {error:?}, expected it to name {named}"
            );
        }
    }

    #[test]
    fn a_later_versions_header_is_read_by_its_first_four_fields() {
        let header = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-extra";
        let parsed = TraceParent::parse(header).unwrap_or_else(|error| unreachable!("{error}"));
        assert!(!parsed.sampled);
    }

    #[test]
    fn a_run_continues_its_callers_trace_and_its_steps_continue_the_run() {
        let caller = TraceParent::parse(VALID).ok();
        let trace = RunTrace::new(caller, 7, 9);
        assert_eq!(trace.trace_id.0, 0x4bf92f3577b34da6a3ce929d0e0e4736);
        assert_eq!(trace.caller_span_id, Some(SpanId(0x00f067aa0ba902b7)));
        assert_eq!(
            trace.step_traceparent(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000009-01"
        );
        let fresh = RunTrace::new(None, 0, 0);
        assert_eq!((fresh.trace_id.0, fresh.root_span_id.0), (1, 1));
        let child = trace.child(Some(SpanId(5)), 11);
        assert_eq!(child.trace_id, trace.trace_id);
        assert_eq!(child.caller_span_id, Some(SpanId(5)));
    }

    #[test]
    fn ids_serialise_as_lowercase_hex_and_refuse_anything_else() {
        let json = serde_json::to_string(&SpanId(255)).unwrap_or_default();
        assert_eq!(json, "\"00000000000000ff\"");
        assert!(serde_json::from_str::<SpanId>("\"00000000000000FF\"").is_err());
        assert!(serde_json::from_str::<TraceId>("\"0\"").is_err());
    }
}
