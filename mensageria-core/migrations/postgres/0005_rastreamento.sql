-- mensageria schema, version 5 (PostgreSQL): W3C trace context carried with each message.

-- The enqueuing span's `traceparent` and `tracestate` (feature `otel`), continued by the
-- relay's delivery span and sent with the message; NULL when no trace was active. Kept with a
-- dead letter, so a replayed one continues its trace. Nullable columns without a default: added
-- online, no table rewrite.
ALTER TABLE mensageria_saida ADD COLUMN traceparent TEXT, ADD COLUMN tracestate TEXT;
ALTER TABLE mensageria_mortas ADD COLUMN traceparent TEXT, ADD COLUMN tracestate TEXT;

-- A receiving app's dead letters keep the context they arrived with, so a replay
-- (`reaplicar_mortas_recebidas`) continues the sender's trace.
ALTER TABLE mensageria_mortas_recebidas ADD COLUMN traceparent TEXT, ADD COLUMN tracestate TEXT;
