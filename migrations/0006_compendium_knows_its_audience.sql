-- The compendium knows its audience: an entity declared only by GM-only notes (a sheet in
-- `PNJs/Secretos/`) is listed, matched and shown for the GM alone, and so is an alias that no
-- player-visible text uses (a secret true name kept as an alias of a public sheet).
-- 'player' or 'dm_only', as fragments.visibility. Rows written before this migration read as
-- 'player', as they were built from player notes only; the next ingest rebuilds the
-- compendium (ingest::COMPENDIUM_VERSION) and gates the aliases.

ALTER TABLE entities ADD COLUMN visibility TEXT NOT NULL DEFAULT 'player';
ALTER TABLE entity_aliases ADD COLUMN visibility TEXT NOT NULL DEFAULT 'player';
