//! Runnable examples of mensageria: `cargo run --example enfileirar` (enqueue and show the
//! saída) and `cargo run --example demo` (two apps over real HTTP under faults; its logic is
//! [`demo`], so that a test can run it small).

pub mod demo;

/// The project's README, whose Rust blocks run as this crate's doctests (this crate depends on
/// both `mensageria-core` and `mensageria-axum`, which the README's examples use). Each
/// published crate has a README of its own for its crate page.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct Readme;
