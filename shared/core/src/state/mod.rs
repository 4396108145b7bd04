//! The run state and what is read from it: the run, its node ledger and step messages, the
//! quality of its delivered output,
//! human tasks it implies, its listing, the context a node's model call is built from, and an
//! `agent_create_plan` call read into a child envelope; the stored state's
//! format version and its migrations.

pub mod context;
pub mod context_budget;
pub mod delivered_quality;
pub mod listing;
pub mod plan_tool;
pub mod replan_cause;
pub mod run;
pub mod run_format;
pub mod step_message;
pub mod stored_format;
pub mod tasks;
