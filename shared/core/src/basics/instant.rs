//! A typed point in time. The shell reads its clock and passes an `Instant`
//! in; the core formats it (RFC 3339, UTC, milliseconds) for frames and run
//! records. The core never reads a clock itself.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch (UTC).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Instant(u64);

impl Instant {
    pub const fn from_unix_millis(unix_millis: u64) -> Self {
        Instant(unix_millis)
    }

    pub const fn unix_millis(self) -> u64 {
        self.0
    }

    /// This instant `by` later (saturating).
    pub fn plus(self, by: Duration) -> Self {
        Instant(
            self.0
                .saturating_add(u64::try_from(by.as_millis()).unwrap_or(u64::MAX)),
        )
    }

    /// This instant `by` earlier (saturating at the epoch).
    pub fn minus(self, by: Duration) -> Self {
        Instant(
            self.0
                .saturating_sub(u64::try_from(by.as_millis()).unwrap_or(u64::MAX)),
        )
    }

    /// How long after `earlier` this is (zero when it is not after).
    pub fn since(self, earlier: Instant) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }

    /// Parses RFC 3339 text (any offset); None when it is not a time.
    pub fn parse_rfc3339(text: &str) -> Option<Self> {
        let moment =
            time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
                .ok()?;
        let millis = moment.unix_timestamp_nanos() / 1_000_000;
        u64::try_from(millis).ok().map(Instant)
    }

    /// RFC 3339 text, e.g. `2023-11-14T22:13:20.123Z`.
    pub fn rfc3339(self) -> String {
        let nanos = i128::from(self.0) * 1_000_000;
        time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
            .ok()
            .and_then(|moment| {
                moment
                    .format(&time::format_description::well_known::Rfc3339)
                    .ok()
            })
            .unwrap_or_else(|| "1970-01-01T00:00:00Z".to_string())
    }
}

/// Serde for `Instant` as RFC 3339 text (the form run records have always
/// stored): text that is not a time is an error naming it.
pub mod rfc3339 {
    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serializer};

    use super::Instant;

    pub fn serialize<S: Serializer>(value: &Instant, out: S) -> Result<S::Ok, S::Error> {
        out.serialize_str(&value.rfc3339())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(input: D) -> Result<Instant, D::Error> {
        let text = String::deserialize(input)?;
        Instant::parse_rfc3339(&text)
            .ok_or_else(|| D::Error::custom(format!("`{text}` is not an RFC 3339 time")))
    }
}

/// Serde for `Option<Instant>` as RFC 3339 text, the wire form of times:
/// text that is not a time is an error naming it, never "no time".
pub mod rfc3339_option {
    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serializer};

    use super::Instant;

    pub fn serialize<S: Serializer>(value: &Option<Instant>, out: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(instant) => out.serialize_some(&instant.rfc3339()),
            None => out.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(input: D) -> Result<Option<Instant>, D::Error> {
        Option::<String>::deserialize(input)?
            .map(|text| {
                Instant::parse_rfc3339(&text)
                    .ok_or_else(|| D::Error::custom(format!("`{text}` is not an RFC 3339 time")))
            })
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_moves() {
        let moment = Instant::from_unix_millis(1_700_000_000_123);
        assert_eq!(moment.rfc3339(), "2023-11-14T22:13:20.123Z");
        assert_eq!(Instant::parse_rfc3339(&moment.rfc3339()), Some(moment));
        assert_eq!(Instant::parse_rfc3339("tomorrow"), None);
        assert_eq!(
            moment.plus(Duration::from_secs(1)).unix_millis(),
            1_700_000_001_123
        );
        assert_eq!(
            moment.plus(Duration::from_secs(2)).since(moment),
            Duration::from_secs(2)
        );
        assert_eq!(
            moment.since(moment.plus(Duration::from_secs(2))),
            Duration::ZERO
        );
        assert_eq!(
            Instant::from_unix_millis(5)
                .minus(Duration::from_secs(1))
                .unix_millis(),
            0
        );
    }
}
