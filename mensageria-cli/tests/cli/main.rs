//! The `mensageria` binary against real databases: each test gets its own PostgreSQL schema
//! (`DATABASE_URL`, default `postgres://postgres@127.0.0.1:5432/postgres`) or SQLite file,
//! plants rows with SQL, runs the command as an operator would and checks what it printed and
//! what it changed.

mod apps;
mod comum;
mod contratos;
mod doctor;
mod erros;
mod json;
mod mortas;
mod mortas_recebidas;
mod ordem;
mod purgar;
mod status;
mod texto_seguro;
