//! What a convergent receptor's `versao = <expr>` may be: [`Versao`].

/// A version that orders the changes of one key: an integer that grows with each change (a
/// revision counter, a sequence, a timestamp in milliseconds). Stored as `i64`.
#[diagnostic::on_unimplemented(
    message = "`versao` must be an integer that grows with each change of the key, not `{Self}`",
    label = "not a version",
    note = "use a revision counter, a sequence or a timestamp in milliseconds (`i8`…`i64`, `u8`…`u32`)",
    note = "for a `u64` or a date, convert explicitly: `versao = i64::try_from(evento.seq).unwrap_or(i64::MAX)` or `versao = evento.alterado_em.timestamp_millis()`"
)]
pub trait Versao {
    /// The version as stored.
    fn como_i64(&self) -> i64;
}

macro_rules! inteiros {
    ($($t:ty),*) => {$(
        impl Versao for $t {
            fn como_i64(&self) -> i64 {
                i64::from(*self)
            }
        }
    )*};
}

inteiros!(i8, i16, i32, i64, u8, u16, u32);

impl<T: Versao + ?Sized> Versao for &T {
    fn como_i64(&self) -> i64 {
        (**self).como_i64()
    }
}

/// For generated code.
#[doc(hidden)]
pub fn versao<V: Versao>(valor: V) -> i64 {
    valor.como_i64()
}
