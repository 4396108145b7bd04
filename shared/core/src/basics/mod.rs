//! The leaves every other part reads: time (`instant`), the error enum, failure and warning codes,
//! claim keys, credentials by reference, typed ids and the keys stores address runs and threads by (`ids`), run and node statuses, W3C trace context, token usage, JSON Schema compilation, JSONLogic truth,
//! redaction. They import nothing else of the crate.

pub mod claims;
pub mod codes;
pub mod credentials;
pub mod error;
pub mod ids;
pub mod instant;
pub mod logic;
pub mod redaction;
pub mod schema;
pub mod status;
pub mod trace_context;
pub mod usage;
