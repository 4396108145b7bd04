//! `baton-http`: the HTTP API and SSE streams under `/api/v1/flex` (runs)
//! and `/api/v1/judge` (judge panel evaluations), as one
//! axum router shared by the `api` and `stream` functions and `baton serve`.
//!
//! It owns request parsing, who a request comes from (`auth`: static tokens
//! and OIDC JWTs become one `Principal`; what a page on another site may
//! not do), the scope each operation needs (`openapi::declared_scope`), the
//! audit trail of state-changing requests, tenant scoping, the error body
//! (`{"error": {"code", "message", "details"?}}`), and the SSE relay (replay
//! from `Last-Event-ID`, follow, heartbeats).
//!
//! Invariants: a page on another site changes nothing (JSON bodies only,
//! `Origin` checked, an anonymous server's `Host` checked) before any
//! credential is read; every route authenticates and checks its declared
//! scope before any store read (a route without one needs `admin`);
//! nothing below the edge reads a header or a token for identity; a run of
//! another tenant is a 404 on every route; a bad envelope is a 400/422
//! naming the JSON path and nothing is persisted for it; no route panics.

pub mod auth;
pub mod bodies;
pub mod error;
pub mod protocols;
mod routes;
pub mod server;
pub mod snapshot;
pub mod sse;
mod state;
mod trace_header;
pub mod viewer;

pub use auth::TokenAuthenticator;
pub use axum::Router;
pub use routes::{ApiState, HttpSettings, evaluation_port, openapi, router};
