//! Architecture and documentation rules that span the workspace, run as
//! tests (`tests/`): which crates depend on which and what each may link
//! (`dependency_rules.rs`), the direction of modules inside each crate
//! (`module_direction.rs`) and of files inside `baton-core`
//! (`file_direction.rs`), the documentation book's links and JSON examples
//! (`book.rs`), and the code map in `docs/architecture.md` against the code
//! (`code_map.rs`). This crate has no code of its own: it only reads the
//! repository. It must never be a dependency of anything.
