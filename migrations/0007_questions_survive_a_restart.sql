-- A question the bot took is written here before it is acknowledged, and removed once its answer
-- (or why there is none) has been posted. What a crash, a kill or an OOM leaves here is answered
-- on the next start. `delivery` is the front end's own record of where the answer goes (for
-- Discord: the asker, the channel, the asking message or the interaction and its 15-minute
-- token), opaque to the core; the audience is decided again from it, under the configuration
-- the bot restarts with. `attempts` counts the starts that took the question up again: one that
-- keeps bringing the bot down is given up, not tried forever.
CREATE TABLE questions_in_flight (
    id INTEGER PRIMARY KEY,
    asked_at INTEGER NOT NULL,
    conversation TEXT NOT NULL,
    question TEXT NOT NULL,
    delivery TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0
);
