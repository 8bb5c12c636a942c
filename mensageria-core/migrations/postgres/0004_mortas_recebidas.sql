-- mensageria schema, version 4 (PostgreSQL): the receiving side's dead letters.

-- An event a broker consumer (mensageria-nats) delivered to a receptor that refused it for good
-- (a payload that does not decode, a key that cannot be built, a permanent rejection). The
-- broker is told to stop redelivering it, so it is kept here, in the receiving app's database,
-- as received: nothing is dropped. One row per app and message.
CREATE TABLE mensageria_mortas_recebidas (
    id            BIGSERIAL   PRIMARY KEY,
    app           TEXT        NOT NULL,
    id_mensagem   UUID        NOT NULL,
    tipo          TEXT        NOT NULL,
    -- Where it came from: `nats:<stream>:<subject>`.
    origem        TEXT        NOT NULL,
    -- The payload as received (bytes that may not even be JSON, stored as text, lossy UTF-8).
    payload       TEXT        NOT NULL,
    correlacao    TEXT,
    motivo        TEXT        NOT NULL,
    entregas      BIGINT      NOT NULL,
    morta_em      TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (app, id_mensagem)
);
