-- A node's refusal may be `unplaceable`: nothing its provider offers can ever take the
-- request as asked. The column's check gains the kind; the column is replaced (added,
-- copied, the old one dropped, renamed), which both engines do in portable SQL.
ALTER TABLE nodes ADD COLUMN refusal_kind TEXT CHECK (refusal_kind IN ('no_capacity',
    'counting', 'transient', 'operator_fix', 'failed', 'unplaceable'));
UPDATE nodes SET refusal_kind = refusal;
ALTER TABLE nodes DROP COLUMN refusal;
ALTER TABLE nodes RENAME COLUMN refusal_kind TO refusal;
