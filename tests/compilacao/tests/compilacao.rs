//! Compile-time guarantees: every mistake a user can make with `#[enviador]`, `enfileirar` or
//! `#[receptor]` fails to compile with a message that says what to do. Snapshots in
//! `ui/erro/*.stderr`; regenerate with `TRYBUILD=overwrite` and read the diff as a user would.
//!
//! What must compile is not here: `tests/compila/*.rs` are test programs of their own (built
//! with the workspace's dependencies; with a passing case, trybuild builds every dependency
//! again with code generation, 4.4 min of CI, where compile-fail cases only check them).

#[test]
fn erros_de_compilacao() {
    let casos = trybuild::TestCases::new();
    casos.compile_fail("ui/erro/*.rs");
}
