//! Data-driven planner tests: every case in `tests/planner_cases/*.json`
//! (an example envelope from `registry/examples/`, optionally changed by a
//! JSON merge patch, or a whole envelope) is planned deterministically and
//! validated over the repository's registry; the summary (status, score,
//! nodes, edges, diagnostics) must equal `<case>.snap.json` beside it.
//!
//! `BATON_UPDATE_SNAPSHOTS=1 cargo test -p baton-core --test planner_snapshots`
//! rewrites the snapshots (review the diff before committing).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::{Path, PathBuf};

use baton_core::basics::schema::ValidatorCache;
use baton_core::catalog::registry::{Registry, RegistryDocument};
use baton_core::contracts::diagnostics::{DiagnosticsBundle, PlanDiagnostic};
use baton_core::contracts::envelope::TaskEnvelope;
use baton_core::planning::planner::plan_deterministically;
use baton_core::planning::validator::{rejected_bundle, validate_plan};
use serde_json::{Map, Value, json};

fn repository(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(relative)
}

fn sorted_files(directory: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(directory)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.to_string_lossy().ends_with(suffix))
        .collect();
    paths.sort();
    paths
}

fn registry() -> Registry {
    let read = |folder: &str| -> Vec<RegistryDocument> {
        sorted_files(&repository(folder), ".json")
            .into_iter()
            .map(|path| RegistryDocument {
                source_name: path.display().to_string(),
                text: std::fs::read_to_string(&path).unwrap(),
            })
            .collect()
    };
    let capabilities = read("registry/capabilities")
        .into_iter()
        .map(|document| (document, None))
        .collect::<Vec<_>>();
    Registry::from_documents(&read("registry/facets"), &capabilities).unwrap()
}

/// RFC 7386 JSON merge patch (objects merge, `null` removes, anything else replaces).
fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let target = target.as_object_mut().unwrap();
    for (key, value) in patch {
        if value.is_null() {
            target.remove(key);
        } else {
            merge(target.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

fn envelope_of(case: &Value) -> Value {
    if let Some(envelope) = case.get("envelope") {
        return envelope.clone();
    }
    let example = case["example"]
        .as_str()
        .expect("a case names `example` or `envelope`");
    let path = repository(&format!("registry/examples/{example}"));
    let mut envelope: Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    if let Some(patch) = case.get("merge") {
        merge(&mut envelope, patch);
    }
    envelope
}

fn diagnostic_summary(diagnostic: &PlanDiagnostic) -> Value {
    json!({
        "cause": diagnostic.cause,
        "constraintId": diagnostic.constraint_id,
        "severity": diagnostic.severity,
        "nodeId": diagnostic.node_id,
    })
}

fn bundle_summary(bundle: &DiagnosticsBundle) -> Value {
    json!({
        "status": bundle.status,
        "satisfactionScore": (bundle.satisfaction_score * 1000.0).round() / 1000.0,
        "failures": bundle.failures.iter().map(diagnostic_summary).collect::<Vec<_>>(),
        "warnings": bundle.warnings.iter().map(diagnostic_summary).collect::<Vec<_>>(),
        "infos": bundle.infos.iter().map(diagnostic_summary).collect::<Vec<_>>(),
    })
}

/// What a case's plan looks like, in the words a reviewer reads.
fn plan_summary(envelope: &Value, registry: &Registry) -> Value {
    let envelope = TaskEnvelope::parse_value(envelope).unwrap();
    match plan_deterministically(&envelope, registry) {
        Ok(plan) => {
            let bundle = validate_plan(&plan, &envelope, registry, &ValidatorCache::new());
            json!({
                "planned": true,
                "nodes": plan.nodes.iter().map(|node| json!({
                    "nodeId": node.node_id,
                    "capabilityId": node.capability_id,
                    "kind": node.kind,
                    "agentType": node.agent_type(),
                    "derived": node.derived,
                    "inputs": node.input_facets,
                    "outputs": node.output_facets,
                })).collect::<Vec<_>>(),
                "edges": plan.edges.iter().map(|edge| format!("{} -[{}]-> {}", edge.from, edge.facet, edge.to)).collect::<Vec<_>>(),
                "diagnostics": bundle_summary(&bundle),
            })
        }
        Err(diagnostics) => json!({
            "planned": false,
            "diagnostics": bundle_summary(&rejected_bundle(diagnostics)),
        }),
    }
}

/// Plans every case and compares (or, with the update switch, rewrites) its snapshot.
fn check(cases: &Path) {
    let update = std::env::var("BATON_UPDATE_SNAPSHOTS").is_ok_and(|value| value == "1");
    let registry = registry();
    let mut differences = Vec::new();
    let case_files: Vec<PathBuf> = sorted_files(cases, ".json")
        .into_iter()
        .filter(|path| !path.to_string_lossy().ends_with(".snap.json"))
        .collect();
    assert!(case_files.len() >= 10, "cases found: {}", case_files.len());
    for case_path in case_files {
        let case: Value = serde_json::from_str(&std::fs::read_to_string(&case_path).unwrap())
            .unwrap_or_else(|error| panic!("{}: {error}", case_path.display()));
        let summary = plan_summary(&envelope_of(&case), &registry);
        let rendered = format!("{}\n", serde_json::to_string_pretty(&summary).unwrap());
        let snapshot_path = case_path.with_extension("snap.json");
        let stored = std::fs::read_to_string(&snapshot_path).unwrap_or_default();
        if stored != rendered {
            if update {
                std::fs::write(&snapshot_path, &rendered).unwrap();
            } else {
                differences.push(format!(
                    "{}: plan summary differs from {}\n--- stored\n{stored}\n--- now\n{rendered}",
                    case_path.display(),
                    snapshot_path.display()
                ));
            }
        }
    }
    assert!(
        differences.is_empty(),
        "{}\n(rerun with BATON_UPDATE_SNAPSHOTS=1 to accept)",
        differences.join("\n")
    );
}

#[test]
fn every_planner_case_matches_its_snapshot() {
    check(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/planner_cases"));
}
