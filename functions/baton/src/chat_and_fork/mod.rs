//! `baton chat` (`chat_command`), and `baton history` and `baton fork`
//! (`fork_command`): a conversation on a thread, and a new run from a
//! point of an earlier one.

pub mod chat_command;
pub mod fork_command;
