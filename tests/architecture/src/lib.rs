//! Architecture and documentation rules that span the workspace, run as
//! tests (`tests/`): which crates depend on which and what each may link
//! (`dependency_rules.rs`), the direction of modules inside each crate
//! (`module_direction.rs`) and of files inside `baton-core`
//! (`file_direction.rs`), the documentation book's links and JSON examples
//! (`book.rs`), the code map in `docs/architecture.md` against the code
//! (`code_map.rs`), and the requirements table in `docs/requirements.md`
//! against the tests it names (`requirements_table.rs`). Its one function finds the repository; the rest only
//! reads it. It must never be a dependency of anything.

use std::path::PathBuf;

/// This crate's folder, read when the test runs (cargo sets
/// `CARGO_MANIFEST_DIR` for every test binary it runs), else as it was when
/// built: a binary built in another clone that shares the target directory
/// reads the clone it runs for, never the one it was built in.
pub fn manifest_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}
