-- mensageria schema, version 4 (SQLite): the receiving side's dead letters. Same columns and
-- meaning as the PostgreSQL schema.
CREATE TABLE mensageria_mortas_recebidas (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    app           TEXT    NOT NULL,
    id_mensagem   TEXT    NOT NULL,
    tipo          TEXT    NOT NULL,
    origem        TEXT    NOT NULL,
    payload       TEXT    NOT NULL,
    correlacao    TEXT,
    motivo        TEXT    NOT NULL,
    entregas      INTEGER NOT NULL,
    morta_em      INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    UNIQUE (app, id_mensagem)
);
