//! Ordered delivery per key (opt-in): message n+1 of a key never starts before message n is
//! gone from the saída.
//!
//! A sender gives an **ordering key** (`chave_ordem`) to the messages that must keep their
//! order, either in the attribute (`#[enviador(tipo = "...", ordem = evento.pedido_id)]`, the
//! emitted impl provides the key of each payload) or at the call
//! ([`enfileirar_ordenado`](crate::enfileirar_ordenado)). Messages without one keep the
//! unordered behaviour and cost.
//!
//! **The guarantee.** For one key, the relay never starts delivering a message while an earlier
//! message of that key (earlier by enqueue order, decided in the database: `seq_ordem`) is in
//! the saída, whether pending, leased to a delivery in flight or waiting for a retry. It holds
//! across replicas, lease expiry and crashes because the claim itself checks it: a row is
//! claimable only when it is the head of its key (no row of the key with a smaller sequence in
//! the saída), one probe of the `(chave_ordem, seq_ordem)` index. Keys are independent: a key
//! whose head is in flight or retrying never holds back another key. Keys are compared byte for
//! byte and are shared by every tipo and every app on the schema, so prefix them with what they
//! identify and, when apps share a schema, whose they are (`"faturamento:pedido:42"`).
//!
//! **Why the scope is the schema.** One entity's steps are often several tipos (created, then
//! cancelled): a key shared across tipos keeps them in turn, which a per-tipo scope would lose,
//! and the saída records a row's tipo, not the app that enqueued it. The price: two apps using
//! the same key text order their messages together, so another app's stuck head holds yours.
//! [`operacoes::retidas`](crate::operacoes::retidas) counts such rows (`mensageria status`,
//! column HELD; `mensageria doctor` names the head's tipo) and
//! [`operacoes::fila_da_chave`](crate::operacoes::fila_da_chave) lists a key's queue
//! (`mensageria ordem mostrar <key>`).
//!
//! **Dead letters.** [`OrdemAposMorta`], set in the relay's
//! [`Config::com_ordem_apos_morta`](crate::relay::Config::com_ordem_apos_morta):
//! [`Bloquear`](OrdemAposMorta::Bloquear) (the default) keeps the later messages of a key whose
//! message died waiting until an operator replays the dead letter (it takes its original
//! sequence back and goes first) or discards it; [`Seguir`](OrdemAposMorta::Seguir) lets them
//! go (a later replay then arrives after them).
//!
//! **The cost.** On PostgreSQL an ordered enqueue takes a transaction-scoped advisory lock on its
//! key before drawing the sequence, so concurrent transactions enqueueing for the *same* key
//! wait for each other's commit (this is what makes the sequence order the commit order); two
//! transactions that enqueue for the same keys in opposite orders can deadlock (PostgreSQL
//! aborts one; enqueue keys in a fixed order).
//! Deliveries of one key are one at a time, each a round trip. The claim walks past the due
//! rows of keys whose head is in flight or retrying (one index probe each).
//!
//! **When a convergent receptor is better.** If the receiving side only needs the *latest*
//! state of an entity (a price, a status), give the receptor a `versao` instead: it applies a
//! newer version and ignores older ones whatever the arrival order, and the sender keeps full
//! parallelism and no key blocks. Use ordered delivery when every step must be applied in turn
//! (created before cancelled, a document before its closing).

/// What a dead letter of an ordered message does to the later messages of its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
#[doc(alias = "dead letter policy")]
pub enum OrdemAposMorta {
    /// The later messages of the key wait until an operator replays the dead letter (which goes
    /// first, in its original place) or discards it. Other keys are not affected.
    #[default]
    Bloquear,
    /// The next message of the key goes on as if the dead one had been delivered.
    Seguir,
}

/// The largest ordering key accepted, in bytes.
pub const LIMITE_CHAVE_ORDEM: usize = 1024;

/// A value that can be an ordering key: its text is exact (integers, strings, UUIDs), so two
/// different entities never share a key. Floats are not keys (their text is rounded).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be an ordering key",
    label = "not an integer, a string or a UUID",
    note = "an ordering key must be exact: use an integer, a `String`/`&str` or a `Uuid` field, \
            e.g. `ordem = evento.pedido_id` or `ordem = format!(\"pedido:{{}}\", evento.id)`"
)]
pub trait ChaveDeOrdem {
    /// The key's text.
    fn texto_da_chave(&self) -> String;
}

impl ChaveDeOrdem for str {
    fn texto_da_chave(&self) -> String {
        self.to_owned()
    }
}

impl ChaveDeOrdem for String {
    fn texto_da_chave(&self) -> String {
        self.clone()
    }
}

impl ChaveDeOrdem for uuid::Uuid {
    fn texto_da_chave(&self) -> String {
        self.to_string()
    }
}

impl<T: ChaveDeOrdem + ?Sized> ChaveDeOrdem for &T {
    fn texto_da_chave(&self) -> String {
        (**self).texto_da_chave()
    }
}

macro_rules! inteiros {
    ($($t:ty),*) => {$(
        impl ChaveDeOrdem for $t {
            fn texto_da_chave(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
inteiros!(
    i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize
);

/// The text of an ordering key; what `#[enviador(ordem = ...)]` calls.
pub fn chave_ordem<T: ChaveDeOrdem + ?Sized>(valor: &T) -> String {
    valor.texto_da_chave()
}

/// Checks an ordering key before anything is written: not blank (empty or whitespace only), no
/// control character (C0, DEL or C1: a NUL the database would refuse with its own error text,
/// an ESC, CR or LF that would reach every log line and terminal that prints the key), at most
/// [`LIMITE_CHAVE_ORDEM`] bytes.
pub(crate) fn validar(tipo: &str, chave: &str) -> Result<(), crate::erro::Erro> {
    let motivo = if chave.trim().is_empty() {
        "it is blank: empty or whitespace only"
    } else if chave.chars().any(char::is_control) {
        "it holds a control character (NUL, ESC, CR, LF, DEL, ...): keys are printable text"
    } else if chave.len() > LIMITE_CHAVE_ORDEM {
        "it is over 1024 bytes"
    } else {
        return Ok(());
    };
    Err(crate::erro::Erro::ChaveOrdemInvalida {
        tipo: tipo.to_owned(),
        motivo,
    })
}

#[cfg(test)]
mod testes {
    use super::validar;

    #[test]
    fn chaves_validas_e_recusadas() {
        for boa in ["pedido:42", "42", "a b", " pedido:7 ", "ação"] {
            assert!(validar("t.x", boa).is_ok(), "{boa:?}");
        }
        for ruim in [
            "", " ", "\t", "a\u{0}", "a\x1b[1m", "a\r", "a\n", "\u{7f}", "\u{85}",
        ] {
            assert!(validar("t.x", ruim).is_err(), "{ruim:?}");
        }
        assert!(validar("t.x", &"x".repeat(1024)).is_ok());
        assert!(validar("t.x", &"x".repeat(1025)).is_err());
    }
}
