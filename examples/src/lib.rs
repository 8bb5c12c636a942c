//! Runnable examples of mensageria: `cargo run --example enfileirar` (enqueue and show the
//! saída) and `cargo run --example demo` (two apps over real HTTP under faults; its logic is
//! [`demo`], so that a test can run it small).

pub mod demo;
