//! The gate's rules on counts given here (the benches' own runs are the
//! CI script's: `scripts/check-instruction-budgets.sh` runs them, and runs
//! them again with a slowed step to see the gate fail).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::collections::BTreeMap;

use baton_instruction_gate::{Budgets, Measured, Standing, check, instructions_in_summary};
use serde_json::json;

fn budgets() -> Budgets {
    Budgets {
        tolerance_percent: 2.0,
        instructions: BTreeMap::from([
            ("node_step".into(), 100_000),
            ("plan_step".into(), 1_000_000),
        ]),
        sqlite_node_step_syscalls: BTreeMap::from([("fsync".into(), 1), ("pwrite64".into(), 30)]),
    }
}

fn measured(node_step: u64, plan_step: u64, fsync: u64) -> Measured {
    Measured {
        instructions: BTreeMap::from([
            ("node_step".into(), node_step),
            ("plan_step".into(), plan_step),
        ]),
        sqlite_node_step_syscalls: BTreeMap::from([
            ("fsync".into(), fsync),
            ("pwrite64".into(), 30),
        ]),
    }
}

fn standing_of<'a>(verdict: &'a baton_instruction_gate::Verdict, path: &str) -> &'a Standing {
    &verdict
        .rows
        .iter()
        .find(|row| row.path == path)
        .unwrap()
        .standing
}

#[test]
fn counts_within_two_percent_either_way_pass() {
    let verdict = check(&budgets(), &measured(101_999, 980_001, 1));
    assert!(verdict.passed(), "{}", verdict.render(2.0));
}

#[test]
fn a_path_three_percent_over_fails_naming_it_and_the_others_stay_ok() {
    let verdict = check(&budgets(), &measured(103_000, 1_000_000, 1));
    assert!(!verdict.passed());
    assert_eq!(standing_of(&verdict, "node_step"), &Standing::Over);
    assert_eq!(standing_of(&verdict, "plan_step"), &Standing::Within);
    let table = verdict.render(2.0);
    assert!(
        table.contains("| node_step | 100000 | 103000 | 1.0300 | OVER BUDGET by more than 2% |"),
        "{table}"
    );
}

#[test]
fn a_faster_path_must_lower_its_budget() {
    let verdict = check(&budgets(), &measured(100_000, 900_000, 1));
    assert_eq!(standing_of(&verdict, "plan_step"), &Standing::Under);
    assert!(!verdict.passed());
}

#[test]
fn one_more_fsync_fails_the_gate() {
    let verdict = check(&budgets(), &measured(100_000, 1_000_000, 2));
    assert_eq!(
        standing_of(&verdict, "sqlite_node_step syscalls: fsync"),
        &Standing::Over
    );
}

#[test]
fn a_path_not_measured_or_not_budgeted_fails() {
    let mut partial = measured(100_000, 1_000_000, 1);
    partial.instructions.remove("plan_step");
    partial.instructions.insert("judge_round".into(), 5);
    let verdict = check(&budgets(), &partial);
    assert_eq!(standing_of(&verdict, "plan_step"), &Standing::NotMeasured);
    assert_eq!(standing_of(&verdict, "judge_round"), &Standing::NoBudget);
}

#[test]
fn a_summary_gives_its_total_instructions_first_and_later_runs() {
    let first = json!({"function_name": "node_step", "profiles": [{"tool": "Callgrind",
        "summaries": {"total": {"summary": {"Callgrind": {"Ir": {"metrics": {"Left": {"Int": 84146}}}}}}}}]});
    let later = json!({"function_name": "node_step", "profiles": [{"tool": "Callgrind",
        "summaries": {"total": {"summary": {"Callgrind": {"Ir": {"metrics": {"Both": [{"Int": 84160}, {"Int": 84146}]}}}}}}}]});
    assert_eq!(
        instructions_in_summary(&first).unwrap(),
        ("node_step".into(), 84146)
    );
    assert_eq!(
        instructions_in_summary(&later).unwrap(),
        ("node_step".into(), 84160)
    );
    let empty = json!({"function_name": "node_step", "profiles": []});
    assert!(
        instructions_in_summary(&empty)
            .unwrap_err()
            .contains("no Callgrind profile")
    );
}
