//! The shapes `#[receptor]` accepts: one field, a tuple, a call, a version, SQLite; the user's
//! function stays callable and a typed route composes with the user's own state.
use axum::extract::FromRef;
use mensageria_axum::{Estado, Rejeicao, receptor, rota};
use mensageria_core::sqlx::{Postgres, Sqlite, Transaction};
use serde::Deserialize;

#[derive(Deserialize, utoipa::ToSchema)]
pub struct Encerramento {
    pub cnpj: String,
    pub chave_mdfe: String,
}

#[derive(Deserialize)]
pub struct Mudou {
    pub entidade: u64,
    pub revisao: u32,
}

fn chave_de(e: &Encerramento) -> String {
    format!("{}:{}", e.cnpj, e.chave_mdfe)
}

#[receptor(tipo = "mdfe.encerramento", chave_natural = (evento.cnpj, evento.chave_mdfe))]
pub async fn encerrar(
    tx: &mut Transaction<'_, Postgres>,
    evento: Encerramento,
) -> Result<(), Rejeicao> {
    sqlx::query("SELECT $1")
        .bind(evento.cnpj)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

#[receptor(tipo = "mdfe.encerramento-chamada", chave_natural = chave_de(&evento))]
async fn por_chamada(
    _tx: &mut Transaction<'_, Postgres>,
    evento: Encerramento,
) -> Result<(), Rejeicao> {
    let _ = evento.chave_mdfe;
    Ok(())
}

#[receptor(tipo = "cadastro.mudou", chave_natural = evento.entidade, versao = evento.revisao)]
async fn mudou(_tx: &mut Transaction<'_, Sqlite>, evento: Mudou) -> Result<(), Rejeicao> {
    if evento.revisao == 0 {
        return Err(Rejeicao::permanente("revision 0 does not exist"));
    }
    Ok(())
}

#[derive(Clone)]
struct MeuEstado {
    m2m: Estado<Postgres>,
}

impl FromRef<MeuEstado> for Estado<Postgres> {
    fn from_ref(estado: &MeuEstado) -> Self {
        estado.m2m.clone()
    }
}

#[test]
fn compila() {
    // Generated unit structs, one per receptor.
    let _ = (ReceptorEncerrar, ReceptorPorChamada, ReceptorMudou);
    // A typed route in the user's own router, with the user's own state.
    let _rotas: axum::Router<MeuEstado> = axum::Router::new().route(
        "/eventos/encerramento",
        rota::<ReceptorEncerrar, MeuEstado>(),
    );
    // The user's function is still an ordinary async fn.
    let _futuro = async {
        let pool = sqlx::PgPool::connect_lazy("postgres://x").unwrap();
        let mut tx = pool.begin().await.unwrap();
        encerrar(
            &mut tx,
            Encerramento {
                cnpj: "1".into(),
                chave_mdfe: "2".into(),
            },
        )
        .await
    };
}

// Exact key parts of every kind: big integers, exact JSON text, options, lists, uuids.
#[derive(Deserialize)]
pub struct Exato {
    pub grande: u128,
    pub cru: Box<serde_json::value::RawValue>,
    pub talvez: Option<i64>,
    pub lista: Vec<String>,
    pub id: uuid::Uuid,
}

#[receptor(
    tipo = "chave.exata",
    chave_natural = (evento.grande, evento.cru, evento.talvez, evento.lista, evento.id)
)]
async fn exato(_tx: &mut Transaction<'_, Sqlite>, evento: Exato) -> Result<(), Rejeicao> {
    let _ = evento.grande;
    Ok(())
}
