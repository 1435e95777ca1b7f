-- Room for the stages after ingest: the compendium, the annotation cache, conversations.

-- Entities of the compendium: PCs, NPCs, places, gods, factions, items.
CREATE TABLE entities (
    id            INTEGER PRIMARY KEY,
    name          TEXT NOT NULL,
    kind          TEXT NOT NULL,             -- pc, npc, place, god, faction, item, other
    description   TEXT NOT NULL DEFAULT '',
    sources       TEXT NOT NULL DEFAULT '[]', -- JSON list: sheet, front_matter, link, world, llm
    note_path     TEXT                        -- the entity's own sheet or world document
);
CREATE TABLE entity_aliases (
    entity_id     INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    alias         TEXT NOT NULL,
    folded        TEXT NOT NULL              -- lowercase, accents stripped: what matching uses
);
CREATE INDEX entity_aliases_by_folded ON entity_aliases (folded);
CREATE TABLE entity_mentions (
    entity_id     INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    fragment_id   INTEGER NOT NULL REFERENCES fragments(id) ON DELETE CASCADE,
    n_mentions    INTEGER NOT NULL,
    PRIMARY KEY (entity_id, fragment_id)
);
CREATE INDEX entity_mentions_by_fragment ON entity_mentions (fragment_id);

-- LLM output cached by what it depends on: never recomputed for unchanged text.
CREATE TABLE annotations (
    content_hash   TEXT NOT NULL,
    model          TEXT NOT NULL,
    prompt_version TEXT NOT NULL,
    text           TEXT NOT NULL,
    PRIMARY KEY (content_hash, model, prompt_version)
);

-- Conversation history per Discord channel, thread or CLI chat.
CREATE TABLE conversation_turns (
    id            INTEGER PRIMARY KEY,
    conversation  TEXT NOT NULL,
    role          TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    content       TEXT NOT NULL,
    created_at    TEXT NOT NULL DEFAULT (datetime('now'))
);
CREATE INDEX conversation_turns_by_conversation ON conversation_turns (conversation, id);
