//! Nothing to link: the compile-time guarantees live in `tests/compilacao.rs` with `ui/erro/` (what must
//! not compile) and `tests/compila/` (what must).
