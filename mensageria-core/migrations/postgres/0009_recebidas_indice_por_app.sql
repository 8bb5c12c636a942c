-- no-transaction
-- mensageria schema, version 9 (PostgreSQL): the unique index of the dedup records' new key,
-- built CONCURRENTLY (a SHARE UPDATE EXCLUSIVE lock: receptors keep inserting while it runs; on
-- a million rows it took 1.3-2.5 s on 2 cores). Version 10 makes it the primary key.
--
-- CONCURRENTLY waits for every transaction of the database older than the build, so `migrar`
-- builds the index first in a plain statement when the table is small (at most 100,000 rows,
-- well under a second of a SHARE lock), and this is then a no-op. If a concurrent build is
-- interrupted it leaves an INVALID index behind and this migration recorded as failed: drop the
-- index (`DROP INDEX CONCURRENTLY mensageria_recebidas_por_app`), delete version 9's row from
-- `_mensageria_migrations`, and migrate again.
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS mensageria_recebidas_por_app
    ON mensageria_recebidas (app, tipo, chave);
