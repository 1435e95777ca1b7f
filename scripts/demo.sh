#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, fetch the embedded model, ingest
# the sample campaign built into the binary and list what was detected. No Ollama, no Discord.
set -euo pipefail
cd "$(dirname "$0")/.."
# The default target dir (or the caller's CARGO_TARGET_DIR), so the README's next command,
# `cargo test --locked`, reuses this build instead of compiling LanceDB a second time.

bash scripts/install-deps.sh
cargo run --locked --quiet -- ingest
cargo run --locked --quiet -- sources
cargo run --locked --quiet -- ask "¿Quién es Madre Ulva?"
