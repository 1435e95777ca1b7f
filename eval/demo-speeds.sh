#!/usr/bin/env bash
# The demo question at three machine speeds: the embedded 1.5B answers «¿Qué pasó con el
# archiduque?» on the sample campaign as a machine reading 20, 40 and 80 prompt tokens a
# second would (`--pace`: the model waits where this machine is faster; the context is
# planned for that speed). A right answer says he vanished (sessions 9, 10) and came back as
# the Heraldo de la Marea Baja (30, 31, 39), each claim cited.
#
# Usage: eval/demo-speeds.sh [QUESTION]    (ORACULO_PROFILE=debug for a debug build)
# Needs the models (scripts/fetch-models.sh --chat 1.5b) and the sample ingested
# (`oraculo ingest --no-annotate`; the script runs it, which costs nothing when done).
set -euo pipefail
cd "$(dirname "$0")/.."

question="${1:-¿Qué pasó con el archiduque?}"
profile="${ORACULO_PROFILE:-release}"
if [[ "$profile" == release ]]; then
    cargo build --locked --release --quiet
else
    cargo build --locked --quiet
fi
bin="${CARGO_TARGET_DIR:-target}/$profile/oraculo"

"$bin" ingest --no-annotate >/dev/null
for pace in 20 40 80; do
    echo "=== as a machine reading $pace prompt tokens a second ==="
    started=$(date +%s%N)
    "$bin" ask --pace "$pace" "$question"
    echo "($(( ($(date +%s%N) - started) / 1000000 )) ms of wall time)"
    echo
done
