use mensageria_core::{ContextoEnvio, FalhaEnvio, enviador};

struct SemSerde;

#[enviador(tipo = "sem-serde")]
async fn enviar(_e: SemSerde, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    Ok(())
}

fn main() {}
