#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, fetch the embedded models, ingest
# the sample campaign built into the binary (eval/campaign: 40 sessions, 15 sheets, 8 world
# documents), list what was detected and answer a question with citations. No Ollama, no
# Discord.
set -euo pipefail
cd "$(dirname "$0")/.."
# The default target dir (or the caller's CARGO_TARGET_DIR), so the README's next command,
# `cargo test --locked`, reuses this build instead of compiling LanceDB a second time.

bash scripts/install-deps.sh
# --no-annotate: the annotations (what the rerank and the one-line summaries read) cost ~20 s
# per fragment with the smoke-test model on a 2-core machine, ~25 minutes for the sample's 72
# fragments; `oraculo annotate` fills them later. Without them the rerank keeps the fusion
# order and says so.
cargo run --locked --quiet -- ingest --no-annotate
cargo run --locked --quiet -- sources
cargo run --locked --quiet -- ask "¿Qué pasó con el archiduque?"
