-- mensageria schema, version 2 (SQLite): relay instances, for recovery in seconds. Same tables
-- and meaning as the PostgreSQL schema; times are INTEGER milliseconds since the Unix epoch.

CREATE TABLE mensageria_instancias (
    instancia     TEXT    PRIMARY KEY,
    app           TEXT    NOT NULL,
    iniciada_em   INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    visto_em      INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    morta_apos_ms INTEGER NOT NULL,
    parada_em     INTEGER,
    recuperada_em INTEGER
);

CREATE INDEX mensageria_instancias_app ON mensageria_instancias (app);

CREATE INDEX mensageria_saida_lease ON mensageria_saida (lease_dono) WHERE lease_dono IS NOT NULL;
