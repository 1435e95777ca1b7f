#!/bin/sh
# Pulls into Ollama the models a config.toml names: [embedder] model and [chat] model (the
# compose `ollama` profile runs both on Ollama, whatever their `backend` says), or Oráculo's
# defaults, bge-m3 and qwen2.5:14b, where the file names none. A model already pulled costs
# a check. Run by compose's `ollama-pull` service in the ollama image (POSIX sh and awk), with
# OLLAMA_HOST pointing at the server; by hand: `sh scripts/ollama-pull.sh config.toml`.
#
# Usage: ollama-pull.sh CONFIG [--print]   (--print: list the models, pull nothing)
set -eu

config="${1:?usage: ollama-pull.sh CONFIG [--print]}"
# The defaults src/config/models.rs holds (DEFAULT_OLLAMA_EMBED_MODEL, DEFAULT_OLLAMA_CHAT_MODEL).
default_embedder="bge-m3"
default_chat="qwen2.5:14b"

# `model = "…"` in the [embedder] or [chat] table (comments and other tables skipped).
model_in() {
    [ -f "$config" ] || { echo ""; return; }
    awk -v table="$1" '
        /^[ \t]*\[/ { line = $0; sub(/^[ \t]*\[+[ \t]*/, "", line); sub(/[ \t]*\].*$/, "", line); current = line; next }
        current == table && /^[ \t]*model[ \t]*=/ {
            value = $0
            sub(/^[ \t]*model[ \t]*=[ \t]*/, "", value)
            if (value ~ /^"/) { sub(/^"/, "", value); sub(/".*$/, "", value) }
            else if (value ~ /^\x27/) { sub(/^\x27/, "", value); sub(/\x27.*$/, "", value) }
            print value; exit
        }' "$config"
}

[ -f "$config" ] || echo "ollama-pull: no $config: pulling the defaults" >&2
embedder="$(model_in embedder)"
chat="$(model_in chat)"
embedder="${embedder:-$default_embedder}"
chat="${chat:-$default_chat}"

if [ "${2:-}" = "--print" ]; then
    printf '%s\n%s\n' "$embedder" "$chat"
    exit 0
fi
for model in "$embedder" "$chat"; do
    echo "ollama-pull: $model (from $config)" >&2
    ollama pull "$model"
done
