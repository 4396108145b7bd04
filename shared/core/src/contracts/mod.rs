//! What callers and registrations promise: the task envelope and its output contract, facets and
//! the facet contract compiler, capability registrations (with their panel executors), policies,
//! plan diagnostics, the provider-neutral model request, what a run recalls and remembers, and the content rules answers are held to.

pub mod assignment;
pub mod capability;
mod compiled;
pub mod compiler;
pub mod content_rules;
pub mod contract;
pub mod dataset;
pub mod diagnostics;
pub mod envelope;
pub mod facet;
pub mod facet_widgets;
pub mod legacy_policies;
pub mod memory_use;
pub mod model_request;
pub mod panels;
pub mod policies;
