-- Each turn of a conversation records who it was answered for. A turn answered in a GM channel
-- may hold GM-only text; if that channel stops being a GM channel, its player questions must
-- not be read with it. Turns stored before this column are of unknown audience: they fail
-- closed, GM-only, and a player's follow-up starts without them.
ALTER TABLE conversation_turns
    ADD COLUMN visibility TEXT NOT NULL DEFAULT 'dm_only' CHECK (visibility IN ('player', 'dm_only'));
