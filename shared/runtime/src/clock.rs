//! System clock and id generator adapters (the core takes both as arguments).

use crate::ports::{Clock, IdGenerator};

/// Wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_millis(&self) -> u64 {
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX)
    }
}

/// A clock that moves only when told: the wall clock plus an offset the
/// caller advances (heartbeat expiry, lease expiry, SLAs without waiting).
#[derive(Debug, Default)]
pub struct OffsetClock {
    offset_millis: std::sync::atomic::AtomicU64,
}

impl OffsetClock {
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves this clock `by` into the future.
    pub fn advance(&self, by: std::time::Duration) {
        let millis = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.offset_millis
            .fetch_add(millis, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Clock for OffsetClock {
    fn now_millis(&self) -> u64 {
        SystemClock
            .now_millis()
            .saturating_add(self.offset_millis.load(std::sync::atomic::Ordering::SeqCst))
    }
}

/// Random (v4 UUID) identifiers.
#[derive(Debug, Default, Clone, Copy)]
pub struct RandomIds;

impl IdGenerator for RandomIds {
    fn new_id(&self, prefix: &str) -> String {
        format!("{prefix}_{}", uuid::Uuid::new_v4().simple())
    }
}

/// RFC 3339 text for a millisecond timestamp.
pub fn rfc3339_from_millis(millis: u64) -> String {
    let nanos = i128::from(millis) * 1_000_000;
    time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|moment| {
            moment
                .format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| "1970-01-01T00:00:00Z".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_epoch_millis_as_rfc3339() {
        assert_eq!(
            rfc3339_from_millis(1_700_000_000_123),
            "2023-11-14T22:13:20.123Z"
        );
    }
}
