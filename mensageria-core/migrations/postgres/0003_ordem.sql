-- mensageria schema, version 3 (PostgreSQL): ordered delivery per key (opt-in).

-- The ordering key a sender gave (NULL: an unordered message, today's behaviour and cost) and
-- the message's place in its key's order. `seq_ordem` is drawn from `mensageria_ordem_seq`
-- while the enqueueing transaction holds a transaction-scoped advisory lock on the key, so two
-- transactions enqueueing for one key commit in the order of their sequence values. A message
-- of a key is claimable only when no row of the key with a smaller `seq_ordem` is in the saída
-- (pending, leased or waiting for a retry) nor, under the relay's default policy, in the dead
-- letters.
ALTER TABLE mensageria_saida ADD COLUMN chave_ordem TEXT;
ALTER TABLE mensageria_saida ADD COLUMN seq_ordem BIGINT;

CREATE SEQUENCE mensageria_ordem_seq AS BIGINT;

-- The claim's head check: "is there an earlier row of this key?" is one probe of this index.
CREATE INDEX mensageria_saida_ordem ON mensageria_saida (chave_ordem, seq_ordem)
    WHERE chave_ordem IS NOT NULL;

-- Dead letters keep the key and the sequence, so a dead message can block the later messages
-- of its key, and a replay puts it back in its original place.
ALTER TABLE mensageria_mortas ADD COLUMN chave_ordem TEXT;
ALTER TABLE mensageria_mortas ADD COLUMN seq_ordem BIGINT;

CREATE INDEX mensageria_mortas_ordem ON mensageria_mortas (chave_ordem, seq_ordem)
    WHERE chave_ordem IS NOT NULL;
