//! The documentation book (`docs/`, built by `mdbook build docs`):
//!
//! - every page in `docs/` is a chapter of `SUMMARY.md`, and every chapter
//!   exists;
//! - every link between pages resolves: to a page of the book (or a file
//!   beside it, such as `openapi.json`) and, when it names one, to a
//!   heading of that page, as mdbook makes the heading's id;
//! - every JSON example (a fenced `json` block) names the schema it
//!   follows on the line before it (`<!-- schema: PATH -->`, a path from
//!   the repository's root) and is valid against it. A fragment that is
//!   not a whole document is fenced as `text`.
//!
//! Each check is a function of the pages' text, and each has a test that
//! shows it fails on a broken page.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use pulldown_cmark::{Event, HeadingLevel, Parser, Tag, TagEnd};

fn repository_root() -> PathBuf {
    baton_architecture_tests::manifest_dir().join("../..")
}

/// The book's pages: file name → text.
fn book_pages() -> BTreeMap<String, String> {
    let mut pages = BTreeMap::new();
    for entry in std::fs::read_dir(repository_root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|extension| extension == "md") {
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            pages.insert(name, std::fs::read_to_string(&path).unwrap());
        }
    }
    assert!(pages.len() > 10, "the book's pages were read: {pages:?}");
    pages
}

/// Every link destination of a page, in order.
fn links_of(text: &str) -> Vec<String> {
    Parser::new(text)
        .filter_map(|event| match event {
            Event::Start(Tag::Link { dest_url, .. })
            | Event::Start(Tag::Image { dest_url, .. }) => Some(dest_url.to_string()),
            _ => None,
        })
        .collect()
}

/// The ids mdbook gives a page's headings (its `normalize_id`: letters,
/// digits, `_` and `-` kept and lowercased, whitespace made `-`, the rest
/// dropped; a repeated id gets `-1`, `-2`, …).
fn heading_ids(text: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut heading: Option<String> = None;
    for event in Parser::new(text) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(part) | Event::Code(part) => {
                if let Some(heading) = heading.as_mut() {
                    heading.push_str(&part);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let Some(text) = heading.take() else {
                    continue;
                };
                let id: String = text
                    .trim()
                    .chars()
                    .filter_map(|character| {
                        if character.is_alphanumeric() || character == '_' || character == '-' {
                            Some(character.to_ascii_lowercase())
                        } else if character.is_whitespace() {
                            Some('-')
                        } else {
                            None
                        }
                    })
                    .collect();
                let count = seen.entry(id.clone()).or_default();
                ids.insert(if *count == 0 {
                    id.clone()
                } else {
                    format!("{id}-{count}")
                });
                *count += 1;
            }
            _ => {}
        }
    }
    ids
}

/// The chapters `SUMMARY.md` links, in order.
fn summary_chapters(summary: &str) -> Vec<String> {
    links_of(summary)
}

/// What is wrong with the links of `pages` (file name → text), given the
/// other files beside them (`openapi.json`, …).
fn broken_links(pages: &BTreeMap<String, String>, other_files: &BTreeSet<String>) -> Vec<String> {
    let ids: BTreeMap<&str, BTreeSet<String>> = pages
        .iter()
        .map(|(name, text)| (name.as_str(), heading_ids(text)))
        .collect();
    let mut broken = Vec::new();
    for (name, text) in pages {
        for link in links_of(text) {
            if link.starts_with("http://")
                || link.starts_with("https://")
                || link.starts_with("mailto:")
            {
                continue;
            }
            let (target, anchor) = match link.split_once('#') {
                Some((target, anchor)) => (target, Some(anchor)),
                None => (link.as_str(), None),
            };
            let target = if target.is_empty() {
                name.as_str()
            } else {
                target.trim_start_matches("./")
            };
            if target.contains('/') {
                broken.push(format!(
                    "{name}: `{link}` leaves the book (name a repository file in `code`, not as a link)"
                ));
                continue;
            }
            if let Some(page_ids) = ids.get(target) {
                if let Some(anchor) = anchor
                    && !page_ids.contains(anchor)
                {
                    broken.push(format!(
                        "{name}: `{link}`: {target} has no heading `#{anchor}`"
                    ));
                }
            } else if !other_files.contains(target) {
                broken.push(format!("{name}: `{link}`: no {target} in the book"));
            }
        }
    }
    broken
}

/// What is wrong with the JSON examples of `pages`: a `json` block without
/// its schema line, not JSON, or not valid against its schema.
fn bad_json_examples(pages: &BTreeMap<String, String>) -> Vec<String> {
    let mut bad = Vec::new();
    for (name, text) in pages {
        let lines: Vec<&str> = text.lines().collect();
        let mut index = 0;
        while index < lines.len() {
            let line = lines[index].trim_start();
            let opens_json = line.starts_with("```json") && line.trim_end() == "```json";
            if !opens_json {
                // Skip other fenced blocks whole: a `json` fence inside
                // one is an example of an example.
                if line.starts_with("```") {
                    index += 1;
                    while index < lines.len() && !lines[index].trim_start().starts_with("```") {
                        index += 1;
                    }
                }
                index += 1;
                continue;
            }
            let start = index + 1;
            let mut end = start;
            while end < lines.len() && !lines[end].trim_start().starts_with("```") {
                end += 1;
            }
            let at = format!("{name}:{}", index + 1);
            let schema_line = lines[..index]
                .iter()
                .rev()
                .find(|line| !line.trim().is_empty())
                .map(|line| line.trim());
            let schema_path = schema_line
                .and_then(|line| line.strip_prefix("<!-- schema:"))
                .and_then(|rest| rest.strip_suffix("-->"))
                .map(str::trim);
            index = end + 1;
            let Some(schema_path) = schema_path else {
                bad.push(format!(
                    "{at}: a JSON example without `<!-- schema: PATH -->` on the line before it"
                ));
                continue;
            };
            let example: serde_json::Value =
                match serde_json::from_str(&lines[start..end].join("\n")) {
                    Ok(example) => example,
                    Err(error) => {
                        bad.push(format!(
                            "{at}: not JSON ({error}); fence a fragment as `text`"
                        ));
                        continue;
                    }
                };
            let Ok(schema_text) = std::fs::read_to_string(repository_root().join(schema_path))
            else {
                bad.push(format!("{at}: no schema at {schema_path}"));
                continue;
            };
            let schema: serde_json::Value = serde_json::from_str(&schema_text).unwrap();
            let validator = jsonschema::validator_for(&schema)
                .unwrap_or_else(|error| panic!("{schema_path} compiles: {error}"));
            for error in validator.iter_errors(&example) {
                bad.push(format!(
                    "{at}: against {schema_path}: {error} at `{}`",
                    error.instance_path()
                ));
            }
        }
    }
    bad
}

#[test]
fn every_page_is_a_chapter_and_every_chapter_exists() {
    let pages = book_pages();
    let chapters = summary_chapters(&pages["SUMMARY.md"]);
    let missing: Vec<&String> = chapters
        .iter()
        .filter(|chapter| !pages.contains_key(chapter.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "SUMMARY.md names pages that do not exist: {missing:?}"
    );
    let orphans: Vec<&String> = pages
        .keys()
        .filter(|page| *page != "SUMMARY.md" && !chapters.contains(page))
        .collect();
    assert!(
        orphans.is_empty(),
        "pages no chapter of SUMMARY.md names: {orphans:?}"
    );
    let h1 = |text: &str| {
        Parser::new(text).any(|event| {
            matches!(
                event,
                Event::Start(Tag::Heading {
                    level: HeadingLevel::H1,
                    ..
                })
            )
        })
    };
    let untitled: Vec<&String> = pages
        .iter()
        .filter(|(_, text)| !h1(text))
        .map(|(name, _)| name)
        .collect();
    assert!(
        untitled.is_empty(),
        "pages without a title (`# …`): {untitled:?}"
    );
}

#[test]
fn every_link_between_pages_resolves() {
    let pages = book_pages();
    let mut other_files = BTreeSet::new();
    for entry in std::fs::read_dir(repository_root().join("docs")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().to_string();
        if !name.ends_with(".md") {
            other_files.insert(name);
        }
    }
    let broken = broken_links(&pages, &other_files);
    assert!(broken.is_empty(), "{broken:#?}");
}

#[test]
fn the_link_check_names_a_missing_page_a_missing_heading_and_a_link_out_of_the_book() {
    let pages = BTreeMap::from([
        (
            "a.md".to_string(),
            "# A\n\n## The step protocol\n\nSee [b](b.md#nowhere), [c](c.md), [x](../README.md), \
             [here](#the-step-protocol) and [b](b.md#b-heading).\n"
                .to_string(),
        ),
        ("b.md".to_string(), "# B heading\n".to_string()),
    ]);
    let broken = broken_links(&pages, &BTreeSet::new());
    assert_eq!(broken.len(), 3, "{broken:#?}");
    assert!(
        broken[0].contains("b.md has no heading `#nowhere`"),
        "{broken:#?}"
    );
    assert!(broken[1].contains("no c.md in the book"), "{broken:#?}");
    assert!(broken[2].contains("leaves the book"), "{broken:#?}");
}

#[test]
fn every_json_example_names_its_schema_and_follows_it() {
    let bad = bad_json_examples(&book_pages());
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn the_example_check_names_a_missing_schema_line_and_an_invalid_example() {
    let envelope = "registry/schemas/envelope.schema.json";
    let pages = BTreeMap::from([(
        "a.md".to_string(),
        format!(
            "# A\n\n```json\n{{\"objective\": \"x\"}}\n```\n\n<!-- schema: {envelope} -->\n```json\n{{\"objective\": 3}}\n```\n"
        ),
    )]);
    let bad = bad_json_examples(&pages);
    assert!(bad.len() >= 2, "{bad:#?}");
    assert!(
        bad[0].starts_with("a.md:3: a JSON example without"),
        "{bad:#?}"
    );
    assert!(
        bad[1..]
            .iter()
            .all(|error| error.starts_with("a.md:8: against")),
        "{bad:#?}"
    );
}
