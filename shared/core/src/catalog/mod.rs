//! The registry as data: facets, capabilities, tools, context types, the chat agent, the model
//! catalog (providers and models) and per-tenant settings, loaded and checked with JSON paths; the JSON Schemas of its files; the read-only
//! `registry_search` builtin; what recent calls say of each capability
//! (`capability_health`), which orders an escalation's candidates.

pub mod capability_health;
pub mod contexts;
pub mod envelope_examples;
pub mod model_catalog;
pub mod registry;
pub mod registry_schemas;
pub mod registry_search;
pub mod tenant_settings;
pub mod tools;
