//! Child app `app-ordem` of the ordering suite: a relay replica that delivers `ordem.passo`
//! (ordered by entity) and nothing else.

#[path = "app_filho.rs"]
mod app_filho;

#[path = "../comum/ordem_passo.rs"]
mod ordem_passo;

fn main() {
    app_filho::rodar("app-ordem");
}
