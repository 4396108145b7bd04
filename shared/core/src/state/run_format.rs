//! The stored run state's format number, on its own so the state
//! (`run.rs`) and its decoder (`stored_format.rs`) both read it without
//! reading each other.

/// The format this code writes.
pub const RUN_STATE_FORMAT_VERSION: u32 = 1;

/// The format of a state written before states said theirs.
pub fn first_format() -> u32 {
    1
}
