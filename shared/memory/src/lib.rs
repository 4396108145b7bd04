//! `baton-memory`: what a tenant's runs learned, kept across runs and
//! threads, sans-IO. An item ([`item::MemoryItem`]) lives in a namespace
//! (a list of strings such as a client's and a subject's names) under a
//! key, with a JSON value, the text it is searched by, its provenance (the
//! run, node and attempt, or the person, that wrote it), its timestamps and
//! an optional expiry. [`search`] ranks a namespace's items for a query:
//! BM25 over their text always, fused (reciprocal rank fusion) with the
//! cosine similarity of their embeddings when the query and the items have
//! one. The stores keep the items (`baton-runtime`'s `MemoryStore` port and
//! its adapters); nothing here does I/O.
//!
//! Invariants:
//! - A namespace has 1 to [`item::MAX_NAMESPACE_DEPTH`] parts, each 1 to
//!   [`item::MAX_NAMESPACE_PART_CHARS`] characters with no control
//!   character; a key likewise; a check names the JSON path it refuses.
//! - Search is deterministic: equal inputs rank equally, ties broken by
//!   namespace and key.

pub mod item;
pub mod search;
