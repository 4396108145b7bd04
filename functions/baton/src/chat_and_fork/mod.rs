//! `baton chat` (`chat_command`), `baton draft` (`draft_command`), and
//! `baton history` and `baton fork` (`fork_command`): a conversation on a
//! thread, a conversation that drafts an envelope (the developer
//! sandbox's builder), and a new run from a point of an earlier one.

pub mod chat_command;
pub mod draft_command;
pub mod fork_command;
