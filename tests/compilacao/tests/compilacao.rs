//! Compile-time guarantees: every mistake a user can make with `#[enviador]`, `enfileirar` or
//! `#[receptor]` fails to compile with a message that says what to do. Snapshots in
//! `ui/*.stderr`; regenerate with `TRYBUILD=overwrite` and read the diff as a user would.

#[test]
fn erros_de_compilacao() {
    let casos = trybuild::TestCases::new();
    casos.pass("ui/ok/*.rs");
    casos.compile_fail("ui/erro/*.rs");
}
