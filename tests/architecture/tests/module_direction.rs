//! Architecture rule that runs as a test: inside a crate, modules depend on
//! each other in one direction. A module is a top-level file or folder of
//! `src/` (`engine/` is one module here; `file_direction.rs` checks its
//! files); module A depends on B when A's code (its
//! tests left out) names `crate::B`. The graph of every crate checked must
//! have no circle: a circle means two modules can only be understood, and
//! changed, together. A crate grouped by concept is checked one level down
//! too: the files of `shared/aws`'s `dynamodb/` (each names the others as
//! `crate::dynamodb::name`) depend in one direction. Every crate of the
//! workspace (`shared/`, `functions/` and `tests/`, binaries included)
//! has modules in one direction, names each production file once and has
//! at most twelve top-level modules.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn repository_root() -> PathBuf {
    baton_architecture_tests::manifest_dir().join("../..")
}

/// The folders whose files must depend in one direction too, as (crate,
/// folder of its `src`): the module path of a file there is
/// `crate::folder::file`.
const CHECKED_FOLDERS: [(&str, &str); 1] = [("shared/aws", "dynamodb")];

/// Every `.rs` file under `directory`.
fn rust_files(directory: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![directory.to_path_buf()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|extension| extension == "rs") {
                files.push(path);
            }
        }
    }
    files
}

/// The module a file of `src` belongs to: its first path component, without `.rs`.
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).unwrap();
    let first = relative.components().next().unwrap().as_os_str();
    first.to_string_lossy().trim_end_matches(".rs").to_string()
}

/// The names `lib.rs` re-exports from a module (`pub use group::{a, b};`,
/// `pub use group::a;`), each to that module.
fn reexported_names(src: &Path) -> BTreeMap<String, String> {
    // A binary's root is `main.rs`; a crate with both re-exports from `lib.rs`.
    let root = if src.join("lib.rs").is_file() {
        src.join("lib.rs")
    } else {
        src.join("main.rs")
    };
    let lib = std::fs::read_to_string(root).unwrap();
    let code: Vec<&str> = lib
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect();
    let flat = code
        .join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let mut names = BTreeMap::new();
    for statement in flat.split(';') {
        let Some(path) = statement.trim().strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, rest)) = path.split_once("::") else {
            continue;
        };
        let listed = rest.trim_start_matches('{').trim_end_matches('}');
        for name in listed.split(',') {
            let name = name.trim();
            if !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_') {
                names.insert(name.to_string(), module.to_string());
            }
        }
    }
    names
}

/// Module → the modules it names (`crate::name`), tests left out.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    module_graph_named_by(src, src, "crate::")
}

/// Module → the modules it names, for the modules of `folder` (a crate's
/// `src`, or a folder in it) named as `prefix` + name, tests left out.
fn module_graph_named_by(
    src: &Path,
    folder: &Path,
    prefix: &str,
) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let files = rust_files(folder);
    let mut modules: BTreeMap<String, String> = files
        .iter()
        .map(|file| module_of(folder, file))
        .filter(|module| module != "lib" && module != "main" && module != "mod")
        .map(|module| (module.clone(), module))
        .collect();
    for (name, module) in reexported_names(src) {
        if modules.contains_key(&module) {
            modules.entry(name).or_insert(module);
        }
    }
    for file in &files {
        let module = module_of(folder, file);
        if module == "lib"
            || module == "main"
            || module == "mod"
            || file
                .strip_prefix(src)
                .unwrap_or(file)
                .components()
                .any(|part| part.as_os_str() == "tests")
        {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        // Code only: tests and comments (doc links name modules too) left out.
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or_default()
            .lines()
            .filter(|line| !line.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let named = graph.entry(module.clone()).or_default();
        for (index, _) in code.match_indices(prefix) {
            let rest = &code[index + prefix.len()..];
            let name: String = rest
                .chars()
                .take_while(|character| character.is_alphanumeric() || *character == '_')
                .collect();
            if let Some(target) = modules.get(&name)
                && *target != module
            {
                named.insert(target.clone());
            }
        }
    }
    graph
}

/// A circle of `graph`, if it has one (as the modules on it, in order).
fn find_circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        module: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|seen| seen == module) {
            let mut circle = path[start..].to_vec();
            circle.push(module.to_string());
            return Some(circle);
        }
        if done.contains(module) {
            return None;
        }
        path.push(module.to_string());
        for next in graph.get(module).into_iter().flatten() {
            if let Some(circle) = visit(next, graph, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        done.insert(module.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for module in graph.keys() {
        if let Some(circle) = visit(module, graph, &mut Vec::new(), &mut done) {
            return Some(circle);
        }
    }
    None
}

#[test]
fn modules_of_each_crate_depend_in_one_direction() {
    let crates = workspace_crates();
    let mut edges_read = 0;
    for krate in &crates {
        let src = krate.join("src");
        let graph = module_graph(&src);
        edges_read += graph.values().map(BTreeSet::len).sum::<usize>();
        if let Some(circle) = find_circle(&graph) {
            panic!(
                "{}: these modules import each other in a circle: {}",
                krate.display(),
                circle.join(" -> ")
            );
        }
    }
    assert!(
        edges_read >= 100,
        "the imports of {} crates were read ({edges_read} edges)",
        crates.len()
    );
}

#[test]
fn files_of_each_grouped_folder_depend_in_one_direction() {
    for (krate, folder) in CHECKED_FOLDERS {
        let src = repository_root().join(krate).join("src");
        let graph = module_graph_named_by(&src, &src.join(folder), &format!("crate::{folder}::"));
        let edges: usize = graph.values().map(BTreeSet::len).sum();
        assert!(
            edges >= 5,
            "{krate}/{folder}: the imports were read ({edges} edges)"
        );
        if let Some(circle) = find_circle(&graph) {
            panic!(
                "{krate}/{folder}: these files import each other in a circle: {}",
                circle.join(" -> ")
            );
        }
    }
}

#[test]
fn a_circle_is_found_when_there_is_one() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(module, named)| {
        (
            module.to_string(),
            named.into_iter().map(str::to_string).collect(),
        )
    })
    .collect();
    assert_eq!(
        find_circle(&graph),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    let mut acyclic = graph.clone();
    acyclic.get_mut("c").unwrap().clear();
    assert_eq!(find_circle(&acyclic), None);
}

/// File names a crate may repeat: module roots and test code (a `tests.rs`,
/// or a file under a `tests/` folder, such as the engine's test tables, each
/// named after the engine file it tests).
fn may_repeat(src: &Path, file: &Path) -> bool {
    let relative = file.strip_prefix(src).unwrap();
    let name = relative.file_name().unwrap().to_string_lossy();
    name == "mod.rs"
        || name == "tests.rs"
        || relative
            .components()
            .any(|part| part.as_os_str() == "tests")
}

/// Every crate of the workspace: the folders of `shared/`, `functions/`
/// and `tests/` with a `src/lib.rs` or a `src/main.rs`.
fn workspace_crates() -> Vec<PathBuf> {
    let mut crates: Vec<PathBuf> = ["shared", "functions", "tests"]
        .into_iter()
        .flat_map(|group| std::fs::read_dir(repository_root().join(group)).unwrap())
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("src/lib.rs").is_file() || path.join("src/main.rs").is_file())
        .collect();
    crates.sort();
    crates
}

/// The top-level modules of a crate's `src`: its files and folders, `lib.rs`
/// aside, a `name.rs` beside a `name/` counted once.
fn top_level_modules(src: &Path) -> BTreeSet<String> {
    std::fs::read_dir(src)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().to_string())
        .filter(|name| name != "lib.rs" && name != "main.rs")
        .map(|name| name.trim_end_matches(".rs").to_string())
        .collect()
}

/// At most this many top-level modules in a crate: more, and the crate
/// wants grouping by concept (folders), or splitting.
const MAX_TOP_LEVEL_MODULES: usize = 12;

#[test]
fn every_crate_has_at_most_twelve_top_level_modules() {
    let crates = workspace_crates();
    assert!(
        crates.len() >= 25,
        "the shared crates were found: {crates:?}"
    );
    let crowded: Vec<(String, usize)> = crates
        .iter()
        .map(|krate| {
            let modules = top_level_modules(&krate.join("src"));
            (krate.display().to_string(), modules.len())
        })
        .filter(|(_, count)| *count > MAX_TOP_LEVEL_MODULES)
        .collect();
    assert!(
        crowded.is_empty(),
        "these crates have more than {MAX_TOP_LEVEL_MODULES} top-level modules: {crowded:?}"
    );
}

#[test]
fn every_crate_names_each_production_file_once() {
    for krate in workspace_crates() {
        let repeated = repeated_file_names(&krate.join("src"));
        assert!(
            repeated.is_empty(),
            "{} repeats these file names: {repeated:?}",
            krate.display()
        );
    }
}

/// The file names under `src` that name more than one file, with the files.
fn repeated_file_names(src: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    let mut by_name: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for file in rust_files(src) {
        if may_repeat(src, &file) {
            continue;
        }
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        by_name
            .entry(name)
            .or_default()
            .push(file.strip_prefix(src).unwrap().to_path_buf());
    }
    by_name.retain(|_, files| files.len() > 1);
    by_name.values_mut().for_each(|files| files.sort());
    by_name
}

#[test]
fn a_repeated_file_name_is_found_when_there_is_one() {
    let folder = std::env::temp_dir().join(format!("baton-file-names-{}", std::process::id()));
    std::fs::create_dir_all(folder.join("engine/tests")).unwrap();
    std::fs::create_dir_all(folder.join("wire")).unwrap();
    for file in [
        "plan.rs",
        "wire/plan.rs",
        "engine/tests/plan.rs",
        "wire/mod.rs",
    ] {
        std::fs::write(folder.join(file), "").unwrap();
    }
    let repeated = repeated_file_names(&folder);
    std::fs::remove_dir_all(&folder).unwrap();
    assert_eq!(
        repeated.into_iter().collect::<Vec<_>>(),
        vec![(
            "plan.rs".to_string(),
            vec![PathBuf::from("plan.rs"), PathBuf::from("wire/plan.rs")]
        )]
    );
}
