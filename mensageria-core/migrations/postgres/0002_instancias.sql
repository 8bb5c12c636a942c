-- mensageria schema, version 2 (PostgreSQL): relay instances, for recovery in seconds.

-- One row per relay instance (a process of an app), with a heartbeat. An instance that stops
-- gracefully records `parada_em`; one whose heartbeat is older than its dead-after period is
-- dead, and a sibling of the same app (or its own restart, when the instance has a stable name)
-- takes its leased rows back at once and records `recuperada_em`.
CREATE TABLE mensageria_instancias (
    instancia     TEXT        PRIMARY KEY,
    app           TEXT        NOT NULL,
    iniciada_em   TIMESTAMPTZ NOT NULL DEFAULT now(),
    visto_em      TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- How long without a heartbeat before siblings take this instance for dead, in ms.
    morta_apos_ms BIGINT      NOT NULL,
    parada_em     TIMESTAMPTZ,
    recuperada_em TIMESTAMPTZ
);

CREATE INDEX mensageria_instancias_app ON mensageria_instancias (app);

-- `lease_dono` now names the instance that holds a row: rows of a dead instance are found
-- without scanning the saída.
CREATE INDEX mensageria_saida_lease ON mensageria_saida (lease_dono) WHERE lease_dono IS NOT NULL;
