#!/usr/bin/env bash
# The compaction benchmark: one note of a 3-note campaign saved SAVES times (default
# 1,000), `oraculo ingest` after each save, through the Ollama stand-in (scripts/fake-ollama.py).
# Prints the index's size (index.sqlite and the vector table, in file bytes) and the vector
# table's versions at their largest, after the last save, and against a fresh ingest of the same
# folder: the goal is the index within 1.5x of the fresh one. A measurement, not a test: run it
# on a release build and name the machine.
#
#   ORACULO=target/release/oraculo SAVES=1000 bash scripts/bench-saves.sh
set -uo pipefail
cd "$(dirname "$0")/.."
ORACULO=$(realpath "${ORACULO:-${CARGO_TARGET_DIR:-target}/release/oraculo}")
SAVES=${SAVES:-1000}
WORK=$(mktemp -d /tmp/oraculo-bench-saves.XXXXXX)
trap 'kill "$OLLAMA" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
python3 scripts/fake-ollama.py "$WORK/ollama.port" &
OLLAMA=$!
for _ in $(seq 1 100); do [ -s "$WORK/ollama.port" ] && break; sleep 0.05; done
export ORACULO_EMBEDDER=ollama ORACULO_OLLAMA_URL="http://127.0.0.1:$(cat "$WORK/ollama.port")" ORACULO_LOG=warn
unset ORACULO_CAMPAIGN ORACULO_DATA ORACULO_CONFIG

dir=$WORK/campaign data=$WORK/data fresh=$WORK/fresh
mkdir -p "$dir/Sesiones"
for i in 1 2 3; do
  printf '# Sesión %d\nEn la sesión %d los héroes llegaron al faro número %d y hablaron con Norkiel.\n' \
    "$i" "$i" "$i" > "$dir/Sesiones/Sesion $i.md"
done
ingest() { timeout 60 "$ORACULO" ingest --campaign "$1" --data "$2" --no-annotate > /dev/null 2>&1; }
vectors() { find "$1" -type d -name vectors | head -1; }
index() { find "$1/campaigns" -mindepth 1 -maxdepth 1 -type d | head -1; }
# File bytes (directories' own blocks left out: on a table this small they would be most of it).
bytes() { find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'; }
versions() { find "$1" -path '*/_versions/*' -type f | wc -l; }

started=$(date +%s.%N)
largest=0 largest_versions=0 failed=0
for save in $(seq 1 "$SAVES"); do
  printf '# Sesión 2\nEl faro, guardado %d veces; Norkiel lo vio.\n' "$save" > "$dir/Sesiones/Sesion 2.md"
  ingest "$dir" "$data" || failed=$((failed + 1))
  if [ $((save % 50)) -eq 0 ]; then
    size=$(bytes "$(index "$data")")
    [ "$size" -gt "$largest" ] && largest=$size largest_versions=$(versions "$(vectors "$data")")
  fi
done
took=$(awk -v a="$(date +%s.%N)" -v b="$started" 'BEGIN { printf "%.1f", a - b }')
after_last=$(bytes "$(index "$data")")
# Versions younger than the read grace (10 s) are kept for questions still reading them: one
# more save after it cleans them up, as a watched vault's next save would.
sleep 11
printf '# Sesión 2\nEl faro, guardado por última vez; Norkiel lo vio.\n' > "$dir/Sesiones/Sesion 2.md"
ingest "$dir" "$data"
settled=$(bytes "$(index "$data")")
settled_vectors=$(bytes "$(vectors "$data")")
settled_versions=$(versions "$(vectors "$data")")
ingest "$dir" "$fresh"
fresh_size=$(bytes "$(index "$fresh")")
fresh_vectors=$(bytes "$(vectors "$fresh")")
ratio=$(awk -v a="$settled" -v b="$fresh_size" 'BEGIN { printf "%.2f", a / b }')
peak_ratio=$(awk -v a="$largest" -v b="$fresh_size" 'BEGIN { printf "%.2f", a / b }')
echo "saves: $SAVES ingests in $took s ($failed failed); the index at its largest $largest bytes" \
  "(${peak_ratio}x fresh; the vector table then in $largest_versions versions), after the last save $after_last bytes;" \
  "one save after the read grace: $settled bytes = ${ratio}x a fresh ingest's $fresh_size bytes" \
  "(the vector table alone: $settled_vectors bytes in $settled_versions versions, fresh $fresh_vectors)"
awk -v r="$ratio" 'BEGIN { exit !(r <= 1.5) }' && echo "within 1.5x: yes" || { echo "within 1.5x: NO"; exit 1; }
