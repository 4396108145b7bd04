//! What a run keeps between its steps, beside the plan: agent sessions and their conversations,
//! run entries (what lives beside the run item), the chat turn, governance (fired policies,
//! holds, timers), completion notifications, what a completed run remembered, and chat threads' lanes and listings.

pub mod agents;
pub mod audit;
pub mod chat;
pub mod conversation;
pub mod entries;
pub mod governance;
pub mod notifications;
pub mod remembered;
pub mod schedules;
pub mod thread_lane;
pub mod thread_listing;
