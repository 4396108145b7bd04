//! `baton-instruction-gate [--update] [--budgets FILE] [--home DIR]`:
//! prints every hot path's budget and measure, and exits 1 when one is
//! past its budget (0 when all hold, 2 when the measurements cannot be
//! read). `--update` writes the measured counts as the new budgets.

use std::path::PathBuf;
use std::process::ExitCode;

use baton_instruction_gate::{Budgets, check, read_measured, updated};

fn repository_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn main() -> ExitCode {
    let mut update = false;
    let mut budgets_path =
        repository_root().join("shared/runtime/benches/instruction_budgets.json");
    let mut home = std::env::var_os("GUNGRAUN_HOME")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR")
                .map(|target| PathBuf::from(target).join("gungraun"))
        })
        .unwrap_or_else(|| repository_root().join("target/gungraun"));
    let mut arguments = std::env::args().skip(1);
    while let Some(argument) = arguments.next() {
        match argument.as_str() {
            "--update" => update = true,
            "--budgets" => match arguments.next() {
                Some(path) => budgets_path = PathBuf::from(path),
                None => return usage("--budgets needs a file"),
            },
            "--home" => match arguments.next() {
                Some(path) => home = PathBuf::from(path),
                None => return usage("--home needs a folder"),
            },
            other => return usage(&format!("unknown argument `{other}`")),
        }
    }
    let budgets: Budgets = match std::fs::read_to_string(&budgets_path)
        .map_err(|error| error.to_string())
        .and_then(|text| serde_json::from_str(&text).map_err(|error| error.to_string()))
    {
        Ok(budgets) => budgets,
        Err(error) => return usage(&format!("{}: {error}", budgets_path.display())),
    };
    let measured = match read_measured(&home) {
        Ok(measured) => measured,
        Err(error) => return usage(&error),
    };
    if update {
        let text = serde_json::to_string_pretty(&updated(&budgets, &measured)).unwrap_or_default();
        if let Err(error) = std::fs::write(&budgets_path, format!("{text}\n")) {
            return usage(&format!("{}: {error}", budgets_path.display()));
        }
        println!("budgets written to {}", budgets_path.display());
    }
    let budgets: Budgets = if update {
        updated(&budgets, &measured)
    } else {
        budgets
    };
    let verdict = check(&budgets, &measured);
    print!("{}", verdict.render(budgets.tolerance_percent));
    if verdict.passed() {
        println!("instruction gate: every path within its budget");
        ExitCode::SUCCESS
    } else {
        println!(
            "instruction gate: FAILED (budgets: {}; measures: {})",
            budgets_path.display(),
            home.display()
        );
        ExitCode::from(1)
    }
}

fn usage(message: &str) -> ExitCode {
    eprintln!("baton-instruction-gate: {message}");
    ExitCode::from(2)
}
