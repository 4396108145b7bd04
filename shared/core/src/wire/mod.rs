//! What leaves the engine for readers: event frames (one payload and constructor per type, their
//! schemas generated from the same types) and their hook-event rendering.

pub mod event;
pub mod frame_payload;
pub mod frames;
pub mod hooks;
