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

pub mod engine;

pub mod basics;
pub mod catalog;
pub mod contracts;
pub mod planning;
pub mod records;
pub mod state;
pub mod wire;

// The parts keep their paths (`baton_core::run`, `crate::planner`, …).
pub use basics::{
    claims, codes, credentials, error, ids, instant, logic, redaction, schema, status,
    trace_context, usage,
};
pub use catalog::{contexts, model_catalog, registry, registry_schemas, registry_search, tools};
pub use contracts::{
    capability, compiler, contract, dataset, diagnostics, envelope, facet, legacy_policies,
    model_request, panels, policies,
};
pub use planning::{
    chat_plan, escalation_targets, llm_planner, model_choice, normalization, plan, plan_picture,
    planner, policy_conditions, preview, selection, validator, variants,
};
pub use records::{
    agents, audit, chat, conversation, entries, governance, notifications, schedules, thread_lane,
    thread_listing,
};
pub use state::{context, listing, plan_tool, replan_cause, run, tasks};
pub use wire::{event, frame_payload, frames, hooks};

pub use error::CoreError;
