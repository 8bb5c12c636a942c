//! Axum integration of mensageria: the receiving side.
//!
//! This crate will hold the router of receptores (`#[receptor]`), the dedup-in-transaction
//! handler, bearer authentication, request ids, body limits and the OpenAPI document. Today it
//! only re-exports [`mensageria_core`], so applications can depend on it already.

pub use mensageria_core;
