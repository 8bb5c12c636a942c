-- mensageria schema, version 10 (PostgreSQL): the dedup records' key is (app, tipo, chave), and
-- receiving apps register.
--
-- The primary key moves to the index version 9 built: an ACCESS EXCLUSIVE lock held for the
-- catalog change only (no index build, no scan: every column of it is already NOT NULL). From
-- here on a receptor of an older build fails its dedup statement (its `ON CONFLICT (tipo, chave)`
-- names a key that is gone) and answers 503: its deliveries are retried, nothing is lost, and the
-- new build's replicas apply them. Upgrade the receiving apps right after this migration.
ALTER TABLE mensageria_recebidas
    DROP CONSTRAINT mensageria_recebidas_pkey,
    ADD CONSTRAINT mensageria_recebidas_pkey PRIMARY KEY USING INDEX mensageria_recebidas_por_app;

-- Who receives what: one row per receiving app, tipo and transport (`http` for a router's
-- receptor, `nats` for a JetStream consumer), refreshed while the app runs (`visto_em`), so
-- `status` and `doctor` see a pure receiver, and which apps share a tipo on this schema.
CREATE TABLE mensageria_receptores (
    app           TEXT        NOT NULL,
    tipo          TEXT        NOT NULL,
    transporte    TEXT        NOT NULL,
    iniciado_em   TIMESTAMPTZ NOT NULL DEFAULT now(),
    visto_em      TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- A JetStream consumer's lag at `visto_em` (NULL over HTTP): messages waiting for it,
    -- delivered and not yet settled, redelivered, the oldest unapplied one's age, and the
    -- stream's max_age it is measured against.
    pendentes     BIGINT,
    em_voo        BIGINT,
    reentregues   BIGINT,
    mais_antiga_ms BIGINT,
    max_age_ms    BIGINT,
    PRIMARY KEY (app, tipo, transporte)
);

-- The stream sequence of a receiving-side dead letter (NULL when it came by another door).
ALTER TABLE mensageria_mortas_recebidas ADD COLUMN sequencia BIGINT;
