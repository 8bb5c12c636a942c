-- mensageria schema, version 1 (SQLite). Same tables and meaning as the PostgreSQL schema;
-- times are INTEGER milliseconds since the Unix epoch (UTC), ids are TEXT UUIDs.

CREATE TABLE mensageria_saida (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    id_mensagem          TEXT    NOT NULL UNIQUE,
    tipo                 TEXT    NOT NULL,
    payload              TEXT    NOT NULL,
    correlacao           TEXT,
    criada_em            INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    proxima_tentativa_em INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    tentativas           INTEGER NOT NULL DEFAULT 0,
    ultimo_erro          TEXT,
    lease_dono           TEXT,
    lease_ate            INTEGER,
    lease_token          INTEGER
);

CREATE INDEX mensageria_saida_fila ON mensageria_saida (tipo, proxima_tentativa_em, id);

CREATE TABLE mensageria_mortas (
    id_mensagem   TEXT    PRIMARY KEY,
    tipo          TEXT    NOT NULL,
    payload       TEXT    NOT NULL,
    correlacao    TEXT,
    criada_em     INTEGER NOT NULL,
    morta_em      INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    tentativas    INTEGER NOT NULL,
    ultimo_erro   TEXT    NOT NULL,
    app           TEXT
);

CREATE INDEX mensageria_mortas_tipo ON mensageria_mortas (tipo, morta_em);

CREATE TABLE mensageria_recebidas (
    tipo          TEXT    NOT NULL,
    chave         TEXT    NOT NULL,
    id_mensagem   TEXT,
    versao        INTEGER,
    recebida_em   INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    PRIMARY KEY (tipo, chave)
);

CREATE INDEX mensageria_recebidas_idade ON mensageria_recebidas (recebida_em);

CREATE TABLE mensageria_apps (
    app           TEXT    NOT NULL,
    tipo          TEXT    NOT NULL,
    iniciado_em   INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    visto_em      INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    PRIMARY KEY (app, tipo)
);
