//! System clock and id generator adapters (the core takes both as arguments).

use baton_core::basics::instant::Instant;

use crate::ports::{Clock, IdGenerator};

/// Wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Instant::from_unix_millis(u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX))
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
    fn now(&self) -> Instant {
        SystemClock.now().plus(std::time::Duration::from_millis(
            self.offset_millis.load(std::sync::atomic::Ordering::SeqCst),
        ))
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
