-- mensageria schema, version 3 (SQLite): ordered delivery per key (opt-in). Same columns and
-- meaning as the PostgreSQL schema. SQLite has a single writer, so `seq_ordem` is the key's
-- largest sequence (saída and dead letters) plus one, read and written under the write lock.

ALTER TABLE mensageria_saida ADD COLUMN chave_ordem TEXT;
ALTER TABLE mensageria_saida ADD COLUMN seq_ordem INTEGER;

CREATE INDEX mensageria_saida_ordem ON mensageria_saida (chave_ordem, seq_ordem)
    WHERE chave_ordem IS NOT NULL;

ALTER TABLE mensageria_mortas ADD COLUMN chave_ordem TEXT;
ALTER TABLE mensageria_mortas ADD COLUMN seq_ordem INTEGER;

CREATE INDEX mensageria_mortas_ordem ON mensageria_mortas (chave_ordem, seq_ordem)
    WHERE chave_ordem IS NOT NULL;
