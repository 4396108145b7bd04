//! `baton-core`: the sans-IO heart of Baton.
//!
//! It owns the domain model (task envelope, output contract, policies, facets,
//! capability registrations, plan graph, run state), the typed event frames
//! (`frames`, one payload and constructor per type), the failure and warning
//! codes, the facet contract compiler, the deterministic and LLM planners, the
//! plan validator with its diagnostics merger, and the step engine
//! (`engine::begin_step` / `engine::resume_step`: the shell performs the
//! effects they ask for and commits the decisions they return).
//!
//! Invariants:
//! - No I/O of any kind: no tokio, no AWS, no HTTP, no file system. Time, ids
//!   and randomness come in as arguments so every decision replays in a test.
//! - No domain words: facet and capability names come from `registry/` data.
//! - Every JSON Schema is compiled by the `jsonschema` crate with remote and
//!   file `$ref` retrieval turned off.
//! - Every frame is built by a constructor in `frames`; its schema in
//!   `events/schemas/frames/` is generated from the same types.

//!
//! The root is curated: eight groups and the engine, each a folder with one
//! job, named in every path (`baton_core::state::run::RunState`,
//! `baton_core::basics::instant::Instant`), and the crate's error.
//!
//! | module | holds |
//! | --- | --- |
//! | `basics` | ids, instants, codes, errors, JSON Schema and JSONLogic, redaction, usage |
//! | `catalog` | the registry, model prices, tools, contexts, registry search |
//! | `contracts` | envelope, facets, capabilities, output contracts, policies, panels, the contract compiler |
//! | `planning` | plan graph, planners (deterministic, model), validator, variants, pictures |
//! | `records` | what a run keeps beside its state: audit, governance, conversations, schedules, threads |
//! | `state` | the run state, its listing, human tasks, context bundles |
//! | `wire` | event frames, their payloads, webhooks |
//! | `engine` | the step engine: `begin_step` / `resume_step` and the run's life cycle |

pub mod engine;

pub mod basics;
pub mod catalog;
pub mod contracts;
pub mod planning;
pub mod records;
pub mod state;
pub mod wire;

pub use basics::error::CoreError;
