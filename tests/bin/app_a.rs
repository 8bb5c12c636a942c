//! Child app `app-a` of the fault suite: a relay that owns tipo `faltas.a` only.

#[path = "app_filho.rs"]
mod app_filho;

use mensageria_core::{ContextoEnvio, Destino, FalhaEnvio, enviador};

#[derive(serde::Serialize, serde::Deserialize)]
struct Evento {
    n: i64,
}

#[enviador(tipo = "faltas.a")]
async fn enviar(evento: Evento, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Destino>()?.postar(&evento, ctx).await
}

fn main() {
    app_filho::rodar("app-a");
}
