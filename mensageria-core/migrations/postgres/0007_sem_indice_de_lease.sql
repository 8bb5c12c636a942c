-- no-transaction
-- mensageria schema, version 7 (PostgreSQL): the lease owner is no longer indexed.
--
-- An index on `lease_dono` makes every claim a non-HOT update (version 6). Its only readers were
-- the take-back of a dead instance's rows and `status`, both rare; they now scan the saída.
-- CONCURRENTLY, outside a transaction: enqueues and claims are not blocked while it runs.
DROP INDEX CONCURRENTLY IF EXISTS mensageria_saida_lease;
