//! The stores: everything mensageria says to a database lives behind [`Banco`], one module per
//! backend, each holding its own SQL.
//!
//! [`Banco`] is implemented for [`sqlx::Postgres`] (feature `postgres`) and [`sqlx::Sqlite`]
//! (feature `sqlite`, the default) and sealed: the API is generic over it so one call works with
//! either pool, transaction or connection.

#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod linhas;
#[cfg(feature = "postgres")]
pub(crate) mod postgres;
#[cfg(feature = "sqlite")]
pub mod sqlite;

/// The name of mensageria's own migrations table (never the application's `_sqlx_migrations`).
pub const TABELA_MIGRACOES: &str = "_mensageria_migrations";

/// A database mensageria can store its tables in: PostgreSQL or SQLite.
///
/// Name it as a bound (`fn f<DB: Banco>(pool: &sqlx::Pool<DB>)`); it has no methods of its own
/// to call. What mensageria does with a store is behind [`enfileirar`](crate::enfileirar), the
/// [`Relay`](crate::relay::Relay), [`migrar`](crate::migrar) and the operations of
/// [`operacoes`](crate::operacoes). Sealed: implemented for [`sqlx::Postgres`] (feature
/// `postgres`) and [`sqlx::Sqlite`] (feature `sqlite`) only.
pub trait Banco: sqlx::Database + interno::BancoInterno {}

#[cfg(feature = "postgres")]
impl Banco for sqlx::Postgres {}
#[cfg(feature = "sqlite")]
impl Banco for sqlx::Sqlite {}

/// Per row of the saída (in a `GROUP BY tipo`): 1 when it belongs to an ordering key with a dead
/// letter earlier in the key's order, the rows the default policy holds back (same text on
/// both backends).
const SQL_ATRAS_DE_MORTA: &str = "CAST(coalesce(sum(CASE WHEN chave_ordem IS NOT NULL AND EXISTS ( \
         SELECT 1 FROM mensageria_mortas m WHERE m.chave_ordem = mensageria_saida.chave_ordem \
             AND m.seq_ordem < mensageria_saida.seq_ordem) THEN 1 ELSE 0 END), 0) AS BIGINT)";

/// Attempts per tipo in the saída: the same statement on both backends.
const SQL_TENTATIVAS: &str = "SELECT tipo, CAST(tentativas AS BIGINT), CAST(count(*) AS BIGINT) \
     FROM mensageria_saida GROUP BY tipo, tentativas ORDER BY tipo, tentativas";

/// Dead letters per tipo: the same statement on both backends.
const SQL_MORTAS_POR_TIPO: &str = "SELECT tipo, CAST(count(*) AS BIGINT) FROM mensageria_mortas \
     GROUP BY tipo ORDER BY tipo";

/// Receiver-side dead letters per app and tipo (same text on both backends).
const SQL_MORTAS_RECEBIDAS_POR_TIPO: &str = "SELECT app, tipo, CAST(count(*) AS BIGINT) \
     FROM mensageria_mortas_recebidas GROUP BY app, tipo ORDER BY app, tipo";

/// The ordering keys of an app with dead letters its consumer resumes by itself (`parked`, and
/// `held` ones, which resume once nothing is before them).
pub(crate) const SQL_CHAVES_A_RETOMAR: &str = "SELECT DISTINCT chave_ordem \
     FROM mensageria_mortas_recebidas WHERE app = $1 AND chave_ordem IS NOT NULL \
     AND (motivo LIKE 'parked:%' OR motivo LIKE 'held:%') ORDER BY chave_ordem";

/// The first dead letter of an app and ordering key before a position of the key (one probe of
/// `mensageria_mortas_recebidas_por_chave`; a row without a position counts as before).
pub(crate) const SQL_MORTA_QUE_RETEM: &str = "SELECT id_mensagem FROM mensageria_mortas_recebidas \
     WHERE app = $1 AND chave_ordem = $2 AND (sequencia IS NULL OR sequencia < $3) \
     ORDER BY sequencia LIMIT 1";

/// Whether app `$1` holds a dedup record written by message `$2` (same text on both backends).
const SQL_RECEBIDA_POR_ID: &str = "SELECT EXISTS (SELECT 1 FROM mensageria_recebidas \
     WHERE app = $1 AND id_mensagem = $2)";

/// Forgets app `$1`'s receiving registrations (same text on both backends).
const SQL_ESQUECER_RECEPTOR: &str = "DELETE FROM mensageria_receptores WHERE app = $1";

/// How many rows ordering key `$1` has, saída and dead letters (same text on both backends).
const SQL_TOTAL_DA_CHAVE: &str = "SELECT CAST( \
         (SELECT count(*) FROM mensageria_saida WHERE chave_ordem = $1) \
         + (SELECT count(*) FROM mensageria_mortas WHERE chave_ordem = $1) AS BIGINT)";

/// Rows of the saída held behind the head of their ordering key when that head is of another
/// tipo, grouped by (tipo, head's tipo, head is a dead letter): how many rows, how many keys,
/// one key. The head is the key's row with the smallest sequence in the saída and the dead
/// letters (same text on both backends; window functions: SQLite 3.25 on).
const SQL_RETIDAS: &str = "WITH fila AS ( \
         SELECT chave_ordem, seq_ordem, tipo, 0 AS morta FROM mensageria_saida \
         WHERE chave_ordem IS NOT NULL \
         UNION ALL \
         SELECT chave_ordem, seq_ordem, tipo, 1 AS morta FROM mensageria_mortas \
         WHERE chave_ordem IS NOT NULL \
     ), cabecas AS ( \
         SELECT chave_ordem, tipo, morta FROM ( \
             SELECT chave_ordem, tipo, morta, \
                 row_number() OVER (PARTITION BY chave_ordem ORDER BY seq_ordem) AS n \
             FROM fila) AS ordenada \
         WHERE n = 1 \
     ) \
     SELECT s.tipo, c.tipo, CAST(c.morta AS BIGINT), CAST(count(*) AS BIGINT), \
         CAST(count(DISTINCT s.chave_ordem) AS BIGINT), min(s.chave_ordem) \
     FROM mensageria_saida s JOIN cabecas c ON c.chave_ordem = s.chave_ordem \
     WHERE s.tipo <> c.tipo \
     GROUP BY s.tipo, c.tipo, c.morta ORDER BY s.tipo, c.tipo, c.morta";

pub(crate) use interno::{
    BancoInterno, Batimento, ConexaoDoBanco, NovaMensagem, Pedido, Posse, Reivindicada,
};

/// What the stores do, one method per statement (or transaction). Crate-private: users name
/// [`Banco`] as a bound; the operations they may call are the documented functions of
/// [`crate::operacoes`] (and, for tests and the bench, `crate::teste::reivindicacao`).
pub(crate) mod interno {
    use std::future::Future;
    use std::pin::Pin;

    use sqlx::{Executor, Pool};
    use tokio_util::sync::CancellationToken;
    use uuid::Uuid;

    use crate::operacoes::{
        AppRemovido, Backlog, FilaDoTipo, Instancia, Morta, MortaListada, MortasDoTipo, Recebida,
        Reivindicacao, TentativasDoTipo,
    };

    /// The transaction that holds the leader's advisory lock (see `liderar`).
    pub(crate) type Lideranca<DB> = sqlx::Transaction<'static, DB>;

    /// A backend's own connection (`PgConnection`, `SqliteConnection`): where every way of
    /// writing to the saída ends. Implemented next to the backend's SQL.
    pub trait ConexaoDoBanco {
        /// Inserts one row into the saída on this connection (in its transaction, if any).
        fn inserir<'m>(
            &'m mut self,
            mensagem: NovaMensagem<'m>,
        ) -> Pin<Box<dyn Future<Output = Result<(), sqlx::Error>> + Send + 'm>>;
    }

    /// What [`crate::saida::Conexao`] is made of: one way to reach a [`ConexaoDoBanco`] (a
    /// connection, a transaction by reference, a pooled connection, the pool).
    #[diagnostic::on_unimplemented(
        message = "`enfileirar` cannot write through `{Self}`",
        label = "not a transaction, connection or pool of PostgreSQL or SQLite",
        note = "pass the transaction (`&mut *tx`), a connection (`&mut *conexao`) or the pool (`&pool`)"
    )]
    pub trait ConexaoInterna {
        /// Inserts one row into the saída through this connection. Boxed, like
        /// [`BancoInterno::inserir_na_saida`], so the caller's future stays `Send`.
        fn inserir<'m>(
            self,
            mensagem: NovaMensagem<'m>,
        ) -> Pin<Box<dyn Future<Output = Result<(), sqlx::Error>> + Send + 'm>>
        where
            Self: 'm;
    }

    /// A row about to enter the saída.
    #[derive(Debug)]
    pub struct NovaMensagem<'a> {
        /// Its message id (UUIDv7).
        pub id_mensagem: Uuid,
        /// Its tipo.
        pub tipo: &'a str,
        /// The payload, serialized JSON.
        pub payload: &'a str,
        /// The correlation id in force, if any.
        pub correlacao: Option<&'a str>,
        /// The ordering key, if the message is ordered (see `crate::saida::enfileirar_ordenado`).
        pub chave_ordem: Option<&'a str>,
        /// The enqueuing span's W3C `traceparent` (see [`crate::rastreamento`]), if any.
        pub traceparent: Option<&'a str>,
        /// Its `tracestate`, if any.
        pub tracestate: Option<&'a str>,
    }

    /// A row the relay has just leased.
    #[derive(Debug, Clone)]
    pub struct Reivindicada {
        /// The row's id in `mensageria_saida`.
        pub id: i64,
        /// Its message id.
        pub id_mensagem: Uuid,
        /// Its tipo.
        pub tipo: String,
        /// The payload, JSON text.
        pub payload: String,
        /// Its correlation id, if any.
        pub correlacao: Option<String>,
        /// Attempts so far, this one included.
        pub tentativas: i32,
        /// Age of the message at claim time (database clock), in milliseconds.
        pub idade_ms: i64,
        /// When the row was due before this claim (ms since the epoch, database clock): where the
        /// queue's head was, for the keyset floor. 0 where the backend does not report it, and
        /// for an ordered row (its key's later rows may be older: the floor must not pass them).
        pub devida_em_ms: i64,
        /// Its ordering key, when it was enqueued with one (a broker transport routes by it).
        pub chave_ordem: Option<String>,
        /// The W3C trace context it was enqueued under, if any (see [`crate::rastreamento`]).
        pub traceparent: Option<String>,
        /// Its `tracestate`, if any.
        pub tracestate: Option<String>,
    }

    impl Reivindicada {
        /// Its trace context, checked again as it leaves the database (a row written by other
        /// means is never trusted).
        pub fn rastreamento(&self) -> Option<crate::rastreamento::ContextoRastreamento> {
            let traceparent = self.traceparent.as_deref()?;
            crate::rastreamento::ContextoRastreamento::new(traceparent, self.tracestate.as_deref())
        }
    }

    /// What one claim asks for.
    #[derive(Debug, Clone, Copy)]
    pub struct Pedido<'a> {
        /// The tipos to claim rows of.
        pub tipos: &'a [&'a str],
        /// Per tipo (same order), the keyset floor: only rows due at or after this instant
        /// (milliseconds since the epoch, database clock) are looked at; 0 looks at everything.
        /// PostgreSQL only (SQLite has no dead rows to skip).
        pub pisos_ms: &'a [i64],
        /// At most this many rows.
        pub lote: i64,
        /// How long the lease lasts, in milliseconds.
        pub lease_ms: i64,
        /// The instance that leases them (`lease_dono`).
        pub dono: &'a str,
        /// The fencing token stamped on them (`lease_token`).
        pub token: i64,
        /// Ordered messages: a dead letter of a key blocks the later messages of that key
        /// (`OrdemAposMorta::Bloquear`); `false` lets them go.
        pub bloquear_apos_morta: bool,
    }

    /// What taking an instance name at start found.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Posse {
        /// The name is this process's.
        Tomada {
            /// Identifies this incarnation: every heartbeat must match it.
            marca: i64,
            /// Rows a dead earlier holder of the name held, given back.
            recuperadas: u64,
        },
        /// A live process holds the name.
        Ocupada {
            /// How long ago its last heartbeat was written.
            visto_ha_ms: i64,
        },
    }

    /// What one heartbeat found.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Batimento {
        /// Written.
        Batido {
            /// Rows of dead siblings given back.
            recuperadas: u64,
        },
        /// Another incarnation holds the name now (this one was taken for dead), or the row is
        /// gone: nothing was written.
        Perdida,
    }

    /// The store's statements. Implemented in `postgres.rs` and `sqlite.rs`, which hold every
    /// SQL string of their backend.
    pub trait BancoInterno: sqlx::Database<Connection: ConexaoDoBanco> {
        /// Applies the migrations that are missing. See [`crate::migrar`].
        fn migrar(pool: &Pool<Self>) -> impl Future<Output = Result<(), crate::erro::Erro>> + Send;

        /// The newest migration version this build knows.
        fn versao_esperada() -> i64;

        /// The newest migration applied, or `None` when the migrations table does not exist.
        fn versao_aplicada(
            pool: &Pool<Self>,
        ) -> impl Future<Output = Result<Option<i64>, sqlx::Error>> + Send;

        /// Inserts one row into the saída through the caller's executor.
        ///
        /// Boxed on purpose: the future's type then does not mention `E`, so a caller's future that
        /// awaits it (an Axum handler, a `tokio::spawn`ed task) is `Send` for every lifetime of
        /// `&mut *tx`. With an opaque `impl Future` the compiler has to prove `E: Executor<'e>` for
        /// all lifetimes and rejects the caller ("implementation of `Executor` is not general
        /// enough"); `tests/saida.rs` holds the regression.
        fn inserir_na_saida<'e, 'm, E>(
            executor: E,
            mensagem: NovaMensagem<'m>,
        ) -> Pin<Box<dyn Future<Output = Result<(), sqlx::Error>> + Send + 'm>>
        where
            E: Executor<'e, Database = Self> + 'm,
            'e: 'm;

        /// Leases up to `pedido.lote` due rows of `pedido.tipos`: bumps their attempts, pushes
        /// their next attempt to the lease's end (database clock) and stamps the fencing token.
        fn reivindicar(
            pool: &Pool<Self>,
            pedido: Pedido<'_>,
        ) -> impl Future<Output = Result<Vec<Reivindicada>, sqlx::Error>> + Send;

        /// Deletes delivered rows, each only if its lease token is still the one given; returns
        /// the ids deleted (the others were fenced). One statement, one commit.
        fn confirmar_lote(
            pool: &Pool<Self>,
            pares: &[(i64, i64)],
        ) -> impl Future<Output = Result<Vec<i64>, sqlx::Error>> + Send;

        /// Schedules a retry in `atraso_ms`, if the lease `token` is still ours. `contar` false
        /// gives the attempt back (a failed probe of a destination that is down is the
        /// destination's failure, not the message's: it must not bring the message closer to the
        /// dead letters).
        fn reagendar(
            pool: &Pool<Self>,
            id: i64,
            token: i64,
            atraso_ms: i64,
            erro: &str,
            contar: bool,
        ) -> impl Future<Output = Result<bool, sqlx::Error>> + Send;

        /// Extends the leases of rows still being delivered to `lease_ms` from now (database
        /// clock), each only while its token is still the one given: one statement for all of them.
        /// Returns how many were extended (the others were settled or fenced meanwhile).
        fn renovar_leases(
            pool: &Pool<Self>,
            pares: &[(i64, i64)],
            lease_ms: i64,
        ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;

        /// Takes the name `instancia` of `app` for this process, unless a live process holds it:
        /// the name is free when it is new, or its holder stopped gracefully, or its heartbeat is
        /// older than the holder's own dead-after period. Taken, it gives back at once the rows a
        /// dead earlier holder of the name (a stable name that restarted) still held, and
        /// returns the incarnation's mark, which every heartbeat of this process must match.
        fn iniciar_instancia(
            pool: &Pool<Self>,
            instancia: &str,
            app: &str,
            morta_apos_ms: i64,
        ) -> impl Future<Output = Result<Posse, sqlx::Error>> + Send;

        /// The instance's heartbeat, only while the name is still held by the incarnation
        /// `marca` (else [`Batimento::Perdida`], nothing written); also gives back at once the
        /// rows held by sibling instances of the same app that are dead (no heartbeat for their
        /// dead-after period, not stopped).
        fn bater_instancia(
            pool: &Pool<Self>,
            instancia: &str,
            app: &str,
            marca: i64,
        ) -> impl Future<Output = Result<Batimento, sqlx::Error>> + Send;

        /// Records that the instance stopped gracefully (not dead: operators need not look),
        /// if the incarnation `marca` still holds the name.
        fn parar_instancia(
            pool: &Pool<Self>,
            instancia: &str,
            marca: i64,
        ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;

        /// Moves a row to the dead letters, if the lease `token` is still ours.
        fn matar(
            pool: &Pool<Self>,
            id: i64,
            token: i64,
            erro: &str,
            app: &str,
        ) -> impl Future<Output = Result<bool, sqlx::Error>> + Send;

        /// Gives leased rows back untouched (their attempt did not happen): due now, one attempt
        /// less.
        fn liberar(
            pool: &Pool<Self>,
            id: i64,
            token: i64,
        ) -> impl Future<Output = Result<bool, sqlx::Error>> + Send;

        /// Records (or refreshes) that `app` claims `tipos`; returns the other apps that claim any
        /// of them, as `(app, tipo)`.
        fn registrar_app(
            pool: &Pool<Self>,
            app: &str,
            tipos: &[&str],
        ) -> impl Future<Output = Result<Vec<(String, String)>, sqlx::Error>> + Send;

        /// Leader mode: tries the app's transaction-scoped advisory lock and, when it is ours,
        /// returns the transaction that holds it (commit or drop it to step down). `Ok(None)`:
        /// another replica leads this tick. Backends without advisory locks return a transaction
        /// that holds nothing.
        fn liderar(
            pool: &Pool<Self>,
            chave: i64,
        ) -> impl Future<Output = Result<Option<Lideranca<Self>>, sqlx::Error>> + Send;

        /// Opt-in wake-ups from other processes: listens for the notifications of the trigger that
        /// `relay::notificacoes::instalar` puts on this schema's saída and wakes this process's
        /// relays ([`crate::relay::acordar`]) on each, until `cancelar`. Reconnects by itself;
        /// polling covers the gaps. Backends without LISTEN say so once and return.
        fn escutar(
            pool: Pool<Self>,
            cancelar: CancellationToken,
        ) -> impl Future<Output = ()> + Send;

        /// Puts dead letters back in the saída with attempts reset and their age restarted (the
        /// relay's `idade_maxima` counts from the replay): one (`Some(id)`) or every one of `tipo`
        /// (`None`: every one). Returns how many moved.
        fn reenfileirar_mortas(
            pool: &Pool<Self>,
            id_mensagem: Option<Uuid>,
            tipo: Option<&str>,
        ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;

        /// Writes a receptor's dedup record in the caller's transaction. `true`: first arrival (or
        /// a newer version), apply the effect; `false`: a duplicate (or an equal/older version). A
        /// concurrent duplicate waits for the first transaction, then sees its outcome.
        fn registrar_recebida<'c>(
            conexao: &'c mut <Self as sqlx::Database>::Connection,
            recebida: Recebida<'c>,
        ) -> impl Future<Output = Result<bool, sqlx::Error>> + Send + 'c;

        /// The dedup records of a batch of one app and tipo, in one statement: the keys recorded
        /// now (first arrivals, or newer versions when `convergente`). The keys are distinct.
        /// An unowned record (`app = ''`, written before the key had an app) counts as the
        /// app's own.
        fn registrar_recebidas<'c>(
            conexao: &'c mut <Self as sqlx::Database>::Connection,
            app: &'c str,
            tipo: &'c str,
            itens: Vec<(String, Option<uuid::Uuid>, Option<i64>)>,
            convergente: bool,
        ) -> impl Future<Output = Result<Vec<String>, sqlx::Error>> + Send + 'c;

        /// Deletes up to `lote` dedup records (of `app`, when given) older than `idade_ms`;
        /// returns how many.
        fn purgar_recebidas(
            pool: &Pool<Self>,
            app: Option<&str>,
            idade_ms: i64,
            lote: i64,
        ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;

        /// Gives up to `lote` unowned dedup records (`app = ''`, of `tipo` when given) to each of
        /// `apps`, in one transaction; returns how many unowned records went.
        fn adotar_recebidas(
            pool: &Pool<Self>,
            apps: &[&str],
            tipo: Option<&str>,
            lote: i64,
        ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;

        /// Dedup records per app and tipo (`app = ''`: unowned), by app then tipo.
        fn recebidas_por_app(
            pool: &Pool<Self>,
        ) -> impl Future<Output = Result<Vec<crate::operacoes::RecebidasDoApp>, sqlx::Error>> + Send;

        /// Records that `app` receives `tipos` through `transporte` now (`visto_em`).
        fn registrar_receptores(
            pool: &Pool<Self>,
            app: &str,
            tipos: &[&str],
            transporte: &str,
        ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;

        /// Upserts `app`'s `nats` registration of `tipo` with its lag, now.
        fn registrar_consumidor(
            pool: &Pool<Self>,
            app: &str,
            tipo: &str,
            consumo: &crate::operacoes::Consumo,
        ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;

        /// Whether `app` holds a dedup record written by message `id_mensagem` (an unindexed
        /// look: for the rare cases that need it).
        fn recebida_por_id(
            pool: &Pool<Self>,
            app: &str,
            id_mensagem: Uuid,
        ) -> impl Future<Output = Result<bool, sqlx::Error>> + Send;

        /// Deletes `app`'s rows of `mensageria_receptores`; how many.
        fn esquecer_receptor(
            pool: &Pool<Self>,
            app: &str,
        ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;

        /// Every row of `mensageria_receptores`, by tipo then app.
        fn receptores(
            pool: &Pool<Self>,
        ) -> impl Future<Output = Result<Vec<crate::operacoes::ReceptorDoApp>, sqlx::Error>> + Send;

        /// The backlog of `tipos`: every one of them, in their order, 0 when empty.
        fn medir_backlog(
            pool: &Pool<Self>,
            tipos: &[&str],
        ) -> impl Future<Output = Result<Vec<Backlog>, sqlx::Error>> + Send;

        /// Per tipo present in the saída, its rows, those leased now and the oldest one's age.
        fn fila(
            pool: &Pool<Self>,
        ) -> impl Future<Output = Result<Vec<FilaDoTipo>, sqlx::Error>> + Send;

        /// Rows of the saída per tipo and number of attempts.
        fn tentativas(
            pool: &Pool<Self>,
        ) -> impl Future<Output = Result<Vec<TentativasDoTipo>, sqlx::Error>> + Send;

        /// Dead letters per tipo.
        fn mortas_por_tipo(
            pool: &Pool<Self>,
        ) -> impl Future<Output = Result<Vec<MortasDoTipo>, sqlx::Error>> + Send;

        /// Every row of `mensageria_apps`, by tipo then app.
        fn reivindicacoes(
            pool: &Pool<Self>,
        ) -> impl Future<Output = Result<Vec<Reivindicacao>, sqlx::Error>> + Send;

        /// Every row of `mensageria_instancias`, by app then newest heartbeat first.
        fn instancias(
            pool: &Pool<Self>,
        ) -> impl Future<Output = Result<Vec<Instancia>, sqlx::Error>> + Send;

        /// Versions recorded with `success = false` in the migrations table.
        fn migracoes_falhas(
            pool: &Pool<Self>,
        ) -> impl Future<Output = Result<Vec<i64>, sqlx::Error>> + Send;

        /// The dead letters (of `tipo`, when given), newest first, at most `limite`; and how many
        /// match in all.
        fn listar_mortas(
            pool: &Pool<Self>,
            tipo: Option<&str>,
            limite: i64,
        ) -> impl Future<Output = Result<(Vec<MortaListada>, i64), sqlx::Error>> + Send;

        /// Records a receiver-side dead letter (nothing if the app already has this message id).
        fn registrar_morta_recebida(
            pool: &Pool<Self>,
            morta: &crate::operacoes::MortaRecebida,
        ) -> impl Future<Output = Result<bool, sqlx::Error>> + Send;

        /// The receiver-side dead letters of `app` (all apps with `None`), newest first.
        fn mortas_recebidas(
            pool: &Pool<Self>,
            app: Option<&str>,
            limite: i64,
        ) -> impl Future<Output = Result<Vec<crate::operacoes::MortaRecebida>, sqlx::Error>> + Send;

        /// The receiver-side dead letters with message id `id_mensagem` (of `app`, when given):
        /// at most one per app.
        fn buscar_mortas_recebidas(
            pool: &Pool<Self>,
            id_mensagem: Uuid,
            app: Option<&str>,
        ) -> impl Future<Output = Result<Vec<crate::operacoes::MortaRecebida>, sqlx::Error>> + Send;

        /// The first receiver-side dead letter of `app` and ordering key `chave` placed before
        /// `sequencia`, if any.
        fn morta_recebida_que_retem(
            pool: &Pool<Self>,
            app: &str,
            chave: &str,
            sequencia: i64,
        ) -> impl Future<Output = Result<Option<Uuid>, sqlx::Error>> + Send;

        /// The ordering keys of `app` with `parked` or `held` receiver-side dead letters.
        fn chaves_a_retomar(
            pool: &Pool<Self>,
            app: &str,
        ) -> impl Future<Output = Result<Vec<String>, sqlx::Error>> + Send;

        /// The receiver-side dead letters of `app` and ordering key `chave`, in the key's order.
        fn mortas_recebidas_da_chave(
            pool: &Pool<Self>,
            app: &str,
            chave: &str,
        ) -> impl Future<Output = Result<Vec<crate::operacoes::MortaRecebida>, sqlx::Error>> + Send;

        /// Deletes `app`'s receiver-side dead letter `id_mensagem`; returns how many rows went.
        fn descartar_morta_recebida(
            pool: &Pool<Self>,
            app: &str,
            id_mensagem: Uuid,
        ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;

        /// Receiver-side dead letters per app and tipo, by app then tipo.
        fn mortas_recebidas_por_tipo(
            pool: &Pool<Self>,
        ) -> impl Future<Output = Result<Vec<crate::operacoes::MortasRecebidasDoTipo>, sqlx::Error>> + Send;

        /// One dead letter in full.
        fn buscar_morta(
            pool: &Pool<Self>,
            id_mensagem: Uuid,
        ) -> impl Future<Output = Result<Option<Morta>, sqlx::Error>> + Send;

        /// Deletes one dead letter; returns how many rows went (0 or 1).
        fn descartar_morta(
            pool: &Pool<Self>,
            id_mensagem: Uuid,
        ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;

        /// Deletes `app`'s instance rows that are not alive (alive: no graceful stop, not taken
        /// over, a heartbeat younger than its dead-after period or than `piso_ms`, whichever is
        /// longer) and, when none is left, its `mensageria_apps` rows; one transaction. `Ok(Err)`:
        /// the instances still alive, and nothing changed.
        fn remover_app(
            pool: &Pool<Self>,
            app: &str,
            piso_ms: i64,
        ) -> impl Future<Output = Result<Result<AppRemovido, Vec<String>>, sqlx::Error>> + Send;

        /// Rows of the saída held behind the head of their ordering key when that head is of
        /// another tipo, grouped (see `SQL_RETIDAS`).
        fn retidas(
            pool: &Pool<Self>,
        ) -> impl Future<Output = Result<Vec<crate::operacoes::Retida>, sqlx::Error>> + Send;

        /// The rows of ordering key `chave`, saída and dead letters, in the key's order, at most
        /// `limite`; and how many there are in all.
        fn fila_da_chave(
            pool: &Pool<Self>,
            chave: &str,
            limite: i64,
        ) -> impl Future<Output = Result<(Vec<crate::operacoes::PosicaoNaChave>, i64), sqlx::Error>> + Send;
    }
}

/// The newest version in a migrator.
fn ultima_versao(migrador: &sqlx::migrate::Migrator) -> i64 {
    migrador.iter().map(|m| m.version).max().unwrap_or(0)
}

/// The boxed future of one insert into the saída.
type Insercao<'m> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), sqlx::Error>> + Send + 'm>>;

/// A backend connection (`&mut *tx` on a `Transaction`, `&mut *conexao` on a pooled one, or a
/// bare `&mut PgConnection`/`&mut SqliteConnection`).
impl<C: ConexaoDoBanco> interno::ConexaoInterna for &mut C {
    fn inserir<'m>(self, mensagem: NovaMensagem<'m>) -> Insercao<'m>
    where
        Self: 'm,
    {
        C::inserir(self, mensagem)
    }
}

/// A transaction by reference: `&mut tx`, and `&mut *tx` where `tx: &mut Transaction` (a
/// receptor's transaction).
impl<DB: Banco> interno::ConexaoInterna for &mut sqlx::Transaction<'_, DB> {
    fn inserir<'m>(self, mensagem: NovaMensagem<'m>) -> Insercao<'m>
    where
        Self: 'm,
    {
        let conexao: &mut DB::Connection = std::ops::DerefMut::deref_mut(self);
        ConexaoDoBanco::inserir(conexao, mensagem)
    }
}

/// A pooled connection by reference (`&mut conexao`).
impl<DB: Banco> interno::ConexaoInterna for &mut sqlx::pool::PoolConnection<DB> {
    fn inserir<'m>(self, mensagem: NovaMensagem<'m>) -> Insercao<'m>
    where
        Self: 'm,
    {
        let conexao: &mut DB::Connection = std::ops::DerefMut::deref_mut(self);
        ConexaoDoBanco::inserir(conexao, mensagem)
    }
}

/// The pool: one connection, one statement, committed on its own (outside any transaction).
impl<DB: Banco> interno::ConexaoInterna for &sqlx::Pool<DB> {
    fn inserir<'m>(self, mensagem: NovaMensagem<'m>) -> Insercao<'m>
    where
        Self: 'm,
    {
        Box::pin(async move {
            let mut conexao = sqlx::Acquire::acquire(self).await?;
            ConexaoDoBanco::inserir(&mut *conexao, mensagem).await
        })
    }
}
