#!/usr/bin/env bash
# The fault suite of issue 38, against the real binary and Ollama's wire format on 127.0.0.1
# (scripts/fake-ollama.py): each fault prints one PASS/FAIL/SKIP line with why and a figure
# (time, size, count). Every command runs under a timeout; the whole suite takes a minute or
# two on a debug build. Exits 1 when any fault fails.
#
#   scripts/faults.sh                      # the debug build in $CARGO_TARGET_DIR (or target/)
#   ORACULO=target/release/oraculo scripts/faults.sh
#
# The unreadable-folder fault needs a user that permissions apply to: as root it runs that
# fault as a throwaway system user (created if missing, with useradd), else it says SKIP.
set -uo pipefail
cd "$(dirname "$0")/.."
ORACULO=${ORACULO:-${CARGO_TARGET_DIR:-target}/debug/oraculo}
[ -x "$ORACULO" ] || { echo "faults: no binary at $ORACULO (cargo build first)" >&2; exit 2; }
ORACULO=$(realpath "$ORACULO")
WORK=$(mktemp -d /tmp/oraculo-faults.XXXXXX)
chmod 755 "$WORK"
FAILED=0
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  chmod -R u+rwX "$WORK" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

pass() { echo "PASS $1: $2"; }
fail() { echo "FAIL $1: $2"; FAILED=1; }
skip() { echo "SKIP $1: $2"; }
now() { date +%s.%N; }
since() { awk -v a="$(now)" -v b="$1" 'BEGIN { printf "%.2f", a - b }'; }

# The Ollama stand-in.
python3 scripts/fake-ollama.py "$WORK/ollama.port" &
PIDS+=($!)
for _ in $(seq 1 100); do [ -s "$WORK/ollama.port" ] && break; sleep 0.05; done
[ -s "$WORK/ollama.port" ] || { echo "faults: the Ollama stand-in did not start" >&2; exit 2; }
export ORACULO_EMBEDDER=ollama ORACULO_OLLAMA_URL="http://127.0.0.1:$(cat "$WORK/ollama.port")"
export ORACULO_LOG=${ORACULO_LOG:-warn}
unset ORACULO_CAMPAIGN ORACULO_DATA ORACULO_CONFIG

# A campaign of $2 session notes in $1.
campaign() {
  mkdir -p "$1/Sesiones"
  for i in $(seq 1 "$2"); do
    printf '# Sesión %d\nEn la sesión %d los héroes llegaron al faro número %d y hablaron con Norkiel.\n' \
      "$i" "$i" "$i" > "$1/Sesiones/Sesion $i.md"
  done
}
# oraculo SUBCOMMAND CAMPAIGN DATA [ARGS...], bounded.
run() {
  local command=$1 dir=$2 data=$3
  shift 3
  timeout 60 "$ORACULO" "$command" --campaign "$dir" --data "$data" "$@"
}
ingest() { run ingest "$1" "$2" --no-annotate "${@:3}"; }
# How many labels the index of CAMPAIGN in DATA holds.
labels() {
  run sources "$1" "$2" --json 2>/dev/null |
    python3 -c 'import json,sys; print(len(json.load(sys.stdin)["sources"]))' 2>/dev/null || echo "?"
}
bytes() { du -sb "$1" 2>/dev/null | cut -f1; }

# --- 1. an empty campaign folder -----------------------------------------------------------
fault_empty_folder() {
  local dir=$WORK/empty/campaign data=$WORK/empty/data
  campaign "$dir" 6
  ingest "$dir" "$data" > /dev/null 2>&1
  mv "$dir/Sesiones" "$WORK/empty/away"
  local started out rc
  started=$(now)
  out=$(ingest "$dir" "$data" 2>&1); rc=$?
  local took; took=$(since "$started")
  local kept; kept=$(labels "$dir" "$data")
  if [ "$rc" -ne 0 ] && [[ $out == *"holds no note"* ]] && [[ $out == *"$dir"* ]] && [ "$kept" = 6 ]; then
    ingest "$dir" "$data" --allow-removal > /dev/null 2>&1
    local confirmed; confirmed=$(labels "$dir" "$data")
    if [ "$confirmed" = 0 ]; then
      pass empty-folder "refused in $took s naming $dir, $kept of 6 labels kept; --allow-removal then left $confirmed"
    else
      fail empty-folder "--allow-removal left $confirmed labels, not 0"
    fi
  else
    fail empty-folder "rc $rc, $kept labels left: $(echo "$out" | tail -1)"
  fi
}

# --- 2. an unreadable folder, and an unreadable campaign folder -----------------------------
fault_unreadable_folder() {
  local base=$WORK/unreadable dir=$WORK/unreadable/campaign data=$WORK/unreadable/data
  campaign "$dir" 2
  mkdir -p "$dir/Arco"
  for i in 1 2 3; do printf '# Arco %d\nLa torre del arco %d.\n' "$i" "$i" > "$dir/Arco/Nota $i.md"; done
  local as=()
  if [ "$(id -u)" -eq 0 ]; then
    local user=oraculo-faults
    if ! id "$user" > /dev/null 2>&1; then
      useradd --system --no-create-home --shell /usr/sbin/nologin "$user" > /dev/null 2>&1 ||
        { skip unreadable-folder "running as root and no user could be created (useradd failed): root reads any folder"; return; }
    fi
    command -v setpriv > /dev/null ||
      { skip unreadable-folder "running as root without setpriv to run as $user: root reads any folder"; return; }
    chown -R "$user:" "$base"
    install -m 755 "$ORACULO" "$base/oraculo"
    as=(setpriv --reuid="$(id -u "$user")" --regid="$(id -g "$user")" --clear-groups env HOME="$base")
  else
    install -m 755 "$ORACULO" "$base/oraculo"
  fi
  local bin=$base/oraculo
  as_user() { timeout 60 "${as[@]}" "$bin" "$@"; }
  as_user ingest --campaign "$dir" --data "$data" --no-annotate > /dev/null 2>&1
  chmod 000 "$dir/Arco"
  local out rc
  out=$(as_user ingest --campaign "$dir" --data "$data" --no-annotate --json 2>&1); rc=$?
  chmod 755 "$dir/Arco"
  local count; count=$(as_user sources --campaign "$dir" --data "$data" --json 2>/dev/null |
    python3 -c 'import json,sys; print(len(json.load(sys.stdin)["sources"]))' 2>/dev/null)
  if [ "$rc" -ne 0 ] || [[ $out != *'"files_removed":0'* ]] || [[ $out != *"cannot be listed"* ]] || [ "$count" != 5 ]; then
    fail unreadable-folder "subfolder: rc $rc, $count of 5 labels: $(echo "$out" | tail -c 300)"
    return
  fi
  chmod 000 "$dir"
  out=$(as_user ingest --campaign "$dir" --data "$data" --no-annotate 2>&1); rc=$?
  chmod 755 "$dir"
  count=$(as_user sources --campaign "$dir" --data "$data" --json 2>/dev/null |
    python3 -c 'import json,sys; print(len(json.load(sys.stdin)["sources"]))' 2>/dev/null)
  if [ "$rc" -ne 0 ] && [[ $out == *"cannot be read"* ]] && [ "$count" = 5 ]; then
    pass unreadable-folder "a subfolder's 3 notes kept (0 removed), the campaign folder refused with an error; 5 of 5 labels"
  else
    fail unreadable-folder "campaign folder: rc $rc, $count of 5 labels: $(echo "$out" | tail -1)"
  fi
}

# Waits up to $3 s for line N+1.. of file $1 (N = $2) to hold an "ingested" event; prints it.
next_event() {
  local file=$1 seen=$2 bound=$3 line
  for _ in $(seq 1 $((bound * 20))); do
    line=$(awk -v seen="$seen" 'NR > seen && /"event":"(ingested|refused|failed)"/ { print; exit }' "$file")
    [ -n "$line" ] && { echo "$line"; return 0; }
    sleep 0.05
  done
  return 1
}

# --- 3. a dotted folder removed under the watcher --------------------------------------------
fault_dotted_folder() {
  local dir=$WORK/dotted/campaign data=$WORK/dotted/data
  campaign "$dir" 2
  mkdir -p "$dir/Arco.Viejo" "$dir/.trash"
  printf '# Sesión 9\nEl kraken de cristal hundió el barco.\n' > "$dir/Arco.Viejo/Sesion 9.md"
  ingest "$dir" "$data" > /dev/null 2>&1
  timeout 90 "$ORACULO" ingest --campaign "$dir" --data "$data" --no-annotate --watch --json \
    > "$WORK/dotted/watch.jsonl" 2> "$WORK/dotted/watch.log" &
  local watcher=$!
  PIDS+=($watcher)
  if ! next_event "$WORK/dotted/watch.jsonl" 0 30 > /dev/null; then
    fail dotted-folder "no catch-up ingest within 30 s"; kill "$watcher"; return
  fi
  local seen; seen=$(wc -l < "$WORK/dotted/watch.jsonl")
  local started; started=$(now)
  mv "$dir/Arco.Viejo" "$dir/.trash/"
  local line
  line=$(next_event "$WORK/dotted/watch.jsonl" "$seen" 20)
  local took; took=$(since "$started")
  kill "$watcher" 2>/dev/null
  if [[ $line == *'"files_removed":1'* ]] && [ "$(labels "$dir" "$data")" = 2 ]; then
    pass dotted-folder "Arco.Viejo/ moved to .trash/: its note gone from the index $took s after the move"
  else
    fail dotted-folder "no removal within 20 s of the move: ${line:-nothing reported}"
  fi
}

# --- 4. two first ingests of a fresh data dir -------------------------------------------------
fault_concurrent_first_ingests() {
  local dir=$WORK/race/campaign ok=0 busy=0 other=0 detail=""
  campaign "$dir" 20
  for round in 1 2 3 4 5; do
    local data=$WORK/race/data$round
    ingest "$dir" "$data" > "$WORK/race/a$round" 2>&1 &
    local a=$!
    ingest "$dir" "$data" > "$WORK/race/b$round" 2>&1 &
    local b=$!
    local rc_a=0 rc_b=0
    wait "$a" || rc_a=$?
    wait "$b" || rc_b=$?
    for side in "a:$rc_a" "b:$rc_b"; do
      local rc=${side#*:} out=$WORK/race/${side%%:*}$round
      if [ "$rc" -eq 0 ]; then ok=$((ok + 1))
      elif grep -q "another ingest" "$out"; then busy=$((busy + 1))
      else other=$((other + 1)); detail=$(tail -1 "$out"); fi
    done
    [ "$(labels "$dir" "$data")" = 20 ] || { other=$((other + 1)); detail="round $round: the index does not hold 20 labels"; }
  done
  if [ "$other" -eq 0 ]; then
    pass concurrent-first-ingests "5 rounds: $ok completed, $busy told «another ingest is running», 0 other errors"
  else
    fail concurrent-first-ingests "$other other outcomes: $detail"
  fi
}

# --- 5. kill -9 during an ingest ------------------------------------------------------------
fault_kill_during_ingest() {
  local dir=$WORK/kill/campaign data=$WORK/kill/data
  campaign "$dir" 120
  ingest "$dir" "$data" > /dev/null 2>&1
  local before; before=$(labels "$dir" "$data")
  for f in "$dir"/Sesiones/*.md; do printf 'Y el faro se apagó para siempre.\n' >> "$f"; done
  echo 1.0 > "$WORK/SLOW"
  # The binary itself in the background (not a shell function, whose kill would leave it running).
  "$ORACULO" ingest --campaign "$dir" --data "$data" --no-annotate > /dev/null 2>&1 &
  local victim=$!
  sleep 1.5
  kill -9 "$victim" 2>/dev/null
  wait "$victim" 2>/dev/null
  rm -f "$WORK/SLOW"
  local after; after=$(labels "$dir" "$data")
  local hits
  hits=$(run search "$dir" "$data" --json "¿Qué pasó en el faro número 7?" 2>/dev/null |
    python3 -c 'import json,sys; print(len(json.load(sys.stdin)["candidates"]))' 2>/dev/null || echo 0)
  local started; started=$(now)
  ingest "$dir" "$data" > /dev/null 2>&1
  local rc=$? took; took=$(since "$started")
  if [ "$before" = 120 ] && [ "$after" = 120 ] && [ "${hits:-0}" -gt 0 ] && [ "$rc" -eq 0 ]; then
    pass kill-during-ingest "killed 1.5 s in: the last index answers ($after labels, $hits candidates); the next ingest completed in $took s"
  else
    fail kill-during-ingest "labels $before -> $after, $hits candidates, next ingest rc $rc"
  fi
}

# --- 6. an emptied note and a second note claiming its session --------------------------------
fault_emptied_note_duplicate_number() {
  local dir=$WORK/dup/campaign data=$WORK/dup/data
  campaign "$dir" 4
  ingest "$dir" "$data" > /dev/null 2>&1
  : > "$dir/Sesiones/Sesion 3.md"
  printf '# Sesión 3\nOtra versión de la sesión 3.\n' > "$dir/Sesiones/Otra.md"
  local started; started=$(now)
  local out rc1 rc2
  out=$(ingest "$dir" "$data" 2>&1); rc1=$?
  ingest "$dir" "$data" > /dev/null 2>&1; rc2=$?
  local took; took=$(since "$started")
  local count; count=$(labels "$dir" "$data")
  if [ "$rc1" -eq 0 ] && [ "$rc2" -eq 0 ] && [ "$count" = 5 ]; then
    pass emptied-note-duplicate-number "two ingests in $took s, neither wedged; $count labels (the kept «Sesión 3» and «Sesión 3 (Otra)»)"
  else
    fail emptied-note-duplicate-number "rc $rc1/$rc2, $count labels: $(echo "$out" | tail -1)"
  fi
}

# --- 7. bad input -----------------------------------------------------------------------------
fault_bad_input() {
  local dir=$WORK/bad/campaign data=$WORK/bad/data
  campaign "$dir" 3
  printf 'PNG\0\0\0binary' > "$dir/binario.md"
  printf '# Mal\nbytes \xff\xfe inválidos\n' > "$dir/utf8.md"
  printf -- '---\ntitle: [sin cerrar\n---\n# Frente\nTexto.\n' > "$dir/frente.md"
  # Over the 8 MiB limit for one note (campaign.max_note_bytes).
  head -c 9000000 /dev/zero | tr '\0' 'a' > "$dir/enorme.md"
  mkfifo "$dir/tuberia.md"
  local started; started=$(now)
  local out rc
  out=$(ingest "$dir" "$data" --json 2>/dev/null); rc=$?
  local took; took=$(since "$started")
  local named
  named=$(echo "$out" | python3 -c '
import json, sys
summary = json.load(sys.stdin)
paths = {w["path"] for w in summary["warnings"]}
print(sum(p in paths for p in ["binario.md", "utf8.md", "frente.md", "enorme.md"]), len(summary["warnings"]))' 2>/dev/null)
  local count; count=$(labels "$dir" "$data")
  if [ "$rc" -eq 0 ] && [ "${named%% *}" = 4 ] && [ "$count" -ge 3 ]; then
    pass bad-input "binary, invalid UTF-8, bad front matter, a 9 MB note and a FIFO: ingest done in $took s, ${named#* } warnings naming the 4 files, $count labels"
  else
    fail bad-input "rc $rc, warnings naming ${named:-?} of 4, $count labels"
  fi
}

# --- 8. many saves: the vector table stays bounded ------------------------------------------
fault_many_saves() {
  local dir=$WORK/saves/campaign data=$WORK/saves/data fresh=$WORK/saves/fresh
  campaign "$dir" 3
  local started; started=$(now)
  for save in $(seq 1 30); do
    printf '# Sesión 2\nEl faro, guardado %d veces.\n' "$save" > "$dir/Sesiones/Sesion 2.md"
    ingest "$dir" "$data" > /dev/null 2>&1
  done
  # Past the grace a question may still read a version in (10 s): one more save cleans up.
  sleep 11
  printf '# Sesión 2\nEl faro, guardado por última vez.\n' > "$dir/Sesiones/Sesion 2.md"
  ingest "$dir" "$data" > /dev/null 2>&1
  local took; took=$(since "$started")
  local versions; versions=$(find "$data" -path '*vectors*/_versions/*' -type f 2>/dev/null | wc -l)
  ingest "$dir" "$fresh" > /dev/null 2>&1
  local size size_fresh
  size=$(bytes "$(find "$data" -type d -name vectors | head -1)")
  size_fresh=$(bytes "$(find "$fresh" -type d -name vectors | head -1)")
  if [ "$versions" -le 4 ]; then
    pass many-saves "31 saves in $took s: $versions table versions kept (61 before the cleanup), vectors $size bytes vs $size_fresh fresh"
  else
    fail many-saves "$versions table versions after 31 saves"
  fi
}

SUITE_STARTED=$(now)
for fault in fault_empty_folder fault_unreadable_folder fault_dotted_folder fault_concurrent_first_ingests \
  fault_kill_during_ingest fault_emptied_note_duplicate_number fault_bad_input fault_many_saves; do
  "$fault"
done
echo "faults: done in $(since "$SUITE_STARTED") s"
exit "$FAILED"
