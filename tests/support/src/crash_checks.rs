//! What a crash must never break, checked the same way for every path
//! that kills a worker (`baton serve` on SQLite or DynamoDB + SQS, the
//! `step` Lambda under an emulated Runtime API), and the figures those
//! tests record for the durability report.

use serde_json::Value;

/// What a crash must never break, for one completed run's frames: ids
/// 1..n without a gap or repeat, one `start` and one terminal frame (a
/// `complete`), and exactly one `node_complete` per node of its plan.
pub fn assert_completed_exactly_once(run_id: &str, frames: &[Value]) {
    let ids: Vec<u64> = frames
        .iter()
        .map(|frame| frame["id"].as_u64().unwrap())
        .collect();
    assert_eq!(
        ids,
        (1..=ids.len() as u64).collect::<Vec<_>>(),
        "{run_id}: frames are gapless"
    );
    assert_eq!(frames.last().unwrap()["type"], "complete", "{run_id}");
    let count = |kind: &str| frames.iter().filter(|frame| frame["type"] == kind).count();
    assert_eq!(count("start"), 1, "{run_id}: one start");
    assert_eq!(
        count("complete") + count("error"),
        1,
        "{run_id}: one terminal frame"
    );
    let plan = frames
        .iter()
        .find(|frame| frame["type"] == "plan_generated")
        .expect("a plan");
    let planned = plan["payload"]["nodes"].as_array().map_or(0, Vec::len);
    let mut completions: std::collections::BTreeMap<String, usize> = Default::default();
    for frame in frames
        .iter()
        .filter(|frame| frame["type"] == "node_complete")
    {
        *completions
            .entry(frame["nodeId"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    assert!(planned > 0, "{run_id}: the plan names its nodes: {plan}");
    assert_eq!(completions.len(), planned, "{run_id}: every node completed");
    assert!(
        completions.values().all(|count| *count == 1),
        "{run_id}: one node_complete per node: {completions:?}"
    );
}

// The durability report's figures: each test that kills, duplicates or
// delays writes one JSON file (what it did, what it checked, what it
// measured) into `BATON_DURABILITY_FIGURES` when that is set;
// `scripts/durability-report.sh` sets it, runs those tests and renders
// `docs/durability.md` from the files (`scripts/test.sh` renders one into
// the target directory after every suite). Unset, nothing is written.

/// Records one fault scenario's figures under `scenario` (a file name).
/// `figures` says the store, the path, the faults, the runs and the
/// measured times; the date and the checks every history passed are added.
pub fn record_figures(scenario: &str, mut figures: Value) {
    let Some(folder) = std::env::var_os("BATON_DURABILITY_FIGURES") else {
        return;
    };
    let folder = std::path::PathBuf::from(folder);
    if let Some(object) = figures.as_object_mut() {
        object.insert("scenario".into(), Value::from(scenario));
        object.insert(
            "recordedAt".into(),
            Value::from(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|since| since.as_secs())
                    .unwrap_or(0),
            ),
        );
    }
    let written = std::fs::create_dir_all(&folder).and_then(|()| {
        std::fs::write(
            folder.join(format!("{scenario}.json")),
            serde_json::to_vec_pretty(&figures).unwrap_or_default(),
        )
    });
    if let Err(error) = written {
        eprintln!("durability figures for {scenario} not written: {error}");
    }
}

/// The checks `crash_checks::assert_completed_exactly_once` makes of every
/// run's history, as the report names them.
pub const EXACTLY_ONCE_HISTORY_CHECKS: [&str; 4] = [
    "frame ids 1..n, no gap, no repeat",
    "one start frame",
    "exactly one terminal frame (complete)",
    "one node_complete per planned node",
];
