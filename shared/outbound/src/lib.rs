//! `baton-outbound`: every outbound URL a caller or the registry can
//! influence (HTTP tools, MCP over HTTP, webhooks) goes through this guard.
//!
//! - `address`: which IP addresses are never dialled (loopback, private,
//!   link-local, unique-local, CGNAT, multicast, unspecified, broadcast,
//!   documentation, benchmarking, reserved, cloud metadata; IPv4 addresses
//!   embedded in IPv6 — mapped, compatible, NAT64, 6to4 — are judged as IPv4).
//! - `guard`: checks a URL (https only; http only to allow-listed hosts, for
//!   local development; no credentials in the URL), resolves its host and
//!   checks every address, and returns the address to pin the connection to.
//! - `fetch`: the guarded client: each hop checked and pinned, redirects
//!   followed by hand and re-checked, the response's size and time capped
//!   (read whole, or streamed with the size cap over the stream).
//! - `webhook`: signed JSON POSTs (HMAC-SHA256 over `{timestamp}.{body}`),
//!   no redirect followed; the check a receiver makes.
//!
//! Invariants: no connection is made to an address that was not checked
//! (the connection is pinned to it, so a second DNS answer cannot swap it);
//! a host resolving to any refused address is refused whole; allow-listed
//! hosts are exempt from the address check (they exist for local
//! development) and only they may use http.

pub mod address;
pub mod fetch;
pub mod guard;
pub mod webhook;

pub use fetch::{GuardedClient, GuardedResponse, GuardedStream};
pub use guard::{
    CheckedTarget, OutboundPolicy, OutboundRefusal, ResolveError, Resolver, SystemResolver, check,
};
