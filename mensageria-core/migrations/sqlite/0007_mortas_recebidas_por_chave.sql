-- mensageria schema, version 7 (SQLite): receiving-side dead letters know their ordering key.
--
-- A message a broker consumer (mensageria-nats) delivered in an ordered lane carries its
-- ordering key. Kept with its dead letter, it holds the key's later messages behind it
-- (`OrdemAposMorta::Bloquear`) and lets a replay take the key's dead letters in their original
-- order (`sequencia`).
ALTER TABLE mensageria_mortas_recebidas ADD COLUMN chave_ordem TEXT;
CREATE INDEX mensageria_mortas_recebidas_por_chave
    ON mensageria_mortas_recebidas (app, chave_ordem, sequencia)
    WHERE chave_ordem IS NOT NULL;
