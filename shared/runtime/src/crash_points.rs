//! Named moments at which a kill test makes the process die on purpose.
//!
//! A crash between a commit and the send of its outbox, or between the send
//! and the queue's delete, lasts microseconds: a SIGKILL from outside lands
//! there by luck only. With the `crash-points` feature (a test build, never a
//! production one) and `BATON_CRASH_AT=<point>[:<n>]` (read by the
//! configuration, handed to [`arm`] at start-up), the process aborts
//! (`std::process::abort`: no destructor, no flush, no graceful shutdown, as
//! a SIGKILL) the `n`th time (default the first) it reaches `<point>`.
//! Without the feature [`reached`] is an empty inline function and [`arm`]
//! says it cannot arm.

/// Where a process may be made to die.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// A step's decision is committed; its outbox is not sent yet.
    AfterCommitBeforeSend,
    /// A step is committed and its outbox sent; the delivered message is
    /// not acknowledged (deleted) yet.
    AfterSendBeforeAcknowledge,
    /// A submitted run is stored; its first step is not sent yet (the
    /// sweeper's to recover).
    AfterAdmitBeforeSend,
}

impl CrashPoint {
    /// The name `BATON_CRASH_AT` uses.
    pub fn name(self) -> &'static str {
        match self {
            CrashPoint::AfterCommitBeforeSend => "after_commit",
            CrashPoint::AfterSendBeforeAcknowledge => "before_acknowledge",
            CrashPoint::AfterAdmitBeforeSend => "after_admit",
        }
    }
}

/// Whether this build can crash on purpose (the `crash-points` feature).
pub const AVAILABLE: bool = cfg!(feature = "crash-points");

/// Why a crash point cannot be armed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CrashPointProblem {
    #[error("`{0}`: the count after `:` must be a positive whole number")]
    BadCount(String),
    #[error("`{0}` is not a crash point: use after_commit, before_acknowledge or after_admit")]
    Unknown(String),
    #[error("this build has no crash points (they are in test builds only)")]
    NotInThisBuild,
}

/// Arms the crash point `text` names (`after_commit`, `before_acknowledge`,
/// optionally `:<n>`). An error names what is wrong, or that this build
/// has no crash points.
pub fn arm(text: &str) -> Result<(), CrashPointProblem> {
    let (name, nth) = match text.split_once(':') {
        Some((name, nth)) => (
            name.trim(),
            nth.trim()
                .parse::<u64>()
                .ok()
                .filter(|nth| *nth > 0)
                .ok_or_else(|| CrashPointProblem::BadCount(text.to_string()))?,
        ),
        None => (text.trim(), 1),
    };
    let point = [
        CrashPoint::AfterCommitBeforeSend,
        CrashPoint::AfterSendBeforeAcknowledge,
        CrashPoint::AfterAdmitBeforeSend,
    ]
    .into_iter()
    .find(|point| point.name() == name)
    .ok_or_else(|| CrashPointProblem::Unknown(name.to_string()))?;
    if !AVAILABLE {
        return Err(CrashPointProblem::NotInThisBuild);
    }
    armed::set(point, nth);
    Ok(())
}

/// Aborts the process if the armed crash point is `point` and this is the
/// chosen time it is reached; otherwise does nothing.
#[cfg(not(feature = "crash-points"))]
#[inline(always)]
pub fn reached(_point: CrashPoint) {}

#[cfg(not(feature = "crash-points"))]
mod armed {
    pub(super) fn set(_point: super::CrashPoint, _nth: u64) {}
}

/// Aborts the process if the armed crash point is `point` and this is the
/// chosen time it is reached; otherwise does nothing.
#[cfg(feature = "crash-points")]
pub fn reached(point: CrashPoint) {
    use std::sync::atomic::Ordering;
    let Some((armed, nth)) = armed::ARMED.get() else {
        return;
    };
    if *armed != point {
        return;
    }
    if armed::TIMES_REACHED.fetch_add(1, Ordering::SeqCst) + 1 == *nth {
        eprintln!(
            "baton: BATON_CRASH_AT={}:{nth} reached: aborting the process",
            point.name()
        );
        std::process::abort();
    }
}

#[cfg(feature = "crash-points")]
mod armed {
    use std::sync::OnceLock;
    use std::sync::atomic::AtomicU64;

    pub(super) static ARMED: OnceLock<(super::CrashPoint, u64)> = OnceLock::new();
    pub(super) static TIMES_REACHED: AtomicU64 = AtomicU64::new(0);

    pub(super) fn set(point: super::CrashPoint, nth: u64) {
        let _ = ARMED.set((point, nth));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arming_names_what_is_wrong_and_a_build_without_the_feature_refuses() {
        assert_eq!(
            arm("after_lunch"),
            Err(CrashPointProblem::Unknown("after_lunch".into()))
        );
        let count = arm("after_commit:zero").unwrap_err();
        assert_eq!(
            count.to_string(),
            "`after_commit:zero`: the count after `:` must be a positive whole number"
        );
        assert!(matches!(
            arm("before_acknowledge:0"),
            Err(CrashPointProblem::BadCount(_))
        ));
        if !AVAILABLE {
            assert_eq!(
                arm("after_commit:2"),
                Err(CrashPointProblem::NotInThisBuild)
            );
        }
    }
}
