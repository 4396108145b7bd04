//! `baton-instruction-gate`: holds Baton's hot paths to their budgets.
//!
//! The measurements come from two benches of `baton-runtime`: `instructions`
//! (gungraun under Valgrind's Callgrind: one `summary.json` per path under
//! `<gungraun home>/baton-runtime/instructions/`) and `sqlite_step_syscalls`
//! (strace: `<gungraun home>/sqlite_step_syscalls.json`). The budgets are
//! `shared/runtime/benches/instruction_budgets.json`, checked in.
//!
//! Rules ([`check`]):
//! - a path's instructions more than `tolerancePercent` (2) over its budget
//!   fail the gate; more than that under it fail it too, asking for the
//!   budget to be lowered in the same change (`--update`);
//! - a system call counted more often than its budget fails it (counts are
//!   exact);
//! - a budgeted path that was not measured, or a measured path without a
//!   budget, fails it.
//!
//! Invariant: the verdict names every path with its budget, its measure and
//! its ratio; nothing is skipped silently.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The budgets file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Budgets {
    /// How far (percent) a count may move either way before the gate fails.
    pub tolerance_percent: f64,
    /// Instructions per path (the bench function's name).
    pub instructions: BTreeMap<String, u64>,
    /// System calls of one SQLite node step, by name.
    pub sqlite_node_step_syscalls: BTreeMap<String, u64>,
}

/// What one bench run measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measured {
    pub instructions: BTreeMap<String, u64>,
    pub sqlite_node_step_syscalls: BTreeMap<String, u64>,
}

/// How one path fared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    Within,
    Over,
    /// Faster past the tolerance: lower the budget.
    Under,
    NotMeasured,
    NoBudget,
}

/// One row of the verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub path: String,
    pub budget: Option<u64>,
    pub measured: Option<u64>,
    pub standing: Standing,
}

/// Every path's row.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub rows: Vec<Row>,
}

impl Verdict {
    pub fn passed(&self) -> bool {
        self.rows.iter().all(|row| row.standing == Standing::Within)
    }

    /// The rows as a Markdown table, then what to do about each failure.
    pub fn render(&self, tolerance_percent: f64) -> String {
        let mut text = String::from(
            "| path | budget | measured | ratio | verdict |\n| --- | ---: | ---: | ---: | --- |\n",
        );
        let number = |value: Option<u64>| value.map_or("-".to_string(), |value| value.to_string());
        for row in &self.rows {
            let ratio = match (row.budget, row.measured) {
                (Some(budget), Some(measured)) if budget > 0 => {
                    format!("{:.4}", measured as f64 / budget as f64)
                }
                _ => "-".to_string(),
            };
            let verdict = match row.standing {
                Standing::Within => "ok".to_string(),
                Standing::Over => format!("OVER BUDGET by more than {tolerance_percent}%"),
                Standing::Under => format!(
                    "under budget by more than {tolerance_percent}%: lower the budget (--update) in this change"
                ),
                Standing::NotMeasured => "NOT MEASURED: the bench did not run this path".into(),
                Standing::NoBudget => "NO BUDGET: add it (--update)".into(),
            };
            text.push_str(&format!(
                "| {} | {} | {} | {ratio} | {verdict} |\n",
                row.path,
                number(row.budget),
                number(row.measured)
            ));
        }
        text
    }
}

fn standing(budget: u64, measured: u64, tolerance_percent: f64, exact: bool) -> Standing {
    if exact {
        return if measured > budget {
            Standing::Over
        } else if measured < budget {
            Standing::Under
        } else {
            Standing::Within
        };
    }
    let allowed = budget as f64 * tolerance_percent / 100.0;
    let difference = measured as f64 - budget as f64;
    if difference > allowed {
        Standing::Over
    } else if -difference > allowed {
        Standing::Under
    } else {
        Standing::Within
    }
}

fn rows(
    prefix: &str,
    budgets: &BTreeMap<String, u64>,
    measured: &BTreeMap<String, u64>,
    tolerance_percent: f64,
    exact: bool,
) -> Vec<Row> {
    let mut names: Vec<&String> = budgets.keys().chain(measured.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|name| {
            let budget = budgets.get(name).copied();
            let value = measured.get(name).copied();
            let standing = match (budget, value) {
                (Some(budget), Some(value)) => standing(budget, value, tolerance_percent, exact),
                (Some(_), None) => Standing::NotMeasured,
                _ => Standing::NoBudget,
            };
            Row {
                path: format!("{prefix}{name}"),
                budget,
                measured: value,
                standing,
            }
        })
        .collect()
}

/// Every budgeted and every measured path, judged.
pub fn check(budgets: &Budgets, measured: &Measured) -> Verdict {
    let mut all = rows(
        "",
        &budgets.instructions,
        &measured.instructions,
        budgets.tolerance_percent,
        false,
    );
    all.extend(rows(
        "sqlite_node_step syscalls: ",
        &budgets.sqlite_node_step_syscalls,
        &measured.sqlite_node_step_syscalls,
        budgets.tolerance_percent,
        true,
    ));
    Verdict { rows: all }
}

/// The budgets set to what was measured (the tolerance kept).
pub fn updated(budgets: &Budgets, measured: &Measured) -> Budgets {
    Budgets {
        tolerance_percent: budgets.tolerance_percent,
        instructions: measured.instructions.clone(),
        sqlite_node_step_syscalls: measured.sqlite_node_step_syscalls.clone(),
    }
}

/// The instruction count of one gungraun `summary.json` (Callgrind's `Ir`,
/// the run's total): its bench function's name and the count.
pub fn instructions_in_summary(summary: &serde_json::Value) -> Result<(String, u64), String> {
    let name = summary["function_name"]
        .as_str()
        .ok_or("a summary without `function_name`")?
        .to_string();
    let profile = summary["profiles"]
        .as_array()
        .and_then(|profiles| {
            profiles
                .iter()
                .find(|profile| profile["tool"] == "Callgrind")
        })
        .ok_or_else(|| format!("{name}: no Callgrind profile in the summary"))?;
    let metrics = &profile["summaries"]["total"]["summary"]["Callgrind"]["Ir"]["metrics"];
    // `Left` (no earlier run), or `Both` (this run, the earlier one).
    let count = metrics["Left"]["Int"]
        .as_u64()
        .or_else(|| metrics["Both"][0]["Int"].as_u64())
        .ok_or_else(|| format!("{name}: no instruction count (Ir) in the summary: {metrics}"))?;
    Ok((name, count))
}

/// What the benches left under `home` (gungraun's output folder).
pub fn read_measured(home: &Path) -> Result<Measured, String> {
    let mut measured = Measured::default();
    let instructions = home.join("baton-runtime").join("instructions");
    let mut folders = vec![instructions.clone()];
    while let Some(folder) = folders.pop() {
        let entries = std::fs::read_dir(&folder).map_err(|error| {
            format!(
                "{}: {error} (run `cargo bench -p baton-runtime --bench instructions -- --save-summary=json` first)",
                folder.display()
            )
        })?;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
            } else if path.file_name().is_some_and(|name| name == "summary.json") {
                let text = std::fs::read_to_string(&path)
                    .map_err(|error| format!("{}: {error}", path.display()))?;
                let summary: serde_json::Value = serde_json::from_str(&text)
                    .map_err(|error| format!("{}: {error}", path.display()))?;
                let (name, count) = instructions_in_summary(&summary)
                    .map_err(|error| format!("{}: {error}", path.display()))?;
                measured.instructions.insert(name, count);
            }
        }
    }
    let syscalls = home.join("sqlite_step_syscalls.json");
    let text = std::fs::read_to_string(&syscalls).map_err(|error| {
        format!(
            "{}: {error} (run `cargo bench -p baton-runtime --bench sqlite_step_syscalls` first)",
            syscalls.display()
        )
    })?;
    measured.sqlite_node_step_syscalls =
        serde_json::from_str(&text).map_err(|error| format!("{}: {error}", syscalls.display()))?;
    Ok(measured)
}
