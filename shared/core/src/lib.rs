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

pub mod agents;
pub mod capability;
pub mod chat;
pub mod chat_plan;
pub mod claims;
pub mod codes;
pub mod compiler;
pub mod context;
pub mod contexts;
pub mod contract;
pub mod conversation;
pub mod diagnostics;
pub mod engine;
pub mod entries;
pub mod envelope;
pub mod error;
pub mod event;
pub mod facet;
pub mod frames;
pub mod governance;
pub mod hooks;
pub mod instant;
pub mod listing;
pub mod llm_planner;
pub mod logic;
pub mod normalization;
pub mod notifications;
pub mod panels;
pub mod plan;
pub mod plan_picture;
pub mod plan_tool;
pub mod planner;
pub mod policies;
pub mod pricing;
pub mod redaction;
pub mod registry;
pub mod registry_schemas;
pub mod registry_search;
pub mod run;
pub mod schema;
pub mod selection;
pub mod status;
pub mod tasks;
pub mod tools;
pub mod usage;
pub mod validator;
pub mod variants;

pub use error::CoreError;
