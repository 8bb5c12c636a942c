-- mensageria schema, version 1 (PostgreSQL).
-- Applied by `mensageria_core::migrar` into the first schema of the connection's search_path,
-- recorded in `_mensageria_migrations` (never the application's `_sqlx_migrations`).

-- The saída: one row per message waiting for delivery. A delivered row is deleted.
CREATE TABLE mensageria_saida (
    -- Insertion order; the relay claims by (tipo, proxima_tentativa_em, id).
    id                   BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The message's identity: stable across redeliveries, sent as x-request-id.
    id_mensagem          UUID        NOT NULL UNIQUE,
    tipo                 TEXT        NOT NULL,
    -- `json`, not `jsonb`: the payload is delivered byte for byte as it was enqueued, and `json`
    -- accepts every JSON string (jsonb rejects \u0000).
    payload              JSON        NOT NULL,
    -- Correlation id in force when the message was enqueued (NULL: none; the message id stands in).
    correlacao           TEXT,
    criada_em            TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- When the row may next be claimed. A claim pushes it to the lease's end, so an expired lease
    -- makes the row claimable again with no sweeper.
    proxima_tentativa_em TIMESTAMPTZ NOT NULL DEFAULT now(),
    tentativas           INTEGER     NOT NULL DEFAULT 0,
    ultimo_erro          TEXT,
    -- Lease: who holds the row, until when (database clock), and the fencing token that every ack
    -- or failure update must present. A reclaim changes the token, so a late ack changes nothing.
    lease_dono           TEXT,
    lease_ate            TIMESTAMPTZ,
    lease_token          BIGINT
);

CREATE INDEX mensageria_saida_fila ON mensageria_saida (tipo, proxima_tentativa_em, id);

-- Dead letters: messages the relay gave up on. Kept until a human replays or discards them.
CREATE TABLE mensageria_mortas (
    id_mensagem   UUID        PRIMARY KEY,
    tipo          TEXT        NOT NULL,
    payload       JSON        NOT NULL,
    correlacao    TEXT,
    criada_em     TIMESTAMPTZ NOT NULL,
    morta_em      TIMESTAMPTZ NOT NULL DEFAULT now(),
    tentativas    INTEGER     NOT NULL,
    ultimo_erro   TEXT        NOT NULL,
    -- The app whose relay dead-lettered it.
    app           TEXT
);

CREATE INDEX mensageria_mortas_tipo ON mensageria_mortas (tipo, morta_em);

-- Received keys: the receptor's dedup records, written in the same transaction as its effect.
CREATE TABLE mensageria_recebidas (
    tipo          TEXT        NOT NULL,
    -- Canonical, injective encoding of the natural key.
    chave         TEXT        NOT NULL,
    id_mensagem   UUID,
    -- Convergent mode: the newest version applied for this key (NULL in plain dedup mode).
    versao        BIGINT,
    recebida_em   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tipo, chave)
);

CREATE INDEX mensageria_recebidas_idade ON mensageria_recebidas (recebida_em);

-- Which app's relay claims which tipo, with a heartbeat: who owns what on a shared schema.
CREATE TABLE mensageria_apps (
    app           TEXT        NOT NULL,
    tipo          TEXT        NOT NULL,
    iniciado_em   TIMESTAMPTZ NOT NULL DEFAULT now(),
    visto_em      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (app, tipo)
);
