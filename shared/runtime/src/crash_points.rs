//! Named moments at which a kill test makes the process die on purpose.
//!
//! A crash between a commit and the send of its outbox, or between the send
//! and the queue's delete, lasts microseconds: a SIGKILL from outside lands
//! there by luck only. With the `crash-points` feature (a test build, never a
//! production one) and `BATON_CRASH_AT=<point>[:<n>]`, the process aborts
//! (`std::process::abort`: no destructor, no flush, no graceful shutdown, as
//! a SIGKILL) the `n`th time (default the first) it reaches `<point>`.
//! Without the feature [`reached`] is an empty inline function.

/// Where a process may be made to die.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// A step's decision is committed; its outbox is not sent yet.
    AfterCommitBeforeSend,
    /// A step is committed and its outbox sent; the delivered message is
    /// not acknowledged (deleted) yet.
    AfterSendBeforeAcknowledge,
}

impl CrashPoint {
    /// The name `BATON_CRASH_AT` uses.
    pub fn name(self) -> &'static str {
        match self {
            CrashPoint::AfterCommitBeforeSend => "after_commit",
            CrashPoint::AfterSendBeforeAcknowledge => "before_acknowledge",
        }
    }
}

/// Aborts the process if `BATON_CRASH_AT` names `point` and this is the
/// chosen time it is reached; otherwise does nothing.
#[cfg(not(feature = "crash-points"))]
#[inline(always)]
pub fn reached(_point: CrashPoint) {}

/// Aborts the process if `BATON_CRASH_AT` names `point` and this is the
/// chosen time it is reached; otherwise does nothing.
#[cfg(feature = "crash-points")]
pub fn reached(point: CrashPoint) {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};

    static CHOSEN: OnceLock<Option<(String, u64)>> = OnceLock::new();
    static TIMES_REACHED: AtomicU64 = AtomicU64::new(0);
    let chosen = CHOSEN.get_or_init(|| {
        let text = std::env::var("BATON_CRASH_AT").ok()?;
        let (name, nth) = match text.split_once(':') {
            Some((name, nth)) => (name.to_string(), nth.trim().parse().ok()?),
            None => (text.clone(), 1),
        };
        Some((name.trim().to_string(), nth))
    });
    let Some((name, nth)) = chosen else {
        return;
    };
    if name != point.name() {
        return;
    }
    if TIMES_REACHED.fetch_add(1, Ordering::SeqCst) + 1 == *nth {
        eprintln!(
            "baton: BATON_CRASH_AT={}:{nth} reached: aborting the process",
            point.name()
        );
        std::process::abort();
    }
}
