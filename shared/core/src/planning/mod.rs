//! Plans: the plan graph and what runs each node, the deterministic planner (selection, variants,
//! normalization), the LLM planner's request and answer, the validator, a chat message's plan,
//! and plans drawn as Mermaid or DOT.

mod capability_needs;
pub mod chat_plan;
pub mod escalation_targets;
pub mod llm_planner;
pub mod model_choice;
pub mod normalization;
mod partial_outputs;
pub mod plan;
pub mod plan_picture;
pub mod planner;
mod planning_context;
pub mod policy_conditions;
pub mod preview;
pub mod relevance;
pub mod selection;
pub mod turn_decisions;
pub mod validator;
pub mod variants;
