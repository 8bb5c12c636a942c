-- mensageria schema, version 6 (SQLite): a dedup record belongs to a receiving app, and
-- receiving apps register. Same meaning as PostgreSQL's versions 8-10.
--
-- SQLite cannot change a primary key in place: the table is copied (one writer, inside this
-- migration's transaction). Rows written before this version get `app = ''`: their owner is
-- unknown, and every receptor treats an unowned row of its tipo and key as its own (a duplicate)
-- until `mensageria recebidas adotar --app <app>` gives them to their owner.
CREATE TABLE mensageria_recebidas_nova (
    app           TEXT    NOT NULL DEFAULT '',
    tipo          TEXT    NOT NULL,
    chave         TEXT    NOT NULL,
    id_mensagem   TEXT,
    versao        INTEGER,
    recebida_em   INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    PRIMARY KEY (app, tipo, chave)
);
INSERT INTO mensageria_recebidas_nova (app, tipo, chave, id_mensagem, versao, recebida_em)
    SELECT '', tipo, chave, id_mensagem, versao, recebida_em FROM mensageria_recebidas;
DROP TABLE mensageria_recebidas;
ALTER TABLE mensageria_recebidas_nova RENAME TO mensageria_recebidas;
CREATE INDEX mensageria_recebidas_idade ON mensageria_recebidas (recebida_em);

CREATE TABLE mensageria_receptores (
    app           TEXT    NOT NULL,
    tipo          TEXT    NOT NULL,
    transporte    TEXT    NOT NULL,
    iniciado_em   INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    visto_em      INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    pendentes     INTEGER,
    em_voo        INTEGER,
    reentregues   INTEGER,
    mais_antiga_ms INTEGER,
    max_age_ms    INTEGER,
    PRIMARY KEY (app, tipo, transporte)
);

ALTER TABLE mensageria_mortas_recebidas ADD COLUMN sequencia INTEGER;
