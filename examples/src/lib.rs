//! Runnable examples of mensageria; see `cargo run --example enfileirar`.
