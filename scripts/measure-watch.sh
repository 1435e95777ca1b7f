#!/usr/bin/env bash
# Seconds from a save to the note being answerable, for a 1-session change, with the embedded
# embedder: a copy of CAMPAIGN is ingested once (no annotations), then `oraculo ingest --watch`
# follows it while this script saves a new session (a copy of NEW_FROM under a new number) and
# then edits an existing one (EDIT), timing each save to the watcher's report of its commit.
#
#   scripts/measure-watch.sh [CAMPAIGN] [NEW_FROM] [EDIT]
#   ORACULO=target/release/oraculo scripts/measure-watch.sh   # another build
#
# Defaults: the sample campaign (eval/campaign), its «sesion 25.md» copied as session 41, and
# «Sesión 38.md» edited. Prints one line per save; the work folder is kept in $WORK.
set -euo pipefail
cd "$(dirname "$0")/.."
CAMPAIGN=${1:-eval/campaign}
NEW_FROM=${2:-Sesiones/sesion 25.md}
EDIT=${3:-Sesiones/Sesión 38.md}
ORACULO=${ORACULO:-${CARGO_TARGET_DIR:-target}/debug/oraculo}
WORK=${WORK:-$(mktemp -d)}
NEW_NUMBER=${NEW_NUMBER:-41}
# Where the new session goes, and the heading it gets (CRD3: NEW_PATH=C1E116.md NEW_HEADING=).
NEW_PATH=${NEW_PATH:-Sesiones/Sesión $NEW_NUMBER.md}
NEW_HEADING=${NEW_HEADING-# Sesión $NEW_NUMBER}
mkdir -p "$WORK/data"
ln -sfn "${ORACULO_MODELS:-$HOME/.local/share/oraculo/models}" "$WORK/data/models"
rm -rf "$WORK/campaign" && cp -r "$CAMPAIGN" "$WORK/campaign"
flags=(--campaign "$WORK/campaign" --data "$WORK/data")

echo "full ingest of $CAMPAIGN into $WORK (once)" >&2
start=$(date +%s.%N)
"$ORACULO" ingest "${flags[@]}" --no-annotate --json > "$WORK/full.json"
echo "full ingest: $(echo "$(date +%s.%N) - $start" | bc) s" >&2

"$ORACULO" ingest "${flags[@]}" --no-annotate --watch --json > "$WORK/watch.jsonl" 2> "$WORK/watch.log" &
watcher=$!
trap 'kill "$watcher" 2>/dev/null || true' EXIT

# Waits for the watcher's next ingest report past line $1 of its output; prints that line.
next_ingest() {
  local seen=$1
  for _ in $(seq 1 6000); do
    local line
    line=$(awk -v seen="$seen" 'NR > seen && /"event":"ingested"/ { print; exit }' "$WORK/watch.jsonl")
    if [ -n "$line" ]; then echo "$line"; return; fi
    sleep 0.01
  done
  echo "no ingest reported" >&2; exit 1
}

next_ingest 0 > /dev/null  # the catch-up
lines=$(wc -l < "$WORK/watch.jsonl")

measure() {
  local what=$1 saved=$2
  local line
  line=$(next_ingest "$lines")
  local done_at
  done_at=$(date +%s.%N)
  lines=$(wc -l < "$WORK/watch.jsonl")
  local since windows
  since=$(echo "$line" | sed -E 's/.*"seconds_since_change":([0-9.]+).*/\1/')
  windows=$(echo "$line" | sed -E 's/.*"windows_embedded":([0-9]+).*/\1/')
  printf '%s: %.2f s from the save to the commit (watcher: %.2f s from the first event; %s windows embedded)\n' \
    "$what" "$(echo "$done_at - $saved" | bc)" "$since" "$windows"
}

if [ -n "$NEW_HEADING" ]; then
  sed -E "s/^# .*/$NEW_HEADING/" "$WORK/campaign/$NEW_FROM" > "$WORK/new-session.md"
else
  cp "$WORK/campaign/$NEW_FROM" "$WORK/new-session.md"
fi
saved=$(date +%s.%N)
cp "$WORK/new-session.md" "$WORK/campaign/$NEW_PATH"
measure "new session $NEW_PATH" "$saved"

saved=$(date +%s.%N)
printf '\nAl final de la sesión, el grupo encontró un mapa del faro escondido en una bota.\n' >> "$WORK/campaign/$EDIT"
measure "edited $(basename "$EDIT")" "$saved"
