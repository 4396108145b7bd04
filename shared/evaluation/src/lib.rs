//! `baton-evaluation`: what an evaluation makes of its runs, without I/O.
//! The shells (`baton eval`, `baton eval compare`, `POST /evaluations`) run
//! the examples of a dataset (`baton_core::contracts::dataset`) and hand each settled
//! run here:
//!
//! - `checks`: an example's deterministic checks (status, contract,
//!   JSONLogic assertions, mentions, cost, duration) and its judge check;
//!   the judge panel request built from the dataset's panel template.
//! - `results`: the results line, one JSON object per example, the only
//!   thing `compare` reads.
//! - `statistics`: nearest-rank percentiles, means, a seeded bootstrap
//!   interval, the paired bootstrap and the exact sign test.
//! - `summary`: pass rate, mean judge score with its 95 % interval, cost
//!   and duration percentiles of one results file.
//! - `compare`: two results files paired by example id: flips, score and
//!   cost changes, and which differences are regressions under `FailOn`.
//! - `report`: the comparison as one self-contained HTML page (table and a
//!   score histogram per side as inline SVG, links to each run's viewer).
//! - `served`: an evaluation a server runs: its request (the dataset inline)
//!   and the record it keeps.
//!
//! Invariants:
//! - No I/O and no clock: durations, costs and scores come in with the run.
//! - Every figure replays: the bootstrap's resampling is seeded.
//! - A check that cannot run fails, saying why; it never passes silently.
//! - A difference in judge scores is a regression only when it exceeds its
//!   threshold and its paired bootstrap interval lies wholly below zero; a
//!   pass/fail flip is exact and always listed.

pub mod checks;
pub mod compare;
pub mod report;
pub mod results;
pub mod served;
pub mod statistics;
pub mod summary;
