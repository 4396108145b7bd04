//! Baton's developer sandbox, sans-IO: what a developer needs to write an
//! envelope, and a builder that writes one with them.
//!
//! - [`metadata`]: the registry as a developer reads it: its capabilities
//!   (what each consumes and produces), its facets (schema, who makes and
//!   reads each), the JSON Schemas of the envelope, a capability and a
//!   facet, the envelope's policies, and the example envelopes.
//! - [`drafting`]: the envelope builder. A conversation (the caller's
//!   messages, the builder's replies) is read from its first message every
//!   turn ([`conversation`]), so nothing is kept between turns: the
//!   objective, the outputs wanted (facets matched by words, [`goals`]),
//!   the inputs given ([`inputs`]: shaped by their facets' schemas and
//!   checked against them). The builder asks for what is missing, drafts the
//!   envelope, has it checked as a submission would be (the caller's
//!   [`drafting::EnvelopeCheck`]: `baton plan`'s checks and its plan), shows
//!   the plan and hands the envelope back once the caller confirms it.
//!
//! The builder is deterministic and reads only the registry: no model is
//! called, so it works offline and answers the same conversation the same
//! way. Its words for confirming and changing a draft are the builder's
//! own, not a domain's.
//!
//! Invariants:
//! - A drafted envelope is handed back as `ready` only when the caller's
//!   last message confirmed it and the check passed with a plan the
//!   validator does not reject.
//! - Every problem names the JSON path it is about: `$.messages[2].content`
//!   for a message that cannot be read, `$.inputs.FACET.field` for a value
//!   its facet's schema refuses, the check's own path for the envelope.
//! - Nothing is stored and nothing is called: a turn is a function of the
//!   registry, the conversation and the check.

pub mod conversation;
pub mod drafting;
pub mod goals;
pub mod inputs;
pub mod metadata;

pub use conversation::{DraftMessage, DraftProblem, DraftRequest, DraftRole};
pub use drafting::{DraftStage, DraftTurn, EnvelopeCheck, draft_turn};
pub use metadata::{SandboxMetadata, sandbox_metadata};
