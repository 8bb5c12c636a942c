//! Runnable examples of mensageria: `cargo run --example enfileirar` (enqueue and show the
//! saída) and `cargo run --example demo` (two apps over real HTTP under faults; its logic is
//! [`demo`], so that a test can run it small).

pub mod demo;

/// The project's README, whose Rust blocks run as this crate's doctests (this crate depends on
/// `mensageria-core`, `mensageria-axum` and `mensageria-nats`, which the examples use). Each
/// published crate has a README of its own for its crate page.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct Readme;

/// The guide (`docs/guide/src/`), one hidden module per chapter, so that every chapter's Rust
/// blocks run as doctests the way the README's do (`no_run` and `ignore` blocks as marked).
/// `tests/guia.rs` fails when a chapter of `SUMMARY.md` is missing here.
#[cfg(doctest)]
pub mod guia {
    #[doc = include_str!("../../docs/guide/src/introduction.md")]
    pub mod introduction {}
    #[doc = include_str!("../../docs/guide/src/getting-started.md")]
    pub mod getting_started {}
    #[doc = include_str!("../../docs/guide/src/sending.md")]
    pub mod sending {}
    #[doc = include_str!("../../docs/guide/src/receiving.md")]
    pub mod receiving {}
    #[doc = include_str!("../../docs/guide/src/ordering.md")]
    pub mod ordering {}
    #[doc = include_str!("../../docs/guide/src/batches.md")]
    pub mod batches {}
    #[doc = include_str!("../../docs/guide/src/contracts.md")]
    pub mod contracts {}
    #[doc = include_str!("../../docs/guide/src/fan-out.md")]
    pub mod fan_out {}
    #[doc = include_str!("../../docs/guide/src/deploying.md")]
    pub mod deploying {}
    #[doc = include_str!("../../docs/guide/src/operating.md")]
    pub mod operating {}
    #[doc = include_str!("../../docs/guide/src/observing.md")]
    pub mod observing {}
    #[doc = include_str!("../../docs/guide/src/testing.md")]
    pub mod testing {}
    #[doc = include_str!("../../docs/guide/src/guarantees.md")]
    pub mod guarantees {}
    #[doc = include_str!("../../docs/guide/src/glossary.md")]
    pub mod glossary {}
}
