//! What a crash must never break, checked the same way for every path
//! that kills a worker (`baton serve` on SQLite or DynamoDB + SQS, the
//! `step` Lambda under an emulated Runtime API).

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
