//! Nothing to link: the compile-time guarantees live in `tests/compilacao.rs` and `ui/`.
