//! Architecture rule that runs as a test: inside `baton-core`, files depend
//! on each other in one direction, the engine's transitions included. A file
//! depends on another when its code (tests and comments left out) names a
//! path into it: `crate::a::b::Item`, `super::x`, `self::x`, a `use` tree, or
//! (in a `mod.rs`) a child module by its bare name. A name a `mod.rs` only
//! re-exports (`pub use child::Item`) leads to the file that defines it, so
//! a folder's face is not a dependency of its own. Any circle fails the test,
//! unless it is one of [`ALLOWED_LOOPS`], each written down with why it is
//! inherent (there is one: the agent loop).
//!
//! The engine's files stand in layers, each calling only those below (see
//! `docs/architecture.md`, "The engine in layers").

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Circles allowed by name: the files on each, sorted, and why it is inherent.
const ALLOWED_LOOPS: &[(&[&str], &str)] = &[(
    &[
        "engine/agent/calls.rs",
        "engine/agent/mod.rs",
        "engine/agent/plan_call.rs",
    ],
    "the agent loop itself: a session's model turn (mod.rs) dispatches the tool calls it asked \
     for (calls.rs), an `agent_create_plan` call among them starts a plan (plan_call.rs), and \
     each call's result goes back to the dispatch, which takes the session's next turn",
)];

fn core_src() -> PathBuf {
    baton_architecture_tests::manifest_dir().join("../../shared/core/src")
}

/// Every `.rs` file under `src`, as a path from it (`engine/node.rs`).
fn rust_files(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|extension| extension == "rs")
                && path.file_name().is_some_and(|name| name != "tests.rs")
                && !path
                    .strip_prefix(src)
                    .unwrap_or(&path)
                    .components()
                    .any(|part| part.as_os_str() == "tests")
            {
                files.push(
                    path.strip_prefix(src)
                        .unwrap()
                        .to_string_lossy()
                        .to_string(),
                );
            }
        }
    }
    files.sort();
    files
}

/// The module path of a file: `engine/node.rs` → [engine, node];
/// `engine/mod.rs` → [engine]; `lib.rs` → [].
fn module_path(file: &str) -> Vec<String> {
    let mut parts: Vec<String> = file
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    if parts
        .last()
        .is_some_and(|last| last == "mod" || last == "lib")
    {
        parts.pop();
    }
    parts
}

/// Code only: tests and comment lines left out. A `#[cfg(test)]` before a
/// one-line declaration (`mod tests;`) drops that line; before anything
/// else (an inline test module, last in the file) it ends the code.
fn code_of(text: &str) -> String {
    let mut code = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("#[cfg(test)]") {
        code.push_str(&rest[..at]);
        let after = rest[at + "#[cfg(test)]".len()..].trim_start();
        let line = after.lines().next().unwrap_or_default();
        if line.trim_end().ends_with(';') {
            rest = &after[line.len()..];
        } else {
            rest = "";
        }
    }
    code.push_str(rest);
    code.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths of a `use` tree (`a::{b, c::{d, e}}` → a::b, a::c::d, a::c::e).
fn expand_use_tree(tree: &str) -> Vec<String> {
    let tree: String = tree
        .chars()
        .filter(|character| !character.is_whitespace())
        .collect();
    let Some(open) = tree.find('{') else {
        return vec![tree];
    };
    let head = &tree[..open];
    let body = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut items = Vec::new();
    let (mut depth, mut current) = (0, String::new());
    for character in body.chars() {
        match character {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        if character == ',' && depth == 0 {
            items.push(std::mem::take(&mut current));
        } else {
            current.push(character);
        }
    }
    items.push(current);
    items
        .into_iter()
        .filter(|item| !item.is_empty())
        .flat_map(|item| expand_use_tree(&format!("{head}{item}")))
        .collect()
}

/// The `use` statements of `code` (their tree, after `use`), and whether
/// each is a re-export (`pub use`, `pub(crate) use`, `pub(super) use`).
fn use_statements(code: &str) -> Vec<(bool, String)> {
    const STARTS: [(&str, bool); 4] = [
        ("use ", false),
        ("pub use ", true),
        ("pub(crate) use ", true),
        ("pub(super) use ", true),
    ];
    let mut statements = Vec::new();
    for chunk in code.split(';') {
        // The statement starts at the last line of the chunk that opens one.
        let mut offset = 0;
        let mut found = None;
        for line in chunk.split_inclusive('\n') {
            let trimmed = line.trim_start();
            for (start, exported) in STARTS {
                if let Some(rest_at) = trimmed
                    .strip_prefix(start)
                    .map(|_| offset + (line.len() - trimmed.len()) + start.len())
                {
                    found = Some((exported, rest_at));
                }
            }
            offset += line.len();
        }
        if let Some((exported, rest_at)) = found {
            statements.push((exported, chunk[rest_at..].to_string()));
        }
    }
    statements
}

/// The graph of `src`: file → the files it depends on.
fn file_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let files = rust_files(src);
    let by_module: BTreeMap<Vec<String>, String> = files
        .iter()
        .map(|file| (module_path(file), file.clone()))
        .collect();
    let texts: BTreeMap<String, String> = files
        .iter()
        .map(|file| {
            (
                file.clone(),
                code_of(&std::fs::read_to_string(src.join(file)).unwrap()),
            )
        })
        .collect();
    // Names a module's face re-exports: (module, name) → the path it names.
    let mut reexports: BTreeMap<(Vec<String>, String), Vec<String>> = BTreeMap::new();
    for (file, code) in &texts {
        let module = module_path(file);
        for (exported, tree) in use_statements(code) {
            if !exported {
                continue;
            }
            for path in expand_use_tree(&tree) {
                let segments: Vec<String> = path.split("::").map(str::to_string).collect();
                let name = segments
                    .last()
                    .unwrap()
                    .split(" as ")
                    .last()
                    .unwrap()
                    .to_string();
                reexports.insert((module.clone(), name), segments);
            }
        }
    }
    let resolve = |base: &[String], segments: &[String]| -> Option<String> {
        // A path that starts with neither `crate`, `self` nor `super` names
        // a child module of this one, or something outside the crate.
        let first = segments.first()?;
        if !["crate", "self", "super"].contains(&first.as_str()) {
            let mut child = base.to_vec();
            child.push(first.clone());
            if !by_module.contains_key(&child) {
                return None;
            }
        }
        resolve_from(&by_module, &reexports, base, segments, 0)
    };
    let mut graph = BTreeMap::new();
    for (file, code) in &texts {
        let module = module_path(file);
        let is_face = file.ends_with("mod.rs") || file == "lib.rs";
        // `self` is the file's own module (a face's is its folder's); `super` its parent.
        let base: Vec<String> = module.clone();
        let mut paths: Vec<Vec<String>> = Vec::new();
        for (exported, tree) in use_statements(code) {
            if exported && is_face {
                continue; // a face's re-exports hand names on; they are not its dependencies
            }
            for path in expand_use_tree(&tree) {
                paths.push(path.split("::").map(str::to_string).collect());
            }
        }
        let bytes = code.as_bytes();
        for start in ["crate::", "super::", "self::"] {
            for (index, _) in code.match_indices(start) {
                if index > 0
                    && (bytes[index - 1].is_ascii_alphanumeric()
                        || bytes[index - 1] == b'_'
                        || bytes[index - 1] == b':')
                {
                    continue;
                }
                let path: String = code[index..]
                    .chars()
                    .take_while(|character| {
                        character.is_alphanumeric() || *character == '_' || *character == ':'
                    })
                    .collect();
                // `super::{a, b}` and `super::node::{…}`: a use tree, read
                // whole by its statement above.
                if path.ends_with("::") {
                    continue;
                }
                paths.push(
                    path.split("::")
                        .filter(|segment| !segment.is_empty())
                        .map(str::to_string)
                        .collect(),
                );
            }
        }
        if is_face {
            // A face's own code naming a child module (`node::begin_node(…)`).
            for (child_module, _) in by_module
                .iter()
                .filter(|(path, _)| path.len() == module.len() + 1 && path.starts_with(&module))
            {
                let name = child_module.last().unwrap();
                let needle = format!("{name}::");
                for (index, _) in code.match_indices(&needle) {
                    let before = code[..index].chars().last();
                    if before.is_some_and(|character| {
                        character.is_alphanumeric() || character == '_' || character == ':'
                    }) {
                        continue;
                    }
                    let line_start = code[..index].rfind('\n').map_or(0, |at| at + 1);
                    let line = code[line_start..]
                        .lines()
                        .next()
                        .unwrap_or_default()
                        .trim_start();
                    if line.starts_with("pub use ")
                        || line.starts_with("pub(crate) use ")
                        || line.starts_with("mod ")
                    {
                        continue;
                    }
                    paths.push(vec![name.clone()]);
                }
            }
        }
        let mut depends = BTreeSet::new();
        for path in paths {
            if let Some(target) = resolve(&base, &path)
                && &target != file
            {
                depends.insert(target);
            }
        }
        graph.insert(file.clone(), depends);
    }
    graph
}

/// Where a path written in `module` leads: the file of the deepest module
/// it names, a re-exported name followed to the file that defines it.
fn resolve_from(
    by_module: &BTreeMap<Vec<String>, String>,
    reexports: &BTreeMap<(Vec<String>, String), Vec<String>>,
    module: &[String],
    path: &[String],
    hops: usize,
) -> Option<String> {
    let mut current = module.to_vec();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            current.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().is_some_and(|segment| segment == "super") {
                current.pop();
                rest = &rest[1..];
            }
        }
        _ => {}
    }
    while let Some(segment) = rest.first() {
        let segment = segment.split(" as ").next().unwrap().to_string();
        let mut child = current.clone();
        child.push(segment.clone());
        if by_module.contains_key(&child) {
            current = child;
            rest = &rest[1..];
        } else if let Some(target) = reexports.get(&(current.clone(), segment))
            && hops < 8
        {
            return resolve_from(by_module, reexports, &current, &target.clone(), hops + 1);
        } else {
            break;
        }
    }
    by_module.get(&current).cloned()
}

/// The circles of `graph` (its strongly connected parts of two files or
/// more), each sorted.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Tarjan's algorithm, iterative enough for a few hundred files.
    struct Walk<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        next: usize,
        found: Vec<Vec<String>>,
    }
    fn visit<'g>(walk: &mut Walk<'g>, file: &'g str) {
        walk.index.insert(file, walk.next);
        walk.low.insert(file, walk.next);
        walk.next += 1;
        walk.stack.push(file);
        walk.on_stack.insert(file);
        for target in walk.graph.get(file).into_iter().flatten() {
            let target = target.as_str();
            if !walk.graph.contains_key(target) {
                continue;
            }
            if !walk.index.contains_key(target) {
                visit(walk, target);
                let low = walk.low[file].min(walk.low[target]);
                walk.low.insert(file, low);
            } else if walk.on_stack.contains(target) {
                let low = walk.low[file].min(walk.index[target]);
                walk.low.insert(file, low);
            }
        }
        if walk.low[file] == walk.index[file] {
            let mut part = Vec::new();
            while let Some(member) = walk.stack.pop() {
                walk.on_stack.remove(member);
                part.push(member.to_string());
                if member == file {
                    break;
                }
            }
            if part.len() > 1 {
                part.sort();
                walk.found.push(part);
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        found: Vec::new(),
    };
    for file in graph.keys() {
        if !walk.index.contains_key(file.as_str()) {
            visit(&mut walk, file);
        }
    }
    walk.found
}

/// Each circle said with the arrows that make it.
fn described(graph: &BTreeMap<String, BTreeSet<String>>, circle: &[String]) -> String {
    let members: BTreeSet<&String> = circle.iter().collect();
    let mut text = format!("{} files:", circle.len());
    for file in circle {
        for target in graph[file].iter().filter(|target| members.contains(target)) {
            text.push_str(&format!("\n  {file} -> {target}"));
        }
    }
    text
}

#[test]
fn the_files_of_core_depend_in_one_direction() {
    let graph = file_graph(&core_src());
    assert!(graph.len() > 100, "core's files were read: {}", graph.len());
    assert!(
        graph["engine/node.rs"]
            .iter()
            .any(|target| target.starts_with("engine/")),
        "the engine's own arrows were read: {:?}",
        graph["engine/node.rs"]
    );
    let allowed: Vec<Vec<String>> = ALLOWED_LOOPS
        .iter()
        .map(|(files, _)| files.iter().map(|file| file.to_string()).collect())
        .collect();
    let found = circles(&graph);
    let unexpected: Vec<String> = found
        .iter()
        .filter(|circle| !allowed.contains(circle))
        .map(|circle| described(&graph, circle))
        .collect();
    assert!(
        unexpected.is_empty(),
        "circles among core's files:\n{}",
        unexpected.join("\n")
    );
    let gone: Vec<&Vec<String>> = allowed
        .iter()
        .filter(|loop_files| !found.contains(loop_files))
        .collect();
    assert!(
        gone.is_empty(),
        "allowed loops that are no longer there (take them off ALLOWED_LOOPS): {gone:?}"
    );
}

#[test]
fn a_new_circle_is_found_and_named() {
    let folder = std::env::temp_dir().join(format!("baton-file-direction-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(folder.join("engine")).unwrap();
    std::fs::write(folder.join("lib.rs"), "pub mod engine;\npub mod basics;\n").unwrap();
    std::fs::write(folder.join("basics.rs"), "pub struct Instant;\n").unwrap();
    std::fs::write(
        folder.join("engine/mod.rs"),
        "mod node;\nmod policy;\npub use node::begin_node;\npub struct Decision;\n",
    )
    .unwrap();
    std::fs::write(
        folder.join("engine/node.rs"),
        "use super::Decision;\nuse crate::basics::Instant;\npub fn begin_node() { super::policy::fire(); }\n",
    )
    .unwrap();
    std::fs::write(
        folder.join("engine/policy.rs"),
        "use super::{node::begin_node, Decision};\npub fn fire() { begin_node(); }\n",
    )
    .unwrap();
    let graph = file_graph(&folder);
    let _ = std::fs::remove_dir_all(&folder);
    assert_eq!(
        graph["engine/node.rs"],
        BTreeSet::from([
            "basics.rs".to_string(),
            "engine/mod.rs".to_string(),
            "engine/policy.rs".to_string()
        ])
    );
    assert_eq!(
        circles(&graph),
        [vec![
            "engine/node.rs".to_string(),
            "engine/policy.rs".to_string()
        ]],
        "the face re-exports `begin_node` and defines `Decision`: only node ↔ policy is a circle"
    );
}
